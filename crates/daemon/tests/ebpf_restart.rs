//! The eBPF datapath's netlink filters (how kernels before 6.6, OpenWrt 23.05's 5.15 among them,
//! attach tc programs; forced here with `SLIPSTREAM_TC_ATTACH=netlink` on a kernel with TCX)
//! across `kill -9`: a killed daemon leaves its filters and, through their programs, its maps.
//! Ten times: kill -9, start again; after each start the router's LAN interface has exactly one
//! filter of each program (at the fixed priority and handle) and the killed daemon's programs'
//! maps are gone (freed once its filters were replaced), so one set is attached. Then the clsact
//! qdisc is deleted under the last daemon (as another tc user may): its re-check attaches the
//! filters again within seconds and counts it in `/metrics`. Then a last kill -9 and
//! `--cleanup`: no filter left, no map of the last daemon left.
//!
//! Needs root, BPF, `tc` and the testbed's tools; ignored by default, run with --ignored.

use std::path::Path;
use std::time::{Duration, Instant};

use slipstream_testbed::{netns_supported, Ns, Testbed};

mod common;
use common::{forward_testbed, start_router_daemon, TestDir};

/// Program ids of our filters at one hook of `dev`, from `tc filter show` (bpf filters print
/// their program's name and `id N`), with their priority and handle.
fn filters(tb: &Testbed, dev: &str, hook: &str, name: &str) -> Vec<(String, u32)> {
    let out = tb
        .run_in(Ns::Router, &["tc", "filter", "show", "dev", dev, hook])
        .unwrap_or_default();
    out.lines()
        .filter(|l| l.contains(name))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let after = |key: &str| {
                words
                    .iter()
                    .position(|w| *w == key)
                    .and_then(|i| words.get(i + 1))
                    .map(|w| (*w).to_owned())
                    .unwrap_or_default()
            };
            let id = after("id").parse().unwrap_or(0);
            (format!("pref {} handle {}", after("pref"), after("handle")), id)
        })
        .collect()
}

/// The ingress and egress filters of the daemon on `dev`: (where, program id) each.
fn ours(tb: &Testbed, dev: &str) -> Vec<(String, u32)> {
    let mut all = filters(tb, dev, "ingress", "slipstream_ingress");
    all.extend(filters(tb, dev, "egress", "slipstream_egress"));
    all
}

/// The maps of the programs `ids`.
fn maps_of(ids: &[u32]) -> Vec<u32> {
    let mut maps: Vec<u32> = ids
        .iter()
        .flat_map(|id| slipstream_ebpf::program_map_ids(*id).unwrap_or_default())
        .collect();
    maps.sort_unstable();
    maps.dedup();
    maps
}

/// Waits (the kernel frees programs and maps after an RCU grace period) until none of `maps`
/// exists; returns those still there after 3 s.
fn gone(maps: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left: Vec<u32> = maps
            .iter()
            .copied()
            .filter(|m| slipstream_ebpf::map_exists(*m))
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs root, network namespaces, tc and BPF: scripts/test.sh runs it (--ignored)"]
fn kill_and_start_ten_times_leaves_one_filter_and_cleanup_none() {
    if let Err(why) = netns_supported() {
        panic!("cannot run here: {why}");
    }
    // This test binary runs only this test: the variable reaches only its daemons.
    std::env::set_var("SLIPSTREAM_TC_ATTACH", "netlink");
    let tb = forward_testbed("sskill");
    let dir = TestDir::new("ebpf-kill");
    let dev = tb.router_lan_if().to_owned();
    let lan = format!("\"{dev}\"");
    let started = Instant::now();
    let mut daemon = start_router_daemon(&tb, &dir, &lan, "engine = \"ebpf\"\n");
    let mut previous: Vec<u32> = Vec::new();
    for cycle in 1..=10 {
        let filters = ours(&tb, &dev);
        let where_: Vec<&str> = filters.iter().map(|(w, _)| w.as_str()).collect();
        assert_eq!(
            where_,
            ["pref 1 handle 0x5353", "pref 1 handle 0x5353"],
            "cycle {cycle}: one filter per hook, at the fixed priority and handle: {filters:?}\n{}",
            daemon.log()
        );
        let ids: Vec<u32> = filters.iter().map(|(_, id)| *id).collect();
        let maps = maps_of(&ids);
        assert!(maps.len() >= 5, "cycle {cycle}: the programs' maps {maps:?}");
        assert!(
            maps.iter().all(|m| !previous.contains(m)),
            "cycle {cycle}: a new set of maps"
        );
        let left = gone(&previous);
        assert!(
            left.is_empty(),
            "cycle {cycle}: the killed daemon's maps {left:?} are still there"
        );
        previous = maps;
        daemon.kill().expect("kill -9");
        // The killed daemon's filters stay (they pass everything once its heartbeat is stale).
        assert_eq!(ours(&tb, &dev).len(), 2, "cycle {cycle}: left behind by kill -9");
        daemon = start_router_daemon(&tb, &dir, &lan, "engine = \"ebpf\"\n");
    }
    let cycles = started.elapsed();
    // Another tool deletes the clsact qdisc (our filters go with it): the daemon's re-check
    // (every 2 s) puts them back and counts it.
    tb.run_in(Ns::Router, &["tc", "qdisc", "del", "dev", &dev, "clsact"])
        .expect("delete clsact");
    assert_eq!(ours(&tb, &dev), Vec::new(), "gone with the qdisc");
    let deleted = Instant::now();
    let mut back = None;
    while deleted.elapsed() < Duration::from_secs(5) {
        let m = daemon.scrape(&tb).unwrap_or_default();
        let reattached =
            slipstream_testbed::daemon::metric_value(&m, "slipstream_ebpf_reattached_total", &[]);
        if ours(&tb, &dev).len() == 2 && reattached == Some(1.0) {
            back = Some(deleted.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let back = back.unwrap_or_else(|| panic!("filters not back within 5 s:\n{}", daemon.log()));
    // Two more re-checks find them in place: nothing detached or attached again.
    std::thread::sleep(Duration::from_millis(4500));
    let m = daemon.scrape(&tb).unwrap_or_default();
    assert_eq!(
        slipstream_testbed::daemon::metric_value(&m, "slipstream_ebpf_reattached_total", &[]),
        Some(1.0),
        "{}",
        daemon.log()
    );
    assert_eq!(ours(&tb, &dev).len(), 2, "still attached");
    daemon.kill().expect("kill -9");
    let cleanup = tb
        .exec(
            Ns::Router,
            &[
                Path::new(env!("CARGO_BIN_EXE_slipstreamd")).as_os_str(),
                "--config".as_ref(),
                dir.cfg.as_os_str(),
                "--cleanup".as_ref(),
            ],
        )
        .output()
        .expect("slipstreamd --cleanup");
    assert!(
        cleanup.status.success(),
        "--cleanup: {}",
        String::from_utf8_lossy(&cleanup.stderr)
    );
    assert_eq!(ours(&tb, &dev), Vec::new(), "--cleanup leaves no filter");
    let left = gone(&previous);
    assert!(left.is_empty(), "--cleanup leaves no map: {left:?}");
    eprintln!(
        "10 kill -9 / start cycles in {:.1} s: one filter per hook each time, the killed daemon's \
         maps freed; filters back {:.1} s after their clsact qdisc was deleted; --cleanup removed \
         the last filters and maps",
        cycles.as_secs_f64(),
        back.as_secs_f64()
    );
}
