//! Prints the rules Slipstream would install for a config: `cargo run -p slipstream-firewall
//! --example print_rules -- [config.toml] [iptables|nftables]`.
use slipstream_firewall::{plan, Backend};
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/slipstream.toml"));
    let backend = match args.next().as_deref() {
        Some("nftables") => Backend::Nftables,
        _ => Backend::IptablesLegacy,
    };
    let config = slipstream_config::load(&path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    print!("{}", plan(&config, backend));
}
