//! Builds the tc program (src/bpf/slipstream.bpf.c) with clang into OUT_DIR; src/lib.rs embeds
//! the object with `include_bytes!`.
//!
//! Why built here and not committed: the object can never drift from its source, no binary sits
//! in git, and BPF bytecode is the same for every target, so a cross build for aarch64 needs only
//! the host's clang (`-target bpf`). The price is clang and libbpf's headers at build time
//! (scripts/setup.sh installs `clang` and `libbpf-dev`; OpenWrt's SDK has them as qosify uses).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "src/bpf/slipstream.bpf.c";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
    println!("cargo:rerun-if-env-changed=BPF_CFLAGS");
    println!("cargo:rerun-if-env-changed=BPF_STRIP");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("slipstream.bpf.o");
    let clang = std::env::var("BPF_CLANG").unwrap_or_else(|_| "clang".to_owned());
    let mut cmd = Command::new(&clang);
    // -mcpu=v3: the atomic compare-and-swap of the right edge (kernel 5.12+).
    cmd.args(["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror"]);
    // <linux/bpf.h> includes <asm/types.h>, which Debian keeps under the host's multiarch dir.
    if let Some(dir) = multiarch_include() {
        cmd.arg(format!("-I{dir}"));
    }
    if let Ok(flags) = std::env::var("BPF_CFLAGS") {
        cmd.args(flags.split_whitespace());
    }
    cmd.arg("-c").arg(source).arg("-o").arg(&out);
    let status = cmd.status().unwrap_or_else(|e| {
        panic!(
            "running {clang} to build the tc program: {e} (install clang and libbpf-dev: scripts/setup.sh)"
        )
    });
    assert!(status.success(), "{clang} failed to build {source}");
    // DWARF is not needed at run time (BTF, which the loader needs, stays): about half the
    // object, which is embedded in the router binary. Skipped where llvm-strip is missing.
    let strip = std::env::var("BPF_STRIP").unwrap_or_else(|_| "llvm-strip".to_owned());
    let _ = Command::new(strip).arg("-g").arg(&out).status();
}

fn multiarch_include() -> Option<String> {
    let out = Command::new("cc").arg("-print-multiarch").output().ok()?;
    let arch = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    let dir = format!("/usr/include/{arch}");
    (!arch.is_empty() && std::path::Path::new(&dir).exists()).then_some(dir)
}
