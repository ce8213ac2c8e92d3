//! Packet fixtures for engine tests: a download between a LAN client and a server, built with
//! etherparse (which computes real checksums).

#![allow(dead_code)]

use etherparse::{PacketBuilder, TcpOptionElement};
use slipstream_control::{ControllerConfig, Duration, Instant};
use slipstream_engine::{Engine, EngineConfig, PacketCopy, PacketMeta, RuleSpec, Verdict};

/// An engine config of `rules` with the tests' limits: flows idle 120 s are forgotten, a full
/// table evicts flows idle 10 s, household control as default.
pub(crate) fn engine_config(rules: Vec<RuleSpec>, max_flows: usize) -> EngineConfig {
    EngineConfig {
        rules,
        max_flows,
        idle_timeout: Duration::from_secs(120),
        evict_idle_after: Duration::from_secs(10),
        household: Default::default(),
    }
}

/// An engine with the one rule `name` (rule 1) and its `controller`.
pub(crate) fn one_rule_engine(name: &str, controller: ControllerConfig, max_flows: usize) -> Engine {
    Engine::new(engine_config(
        vec![RuleSpec {
            name: name.into(),
            controller,
            share: Default::default(),
        }],
        max_flows,
    ))
}

pub(crate) const CLIENT: [u8; 4] = [10, 0, 0, 2];
pub(crate) const SERVER: [u8; 4] = [192, 0, 2, 1];
pub(crate) const CLIENT_PORT: u16 = 40000;
pub(crate) const SERVER_PORT: u16 = 6881;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Seg {
    pub from_server: bool,
    pub seq: u32,
    pub ack: u32,
    pub window: u16,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub payload: usize,
    pub ts: Option<(u32, u32)>,
    pub wscale: Option<u8>,
    pub mss: Option<u16>,
}

impl Default for Seg {
    fn default() -> Self {
        Seg {
            from_server: false,
            seq: 0,
            ack: 0,
            window: 65535,
            syn: false,
            fin: false,
            rst: false,
            payload: 0,
            ts: None,
            wscale: None,
            mss: None,
        }
    }
}

pub(crate) fn build(seg: Seg) -> Vec<u8> {
    let (src, dst, sp, dp) = if seg.from_server {
        (SERVER, CLIENT, SERVER_PORT, CLIENT_PORT)
    } else {
        (CLIENT, SERVER, CLIENT_PORT, SERVER_PORT)
    };
    let mut b = PacketBuilder::ipv4(src, dst, 64).tcp(sp, dp, seg.seq, seg.window);
    if seg.syn {
        b = b.syn();
    }
    if seg.fin {
        b = b.fin();
    }
    if seg.rst {
        b = b.rst();
    }
    if !seg.syn || seg.from_server {
        b = b.ack(seg.ack);
    }
    let mut opts = Vec::new();
    if let Some(mss) = seg.mss {
        opts.push(TcpOptionElement::MaximumSegmentSize(mss));
    }
    if let Some((a, e)) = seg.ts {
        opts.push(TcpOptionElement::Timestamp(a, e));
    }
    if let Some(ws) = seg.wscale {
        opts.push(TcpOptionElement::Noop);
        opts.push(TcpOptionElement::WindowScale(ws));
    }
    let b = b.options(&opts).expect("options fit");
    let payload = vec![0xabu8; seg.payload];
    let mut out = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut out, &payload).expect("write");
    out
}

pub(crate) fn meta(copy: PacketCopy) -> PacketMeta {
    PacketMeta {
        rule: Some(1),
        copy,
        checksum_ready: true,
        from_lan: None,
        arrival: None,
    }
}

/// Feeds a whole packet, telling the engine which side is the LAN (the client).
pub(crate) fn feed_lan(engine: &mut Engine, now: Instant, seg: Seg) -> (Verdict, Vec<u8>) {
    let mut bytes = build(seg);
    let meta = PacketMeta {
        from_lan: Some(!seg.from_server),
        ..meta(PacketCopy::Full)
    };
    let v = engine.handle_packet(now, &mut bytes, meta);
    (v, bytes)
}

/// Feeds a packet as the datapath would: data segments with a header-only copy (payload cut
/// off), everything else whole. Returns the verdict and the bytes after the engine.
pub(crate) fn feed(engine: &mut Engine, now: Instant, seg: Seg) -> (Verdict, Vec<u8>) {
    let mut bytes = build(seg);
    let copy = if seg.payload > 0 {
        PacketCopy::HeaderOnly
    } else {
        PacketCopy::Full
    };
    if copy == PacketCopy::HeaderOnly {
        bytes.truncate(bytes.len() - seg.payload);
    }
    let v = engine.handle_packet(now, &mut bytes, meta(copy));
    (v, bytes)
}

/// The handshake's SYN (client) and SYN-ACK (server), both offering window scale 7, timestamps
/// and MSS 1460; `timestamps = false` leaves the timestamp option off the client's SYN.
pub(crate) fn handshake_segments(timestamps: bool) -> [Seg; 2] {
    let syn = Seg {
        syn: true,
        seq: 100,
        ts: timestamps.then_some((1000, 0)),
        wscale: Some(7),
        mss: Some(1460),
        ..Default::default()
    };
    let syn_ack = Seg {
        from_server: true,
        syn: true,
        seq: 5000,
        ack: 101,
        ts: Some((70000, 1000)),
        wscale: Some(7),
        mss: Some(1460),
        ..Default::default()
    };
    [syn, syn_ack]
}

/// The handshake ([`handshake_segments`]) fed as the datapath would.
pub(crate) fn handshake(engine: &mut Engine, now: Instant, timestamps: bool) {
    for seg in handshake_segments(timestamps) {
        feed(engine, now, seg);
    }
}

/// The window field of a packet built by [`build`] (IPv4, no IP options).
pub(crate) fn window_field(bytes: &[u8]) -> u16 {
    u16::from_be_bytes([bytes[20 + 14], bytes[20 + 15]])
}
