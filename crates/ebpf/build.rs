//! Builds the tc program (src/bpf/slipstream.bpf.c) with clang into OUT_DIR; src/lib.rs embeds
//! the object with `include_bytes!`.
//!
//! Why built here and not committed: the object can never drift from its source and no binary
//! sits in git. The price is clang and the kernel's uapi and libbpf headers at build time.
//!
//! Two ways to build, chosen by the environment:
//!
//! * **Debian / CI (the defaults):** the host's `clang -target bpf` (the host's byte order), the
//!   system headers (`libbpf-dev`, `linux-libc-dev`; scripts/setup.sh installs them), and the
//!   host's multiarch directory for `<asm/types.h>`. A cross build for aarch64 (little-endian,
//!   like the host) needs nothing else.
//! * **OpenWrt SDK (openwrt/Makefile passes the bpf.mk values):** `SLIPSTREAM_BPF_CLANG` (bpf.mk's
//!   `$(CLANG)`), `SLIPSTREAM_BPF_TARGET` (`$(BPF_TARGET)`: `bpfel`, or `bpfeb` on big-endian
//!   routers such as MIPS and PowerPC ones), `SLIPSTREAM_BPF_INCLUDE` (space-separated: the uapi
//!   headers and libbpf's from `$(BPF_HEADERS_DIR)`) and `SLIPSTREAM_BPF_STRIP` (`$(LLVM_STRIP)`).
//!   With include directories given, only they and clang's own are searched (`-nostdlibinc`):
//!   the build host's headers, of another arch, never enter, and `cc` is not asked for its
//!   multiarch directory.
//!
//! Either way src/bpf/include comes first: its <asm/byteorder.h> makes the headers' bit-field
//! order follow the target's byte order (see that file). `SLIPSTREAM_BPF_CFLAGS` adds flags.
//! The names carry a prefix so that bpf.mk's own make variables (`BPF_CFLAGS`, for its
//! LLVM-IR pipeline) cannot reach this build by accident.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The BPF targets clang knows: the host's byte order, little-endian, big-endian.
const TARGETS: [&str; 3] = ["bpf", "bpfel", "bpfeb"];

fn main() {
    let source = "src/bpf/slipstream.bpf.c";
    let own_include = "src/bpf/include";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-changed={own_include}");
    for var in ["CLANG", "TARGET", "INCLUDE", "CFLAGS", "STRIP"] {
        println!("cargo:rerun-if-env-changed=SLIPSTREAM_BPF_{var}");
    }
    let env = |var: &str| {
        std::env::var(format!("SLIPSTREAM_BPF_{var}"))
            .ok()
            .filter(|v| !v.trim().is_empty())
    };
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("slipstream.bpf.o");

    let clang = env("CLANG").unwrap_or_else(|| "clang".to_owned());
    let target = env("TARGET").unwrap_or_else(|| "bpf".to_owned());
    assert!(
        TARGETS.contains(&target.as_str()),
        "SLIPSTREAM_BPF_TARGET={target}: expected one of {TARGETS:?}"
    );
    let mut cmd = Command::new(&clang);
    // -mcpu=v3: the atomic compare-and-swap of the right edge (kernel 5.12+).
    cmd.args(["-O2", "-g", "-target", &target, "-mcpu=v3", "-Wall", "-Werror"]);
    cmd.arg(format!("-I{own_include}"));
    match env("INCLUDE") {
        Some(dirs) => {
            cmd.arg("-nostdlibinc");
            for dir in dirs.split_whitespace() {
                assert!(
                    Path::new(dir).is_dir(),
                    "SLIPSTREAM_BPF_INCLUDE: {dir} is not a directory"
                );
                cmd.arg(format!("-I{dir}"));
            }
        }
        // <linux/bpf.h> includes <asm/types.h>, which Debian keeps under the host's multiarch dir.
        None => {
            if let Some(dir) = multiarch_include() {
                cmd.arg(format!("-I{dir}"));
            }
        }
    }
    if let Some(flags) = env("CFLAGS") {
        cmd.args(flags.split_whitespace());
    }
    cmd.arg("-c").arg(source).arg("-o").arg(&out);
    let status = cmd.status().unwrap_or_else(|e| {
        panic!(
            "running {clang} to build the tc program: {e} (install clang and libbpf-dev: \
             scripts/setup.sh; or build slipstreamd without the eBPF datapath: \
             --no-default-features)"
        )
    });
    assert!(
        status.success(),
        "{clang} failed to build {source} (-target {target})"
    );
    // DWARF is not needed at run time (BTF, which the loader needs, stays): about half the
    // object, which is embedded in the router binary. Skipped where llvm-strip is missing.
    let strip = env("STRIP").unwrap_or_else(|| "llvm-strip".to_owned());
    let _ = Command::new(strip).arg("-g").arg(&out).status();
}

fn multiarch_include() -> Option<String> {
    let out = Command::new("cc").arg("-print-multiarch").output().ok()?;
    let arch = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    let dir = format!("/usr/include/{arch}");
    (!arch.is_empty() && Path::new(&dir).exists()).then_some(dir)
}
