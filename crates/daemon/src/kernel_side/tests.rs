//! Tests of `kernel_side`.

use super::*;
use slipstream_control::{ControllerConfig, Duration};
use slipstream_ebpf::{Hook, TcConfig};
use slipstream_engine::{EngineConfig, RuleSpec};

/// A TCP frame (Ethernet, IPv4) from `src` to `dst`; a SYN carries MSS 1460 and `scale`.
fn frame(src: &str, dst: &str, syn: bool, ack: Option<u32>, window: u16, scale: u8) -> Vec<u8> {
    let (src, dst): (std::net::SocketAddrV4, std::net::SocketAddrV4) =
        (src.parse().unwrap(), dst.parse().unwrap());
    let mut b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src.ip().octets(), dst.ip().octets(), 64)
        .tcp(src.port(), dst.port(), 1000, window);
    if syn {
        b = b.syn();
    }
    if let Some(ack) = ack {
        b = b.ack(ack);
    }
    let b = if syn {
        b.options(&[
            etherparse::TcpOptionElement::MaximumSegmentSize(1460),
            etherparse::TcpOptionElement::Noop,
            etherparse::TcpOptionElement::WindowScale(scale),
        ])
        .unwrap()
    } else {
        b
    };
    let mut out = Vec::new();
    b.write(&mut out, &[]).unwrap();
    out
}

/// An upload's server announces its window at shift 8; its first ACKs pass the program
/// before the bulk direction is known (nothing lowered in that direction yet), and the right
/// edge the program keeps for them must be counted in the server's units: 255 units are
/// 65 280 bytes, not 255. Before the SYN-ACK wrote each direction's shift, the program kept
/// ack + 255 and later moved the upload's right edge left of what the host had seen.
#[test]
#[ignore = "needs root and BPF (BPF_PROG_TEST_RUN): scripts/test.sh runs it (--include-ignored)"]
fn an_upload_servers_first_window_is_kept_in_its_own_units() {
    if let Some(why) = slipstream_testbed::missing_prerequisite(&[]) {
        panic!("cannot run here: {why} (BPF_PROG_TEST_RUN of a tc program)");
    }
    let mut tc = TcDatapath::load(TcConfig {
        max_flows: 64,
        ring_bytes: 1 << 16,
        ..TcConfig::default()
    })
    .expect("load the tc program");
    tc.heartbeat(StdDuration::from_secs(60)).unwrap();
    let mut kernel = KernelSide::new(tc, 64, Vec::new(), 0xff_0000, Arc::default());
    let mut engine = Engine::new(EngineConfig {
        rules: vec![RuleSpec {
            name: "uploads".into(),
            controller: ControllerConfig::Household,
            share: Default::default(),
        }],
        max_flows: 16,
        idle_timeout: Duration::from_secs(120),
        evict_idle_after: Duration::from_secs(10),
        household: Default::default(),
    });
    let (host, server) = ("192.168.1.10:40000", "93.184.216.34:6881");
    // The handshake through NFQUEUE: the engine first, then the kernel's map.
    for (mut f, from_lan) in [
        (frame(host, server, true, None, 64240, 7), true),
        (frame(server, host, true, Some(1001), 65160, 8), false),
    ] {
        let meta = PacketMeta {
            rule: Some(1),
            copy: PacketCopy::Full,
            checksum_ready: true,
            from_lan: Some(from_lan),
            arrival: None,
        };
        engine.handle_packet(Instant::from_millis(1), &mut f[14..], meta);
        kernel.on_handshake(&engine, &f[14..], Some(1));
    }
    // The server's first ACK (of the host's first bytes), its whole window: 255 units.
    let ack = 1001 + 37;
    let (_, out) = kernel
        .tc
        .test_run(Hook::Egress, &frame(server, host, false, Some(ack), 255, 0))
        .unwrap();
    assert_eq!(u16::from_be_bytes([out[48], out[49]]), 255, "passed unlowered");
    let dir = DirKey::new(server.parse().unwrap(), host.parse().unwrap()).unwrap();
    assert_eq!(kernel.tc.edge(&dir), Some(ack + (255 << 8)));
}

/// Reports the daemon does not read fill the ring buffer (one page here, about 25 reports);
/// the program then drops further reports, never the packets, and the drops reach
/// `/metrics` as `slipstream_ebpf_ringbuf_dropped_total`.
#[test]
#[ignore = "needs root and BPF (BPF_PROG_TEST_RUN): scripts/test.sh runs it (--include-ignored)"]
fn ring_buffer_drops_reach_the_metrics() {
    if let Some(why) = slipstream_testbed::missing_prerequisite(&[]) {
        panic!("cannot run here: {why} (BPF_PROG_TEST_RUN of a tc program)");
    }
    let mut tc = TcDatapath::load(TcConfig {
        max_flows: 64,
        ring_bytes: 4096,
        ..TcConfig::default()
    })
    .expect("load the tc program");
    tc.heartbeat(StdDuration::from_secs(60)).unwrap();
    let (host, server) = ("192.168.1.10:40000", "93.184.216.34:443");
    let dir = DirKey::new(host.parse().unwrap(), server.parse().unwrap()).unwrap();
    tc.start_flow(&dir, 1).unwrap();
    let counters = Arc::new(KernelCounters::default());
    let mut kernel = KernelSide::new(tc, 64, Vec::new(), 0xff_0000, counters.clone());
    let ack = frame(host, server, false, Some(5000), 60_000, 0);
    for _ in 0..100 {
        let (verdict, out) = kernel.tc.test_run(Hook::Ingress, &ack).unwrap();
        assert_eq!(
            (verdict, out.len()),
            (u32::MAX, ack.len()),
            "passed whatever the ring"
        );
    }
    kernel.publish_counters();
    let (reported, dropped) = (
        counters.reported.load(Ordering::Relaxed),
        counters.ringbuf_full.load(Ordering::Relaxed),
    );
    assert_eq!(reported + dropped, 100);
    assert!(dropped >= 50, "{reported} reported, {dropped} dropped");
    let mut registry = slipstream_metrics::registry(slipstream_metrics::SharedSnapshot::default());
    slipstream_metrics::register_kernel_counters(&mut registry, counters);
    let text = slipstream_metrics::render(&registry);
    let line = format!("slipstream_ebpf_ringbuf_dropped_total {dropped}");
    assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    eprintln!("{reported} reported, {dropped} dropped; /metrics: {line}");
}

#[test]
fn the_map_entry_is_the_receivers_ack_direction() {
    let (key, side) = FlowKey::from_packet(
        "192.168.1.10".parse().unwrap(),
        40000,
        "93.184.216.34".parse().unwrap(),
        443,
    );
    let clamp = KernelClamp {
        receiver: side,
        scale: 7,
        mss: 1448,
        target_bytes: Some(30_000),
        hold: false,
    };
    let (dir, cfg) = map_entry(&key, clamp, 2).unwrap();
    let expected = DirKey::new(
        "192.168.1.10:40000".parse().unwrap(),
        "93.184.216.34:443".parse().unwrap(),
    );
    assert_eq!(Some(dir), expected);
    assert_eq!(
        (cfg.target_bytes, cfg.mss, cfg.scale, cfg.flags, cfg.rule),
        (30_000, 1448, 7, FLOW_CLAMP, 2)
    );
    let held = map_entry(&key, KernelClamp { hold: true, ..clamp }, 2).unwrap().1;
    assert_eq!(held.flags, FLOW_CLAMP | FLOW_HOLD);
    let none = map_entry(
        &key,
        KernelClamp {
            target_bytes: None,
            ..clamp
        },
        2,
    )
    .unwrap()
    .1;
    assert_eq!((none.flags, none.target_bytes), (0, 0));
}
