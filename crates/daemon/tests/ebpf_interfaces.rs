//! The eBPF datapath attaches its tc programs to LAN interfaces that appear after the daemon
//! started (a bridge or VLAN created later, a Wi-Fi interface brought up late): on the namespace
//! testbed the daemon starts with `lan_interfaces = [<br-lan>, "sslate+"]`, then a veth pair
//! `sslate0` / `zzpeer0` is created in the router's namespace, and within a few seconds the
//! kernel lists the daemon's programs at both TCX hooks of `sslate0` (this kernel has TCX),
//! while the peer, which matches no pattern, has none.
//!
//! Needs root, BPF and the testbed's tools; ignored by default, run with --ignored; without
//! them it fails saying why.

use std::time::{Duration, Instant};

use slipstream_ebpf::{tcx_programs, Hook};
use slipstream_testbed::{netns_supported, Ns, Testbed};

mod common;
use common::{forward_testbed, start_router_daemon, TestDir};

/// The programs TCX runs on `dev` in the router's namespace, ingress then egress (bpftool 7.1
/// does not list TCX links by interface; the kernel's BPF_PROG_QUERY does).
#[allow(unsafe_code, reason = "setns(2) has no safe wrapper in libc")]
fn programs_on(tb: &Testbed, dev: &str) -> String {
    let ns = format!("/var/run/netns/{}", tb.ns_name(Ns::Router));
    let dev = dev.to_owned();
    std::thread::spawn(move || {
        let file = std::fs::File::open(&ns).expect("router namespace file");
        // SAFETY: a valid namespace descriptor; only this short-lived thread moves.
        let r = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns into {ns}");
        [Hook::Ingress, Hook::Egress]
            .map(|hook| format!("{hook:?}: {:?}", tcx_programs(&dev, hook).unwrap_or_default()))
            .join("; ")
    })
    .join()
    .expect("query thread")
}

#[test]
#[ignore = "needs root, network namespaces and BPF: scripts/test.sh runs it (--ignored)"]
fn interfaces_that_appear_after_start_are_attached() {
    if let Err(why) = netns_supported() {
        panic!("cannot run here: {why}");
    }
    let tb = forward_testbed("sslate");
    let dir = TestDir::new("ebpf-late");
    let daemon = start_router_daemon(
        &tb,
        &dir,
        &format!("\"{}\", \"sslate+\"", tb.router_lan_if()),
        "engine = \"ebpf\"\n",
    );
    let lan = programs_on(&tb, tb.router_lan_if());
    tb.run_in(
        Ns::Router,
        &[
            "ip", "link", "add", "sslate0", "type", "veth", "peer", "name", "zzpeer0",
        ],
    )
    .expect("veth pair created after start");
    tb.run_in(Ns::Router, &["ip", "link", "set", "sslate0", "up"])
        .expect("sslate0 up");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut late = String::new();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        late = programs_on(&tb, "sslate0");
        if late.contains("Ingress: [\"slipstream_ingr") && late.contains("Egress: [\"slipstream_egre") {
            break;
        }
    }
    let peer = programs_on(&tb, "zzpeer0");
    let log = daemon.log();
    let status = daemon.stop().expect("slipstreamd stops");
    let _ = std::fs::remove_dir_all(&dir.dir);
    eprintln!("TCX programs on the LAN bridge at start:\n{lan}\non sslate0:\n{late}\non zzpeer0:\n{peer}");
    assert!(status.success(), "slipstreamd exit status {status}:\n{log}");
    assert!(
        lan.contains("Ingress: [\"slipstream_ingr"),
        "the programs on the LAN bridge from the start:\n{lan}\n{log}"
    );
    assert!(
        late.contains("Ingress: [\"slipstream_ingr") && late.contains("Egress: [\"slipstream_egre"),
        "both programs attached to sslate0 within 5 s:\n{late}\ndaemon log:\n{log}"
    );
    assert!(
        !peer.contains("slipstream"),
        "nothing on zzpeer0, which matches no pattern:\n{peer}"
    );
    assert!(
        log.contains("tc programs attached to sslate0"),
        "the daemon says so:\n{log}"
    );
}
