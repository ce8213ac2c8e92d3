//! A uTP torrent through the testbed: opentracker and a Transmission seeder on the server, a
//! leecher on the LAN host, TCP between the peers refused. The leecher downloads over uTP only,
//! and fills most of the 10 Mbit/s link once unchoked (about 35 s).
//!
//! Needs root, `ip netns`, transmission-daemon, transmission-cli and opentracker: ignored by
//! default, run with --ignored (scripts/test.sh does).

use slipstream_testbed::torrent::SEED_PORT;
use slipstream_testbed::{netns_supported, unique_prefix, Testbed, TopologySpec};

#[test]
#[ignore = "needs root, network namespaces and Transmission: scripts/test.sh runs it (--ignored)"]
fn leecher_downloads_over_utp_only() {
    if let Err(why) = netns_supported() {
        panic!("cannot run here: {why}");
    }
    let spec = TopologySpec {
        delay_bin: Some(env!("CARGO_BIN_EXE_slipstream-delay").into()),
        ipv6: false,
        ..TopologySpec::with_prefix(unique_prefix("sstor"))
    };
    let dir = std::env::temp_dir().join(&spec.name_prefix);
    let tb = Testbed::build(spec).expect("build testbed");
    let swarm = tb.start_swarm(&dir, 1, 40 << 20).expect("tracker and seeder");
    let leecher = tb.start_leecher(&swarm, 1).expect("leecher");
    let res = swarm
        .start_download(leecher, 30.0)
        .expect("start")
        .finish()
        .expect("download");
    let r = res.clone().into_iperf();
    // The seeder unchokes it at its next rechoke (every 10 s), then uTP ramps up for some 6 s.
    let last = r.goodput_mbps_between(22.0, 30.0).expect("22-30 s window");
    eprintln!(
        "uTP leecher: {:.2} Mbit/s overall, {last:.2} over 22-30 s, peers {:?}",
        r.goodput_mbps, res.peers
    );
    let per_s: Vec<String> = r
        .intervals
        .chunks(2)
        .map(|c| format!("{:.1}", c.iter().map(|i| i.bytes).sum::<u64>() as f64 * 8e-6))
        .collect();
    eprintln!("per second: {}", per_s.join(" "));
    drop(tb);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!res.peers.is_empty(), "the leecher found no peer");
    assert!(
        res.peers.iter().all(|p| p.is_utp && p.port == SEED_PORT),
        "{:?}",
        res.peers
    );
    assert!(
        last > 8.0 && last < 10.0,
        "uTP goodput {last} Mbit/s over 22-30 s"
    );
}
