//! The kernel's figures: the /proc parsers and their series.

use super::*;

/// `/proc/net/netfilter/nfnetlink_queue` as the kernel prints it (`%5u %6u %5u %1u %5u %5u %5u %8u %2d`).
const NFQUEUE_PROC: &str = " 8470  31337     3 2 65531     7     2    90001  1
 8471  31337     0 2   128     0     0   123456  1
    1   4242     0 2 65531     0     0       17  1
";

/// `/proc/net/dev` (header lines included).
const NET_DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    6386      58    0    0    0     0          0         0     6386      58    0    0    0     0       0          0
  br-lan: 1234567   8901    0    0    0     0          0         3 98765432109   7654    0    0    0     0       0          0
  wan0:      10       1    0    0    0     0          0         0       20       2    0    0    0     0       0          0
 wlan0:     100       1    0    0    0     0          0         0      200       2    0    0    0     0       0          0
 wlan1:     300       1    0    0    0     0          0         0      400       2    0    0    0     0       0          0
";

/// `/proc/net/netlink` as Linux 6.x prints it: the daemon's NFQUEUE socket is port 31337.
const NETLINK_PROC: &str = "\
sk               Eth Pid        Groups   Rmem     Wmem     Dump  Locks    Drops    Inode
0000000063aa6a26 0   0          00000000 0        0        0     2        0        4
00000000a1b2c3d4 12  31337      00000000 212992   0        0     2        115      88123
00000000a1b2c3d5 12  31338      00000000 0        0        0     2        9        88124
";

#[test]
fn parses_netlink_socket_drops() {
    assert_eq!(parse_netlink_drops(NETLINK_PROC, 31337), Some(115));
    assert_eq!(parse_netlink_drops(NETLINK_PROC, 31338), Some(9));
    assert_eq!(parse_netlink_drops(NETLINK_PROC, 4), None);
    assert_eq!(parse_netlink_drops("", 31337), None);
}

#[test]
fn parses_nfnetlink_queue() {
    let queues = parse_nfnetlink_queue(NFQUEUE_PROC);
    assert_eq!(queues.len(), 3);
    assert_eq!(
        queues[0],
        QueueStats {
            queue: 8470,
            peer_portid: 31337,
            waiting: 3,
            dropped_queue_full: 7,
            dropped_socket_full: 2,
            id_sequence: 90001,
            socket_overruns: 0,
        }
    );
    assert_eq!(queues[1].queue, 8471);
    assert_eq!(queues[1].id_sequence, 123_456);
    // Nothing bound: the kernel prints nothing. Garbage and short lines are skipped.
    assert!(parse_nfnetlink_queue("").is_empty());
    assert!(parse_nfnetlink_queue("x y z\n 1 2 3\n").is_empty());
    // u32 maxima (the kernel's counters wrap there).
    let max = parse_nfnetlink_queue("65535 4294967295 0 2 65531 4294967295 0 4294967295 1\n");
    assert_eq!(max[0].dropped_queue_full, u32::MAX);
    assert_eq!(max[0].id_sequence, u32::MAX);
}

#[test]
fn parses_net_dev_and_matches_wildcards() {
    let all = parse_net_dev(NET_DEV);
    assert_eq!(all.len(), 5, "{all:?}");
    let lan = &all[1];
    assert_eq!(lan.interface, "br-lan");
    assert_eq!(lan.receive_bytes, 1_234_567);
    assert_eq!(lan.transmit_bytes, 98_765_432_109);
    assert!(interface_matches("br-lan", "br-lan"));
    assert!(!interface_matches("br-lan", "br-lan2"));
    assert!(interface_matches("wlan+", "wlan1"));
    assert!(!interface_matches("wlan+", "wan0"));
    assert!(interface_matches("+", "anything"));
}

fn host_stats() -> HostStats {
    HostStats::from_providers(
        || {
            let mut q = parse_nfnetlink_queue(NFQUEUE_PROC);
            q.retain(|q| [8470, 8471].contains(&q.queue));
            for q in &mut q {
                q.socket_overruns = parse_netlink_drops(NETLINK_PROC, q.peer_portid).unwrap_or(0);
            }
            q
        },
        || {
            let patterns = ["br-lan".to_owned(), "wlan+".to_owned()];
            let mut i = parse_net_dev(NET_DEV);
            i.retain(|i| patterns.iter().any(|p| interface_matches(p, &i.interface)));
            i
        },
    )
}

#[test]
fn renders_host_stats() {
    let mut registry = registry(SharedSnapshot::new(snapshot()));
    register_host_stats(&mut registry, host_stats());
    let text = render(&registry);
    let expected: Vec<String> = [
        r#"slipstream_nfqueue_packets_total{queue="8470"} 90001"#,
        r#"slipstream_nfqueue_packets_total{queue="8471"} 123456"#,
        r#"slipstream_nfqueue_waiting_packets{queue="8470"} 3"#,
        r#"slipstream_nfqueue_dropped_packets_total{queue="8470",reason="queue_full"} 7"#,
        r#"slipstream_nfqueue_dropped_packets_total{queue="8470",reason="socket_full"} 2"#,
        // Zero drops are series too, so a dashboard query finds them before the first drop.
        r#"slipstream_nfqueue_dropped_packets_total{queue="8471",reason="queue_full"} 0"#,
        r#"slipstream_nfqueue_dropped_packets_total{queue="8471",reason="socket_full"} 0"#,
        // Both queues share socket 31337: its 115 overruns once.
        "slipstream_nfqueue_socket_overruns_total 115",
        r#"slipstream_interface_receive_bytes_total{interface="br-lan"} 1234567"#,
        r#"slipstream_interface_transmit_bytes_total{interface="br-lan"} 98765432109"#,
        r#"slipstream_interface_transmit_bytes_total{interface="wlan0"} 200"#,
        r#"slipstream_interface_transmit_bytes_total{interface="wlan1"} 400"#,
        "# UNIT slipstream_interface_transmit_bytes bytes",
        // The engine's figures are still there.
        "slipstream_packets_total 1000",
    ]
    .map(String::from)
    .into();
    assert_lines(&text, &expected);
    // Only the queues and interfaces asked for.
    assert!(!text.contains(r#"queue="1""#), "{text}");
    assert!(!text.contains(r#"interface="lo""#) && !text.contains(r#"interface="wan0""#));
    check_exposition(&text);
}

#[test]
fn host_stats_without_sources_render_no_families() {
    let mut registry = registry(SharedSnapshot::default());
    register_host_stats(&mut registry, HostStats::from_providers(Vec::new, Vec::new));
    let text = render(&registry);
    assert!(
        !text.contains("nfqueue") && !text.contains("interface_"),
        "{text}"
    );
    check_exposition(&text);
}

#[test]
fn system_host_stats_read_this_namespace() {
    // Whatever this machine has: reading must not fail or panic, and lo is always there.
    let lo = read_interface_bytes(&["lo".to_owned()]);
    assert_eq!(lo.len(), 1, "{lo:?}");
    let _ = read_queue_stats(&[]);
    let mut registry = registry(SharedSnapshot::default());
    register_host_stats(&mut registry, HostStats::system([8470, 8471], &["lo".to_owned()]));
    let text = render(&registry);
    assert!(text.contains(r#"slipstream_interface_receive_bytes_total{interface="lo"} "#));
    check_exposition(&text);
}
