//! The `engine` target's body: an [`Engine`] driven by a structured sequence of operations
//! (packets of a few TCP connections built from fuzz input so that handshakes, data and ACKs
//! really happen, raw bytes, ticks, window scales learned mid-stream, snapshots, reloads), with
//! the engine's safety promises checked after every step. A broken promise panics.

use std::collections::HashMap;
use std::net::IpAddr;

use slipstream_control::{Duration, Instant};
use slipstream_engine::{Engine, EngineCounters, FlowKey, PacketCopy, PacketMeta, RuleSpec, Verdict};
use slipstream_wire::{parse, tcp_checksum, TcpPacketInfo, TCP_CHECKSUM_OFFSET, TCP_WINDOW_OFFSET};

use crate::packet::{self, TcpSpec, ACK, FIN, PSH, RST, SYN};

pub use crate::engine_input::*;

/// What the harness remembers of one end of a connection to build plausible segments.
#[derive(Clone, Copy, Debug)]
struct EndState {
    /// Next sequence number this end sends.
    nxt: u32,
    /// Offset of this end's timestamp clock.
    ts_base: u32,
    /// Last TSval received from the peer (echoed as TSecr).
    ts_recent: u32,
}

/// What a run did, for the seed generator's choices.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    pub ops: usize,
    pub counters: EngineCounters,
    pub window_updates: u64,
    pub rewritten_v6: u64,
    pub rewritten_rule: [u64; 4],
    pub learned: u64,
    pub reconfigured: u64,
    pub zero_windows: u64,
}

/// A fed whole packet, as the engine may later copy it into a window update.
#[derive(Clone, Copy, Debug)]
struct Origin {
    window: u16,
    checksum_valid: bool,
}

/// The packet with its window and checksum fields zeroed: what a window update made from it
/// has in common with it.
fn masked(packet: &[u8], tcp_offset: usize) -> Vec<u8> {
    let mut m = packet.to_vec();
    let from = tcp_offset + TCP_WINDOW_OFFSET;
    let to = tcp_offset + TCP_CHECKSUM_OFFSET + 2;
    if to <= m.len() {
        m[from..to].fill(0);
    }
    m
}

struct Harness {
    setup: Setup,
    engine: Engine,
    now: Instant,
    rules: Vec<RuleSpec>,
    max_flows: usize,
    conns: [(IpAddr, u16, IpAddr, u16); 6],
    /// [connection][0 client, 1 server]
    ends: [[EndState; 2]; 6],
    origins: HashMap<Vec<u8>, Vec<Origin>>,
    summary: RunSummary,
}

impl Harness {
    fn new(setup: Setup) -> Harness {
        let rules = base_rules(&setup);
        let max_flows = usize::from(setup.max_flows % 4) + 1;
        let engine = Engine::new(engine_config(&setup, rules.clone(), max_flows));
        let mut ends = [[EndState {
            nxt: 0,
            ts_base: 0,
            ts_recent: 0,
        }; 2]; 6];
        for (i, e) in ends.iter_mut().enumerate() {
            let i = i as u32;
            e[0] = EndState {
                nxt: 1000 + i * 7919,
                ts_base: 100_000 * (i + 1),
                ts_recent: 0,
            };
            e[1] = EndState {
                nxt: 0xfff0_0000u32.wrapping_add(i * 104_729),
                ts_base: 0x8000_0000u32.wrapping_add(i),
                ts_recent: 0,
            };
        }
        Harness {
            setup,
            engine,
            now: Instant::from_micros(10_000_000),
            rules,
            max_flows,
            conns: connections(),
            ends,
            origins: HashMap::new(),
            summary: RunSummary::default(),
        }
    }

    fn advance(&mut self, dt: Dt) {
        self.now = self.now + step(dt);
    }

    fn meta(&self, m: MetaIn, conn: usize, from_server: bool, copy: PacketCopy) -> PacketMeta {
        let n = self.rules.len() as u16;
        let rule = match m.rule {
            RuleIn::Conn => Some(conn as u16 % n.max(1) + 1),
            RuleIn::None => None,
            RuleIn::Number(x) => Some(u16::from(x) % (n + 3)),
        };
        let from_lan = match m.from_lan {
            LanIn::Truth => Some(!from_server),
            LanIn::Unknown => None,
            LanIn::Wrong => Some(from_server),
        };
        let arrival = match m.arrival {
            ArrivalIn::None => None,
            ArrivalIn::Now => Some(self.now),
            ArrivalIn::Earlier(us) => Some(self.now - Duration::from_micros(u64::from(us) * 10)),
            ArrivalIn::Later(us) => Some(self.now + Duration::from_micros(u64::from(us) + 1)),
        };
        PacketMeta {
            rule,
            copy,
            checksum_ready: !m.checksum_not_ready,
            from_lan,
            arrival,
        }
    }

    fn segment(&mut self, s: &Segment) {
        self.advance(s.dt);
        let conn = usize::from(s.conn) % self.conns.len();
        let (client, client_port, server, server_port) = self.conns[conn];
        let (me, peer) = if s.from_server { (1, 0) } else { (0, 1) };
        let (src, src_port, dst, dst_port) = if s.from_server {
            (server, server_port, client, client_port)
        } else {
            (client, client_port, server, server_port)
        };
        let flags = match s.flags {
            FlagsIn::Syn => SYN,
            FlagsIn::SynAck => SYN | ACK,
            FlagsIn::Ack => ACK,
            FlagsIn::Data => ACK | PSH,
            FlagsIn::FinAck => FIN | ACK,
            FlagsIn::Rst => RST,
            FlagsIn::RstAck => RST | ACK,
            FlagsIn::Raw(f) => f,
        };
        let payload_len = match s.payload {
            PayloadIn::None => 0,
            PayloadIn::Full => MSS_PAYLOAD,
            PayloadIn::Bytes(n) => usize::from(n % 9000),
        };
        let end = self.ends[conn][me];
        let peer_nxt = self.ends[conn][peer].nxt;
        let seq = match s.seq {
            SeqIn::Next => end.nxt,
            SeqIn::Back(x) => end.nxt.wrapping_sub(u32::from(x)),
            SeqIn::Ahead(x) => end.nxt.wrapping_add(u32::from(x)),
            SeqIn::Raw(x) => x,
        };
        let ack = match s.ack {
            SeqIn::Next => peer_nxt,
            SeqIn::Back(x) => peer_nxt.wrapping_sub(u32::from(x)),
            SeqIn::Ahead(x) => peer_nxt.wrapping_add(u32::from(x)),
            SeqIn::Raw(x) => x,
        };
        let clock = end.ts_base.wrapping_add((self.now.as_micros() / 1000) as u32);
        let mut options = Vec::new();
        let mut sent_tsval = None;
        let syn = flags & SYN != 0;
        let auto_ts = |options: &mut Vec<u8>, sent: &mut Option<u32>| {
            options.extend_from_slice(&[1, 1, 8, 10]);
            options.extend_from_slice(&clock.to_be_bytes());
            options.extend_from_slice(&end.ts_recent.to_be_bytes());
            *sent = Some(clock);
        };
        let custom: &[OptIn] = match &s.options {
            OptionsIn::Linux { ws, sack } => {
                if syn {
                    options.extend_from_slice(&[2, 4, 0x05, 0xb4, 4, 2]);
                    auto_ts(&mut options, &mut sent_tsval);
                    options.extend_from_slice(&[1, 3, 3, ws % 16]);
                } else {
                    auto_ts(&mut options, &mut sent_tsval);
                }
                match sack {
                    Some((n, gap)) if !syn => &[OptIn::Sack { n: *n, gap: *gap }][..],
                    _ => &[],
                }
            }
            OptionsIn::NoTimestamps { ws } => {
                if syn {
                    options.extend_from_slice(&[2, 4, 0x05, 0xb4, 1, 3, 3, ws % 16]);
                }
                &[]
            }
            OptionsIn::Custom(list) => list,
        };
        for opt in custom.iter().take(8) {
            match *opt {
                OptIn::Mss(v) => options.extend_from_slice(&[2, 4, (v >> 8) as u8, v as u8]),
                OptIn::WindowScale(v) => options.extend_from_slice(&[1, 3, 3, v]),
                OptIn::SackPermitted => options.extend_from_slice(&[4, 2]),
                OptIn::Timestamps(ts) => {
                    let (tsval, tsecr) = match ts {
                        TsIn::Auto => (clock, end.ts_recent),
                        TsIn::Stale(back) => (clock.wrapping_sub(u32::from(back)), end.ts_recent),
                        TsIn::Raw(a, b) => (a, b),
                    };
                    sent_tsval = Some(tsval);
                    options.extend_from_slice(&[1, 1, 8, 10]);
                    options.extend_from_slice(&tsval.to_be_bytes());
                    options.extend_from_slice(&tsecr.to_be_bytes());
                }
                OptIn::Sack { n, gap } => {
                    let n = usize::from(n % 4) + 1;
                    options.extend_from_slice(&[1, 1, 5, 2 + 8 * n as u8]);
                    let mut left = ack.wrapping_add(u32::from(gap));
                    for _ in 0..n {
                        options.extend_from_slice(&left.to_be_bytes());
                        options.extend_from_slice(&left.wrapping_add(1448).to_be_bytes());
                        left = left.wrapping_add(2896);
                    }
                }
                OptIn::Nop => options.push(1),
                OptIn::Eol => options.push(0),
                OptIn::Unknown { kind, len } => {
                    let len = len % 12;
                    options.push(kind);
                    options.push(len);
                    options.extend(std::iter::repeat_n(0xa5, usize::from(len.saturating_sub(2))));
                }
                OptIn::Bytes(b) => options.extend_from_slice(&b),
            }
        }
        let spec = TcpSpec {
            src,
            dst,
            src_port,
            dst_port,
            seq,
            ack,
            flags,
            ns: false,
            window: s.window,
            urgent: 0,
            options,
            payload_len,
            tos: s.tos,
            ip_options: s.ip_options % 4,
        };
        let mut bytes = packet::build(&spec);
        if let Some(m) = s.mutate.0 {
            if !bytes.is_empty() {
                let at = usize::from(m.at) % bytes.len();
                bytes[at] ^= m.xor;
                if m.fix_checksum {
                    packet::fix_checksum(&mut bytes);
                }
            }
        }

        // What the sender and its peer now know.
        let fin = flags & FIN != 0;
        let advance = payload_len as u32 + u32::from(syn) + u32::from(fin);
        let e = &mut self.ends[conn][me];
        match s.seq {
            SeqIn::Next | SeqIn::Ahead(_) => e.nxt = seq.wrapping_add(advance),
            SeqIn::Raw(_) if syn => e.nxt = seq.wrapping_add(advance),
            _ => {}
        }
        if let Some(tsval) = sent_tsval {
            self.ends[conn][peer].ts_recent = tsval;
        }

        // The copy the datapath hands over (cut where the builder put the end of the headers).
        let header_end = packet::header_bounds(&spec).1;
        let copy = match s.meta.copy {
            CopyIn::Datapath if payload_len > 0 => {
                bytes.truncate(header_end);
                PacketCopy::HeaderOnly
            }
            CopyIn::Datapath | CopyIn::Full => PacketCopy::Full,
            CopyIn::HeaderOnly(keep) => {
                bytes.truncate(header_end + usize::from(keep));
                PacketCopy::HeaderOnly
            }
        };
        let meta = self.meta(s.meta, conn, s.from_server, copy);
        self.feed(bytes, meta);
    }

    /// Hands one packet to the engine and checks what came back.
    fn feed(&mut self, mut bytes: Vec<u8>, meta: PacketMeta) {
        let original = bytes.clone();
        let strict = parse(&original);
        // Window updates are copies of pure ACKs (no payload) the engine was handed whole.
        if let (PacketCopy::Full, Ok(info)) = (meta.copy, &strict) {
            if info.payload_len == 0 {
                let valid = packet::checksum_valid(&original).unwrap_or(false);
                self.origins
                    .entry(masked(&original, info.tcp_offset))
                    .or_default()
                    .push(Origin {
                        window: info.window,
                        checksum_valid: valid,
                    });
            }
        }
        let verdict = self.engine.handle_packet(self.now, &mut bytes, meta);
        let udp = slipstream_wire::parse_udp_headers(&original).is_ok();
        match verdict {
            Verdict::Accept => assert!(bytes == original, "an accepted packet was changed"),
            // Only a background UDP flow's policer drops, and only UDP is marked or has its uTP
            // window lowered; the packet keeps its length.
            Verdict::Drop => assert!(udp, "a packet that is not UDP was dropped"),
            // Only a background UDP flow's shaper holds a packet, never into the past, and a
            // held packet is unchanged unless it was marked CE.
            Verdict::Hold { until, modified } => {
                assert!(udp, "a packet that is not UDP was held");
                assert!(
                    until >= meta.arrival.unwrap_or(self.now).min(self.now),
                    "held into the past"
                );
                assert!(modified || bytes == original, "a held packet was changed");
                assert_eq!(bytes.len(), original.len());
            }
            Verdict::AcceptModified if strict.is_err() => {
                assert!(udp, "a packet that is neither TCP nor UDP was changed");
                assert_eq!(bytes.len(), original.len());
            }
            Verdict::AcceptModified => {
                assert_eq!(meta.copy, PacketCopy::Full, "a header-only copy was rewritten");
                assert!(
                    meta.checksum_ready,
                    "a packet whose checksum is not ready was rewritten"
                );
                let info = strict.expect("a rewritten packet parsed before");
                self.check_rewritten(&original, &bytes, &info);
            }
        }
        self.check_window_updates();
    }

    fn check_rewritten(&mut self, original: &[u8], bytes: &[u8], info: &TcpPacketInfo) {
        let from = info.tcp_offset + TCP_WINDOW_OFFSET;
        let to = info.tcp_offset + TCP_CHECKSUM_OFFSET + 2;
        assert_eq!(bytes.len(), original.len());
        assert!(
            bytes[..from] == original[..from] && bytes[to..] == original[to..],
            "a rewrite changed more than the window and checksum"
        );
        let after = parse(bytes).expect("a rewritten packet parses");
        assert!(
            after.window < info.window,
            "rewritten window {} not below the host's {}",
            after.window,
            info.window
        );
        assert_eq!(
            TcpPacketInfo {
                window: info.window,
                ..after
            },
            *info
        );
        let valid_before = packet::checksum_valid(original).expect("parsed");
        let valid_after = packet::checksum_valid(bytes).expect("parsed");
        assert_eq!(
            valid_after, valid_before,
            "a rewrite changed the checksum's validity"
        );
        if tcp_checksum(original) == Some(packet::checksum_field(original, info.tcp_offset)) {
            assert_eq!(
                tcp_checksum(bytes),
                Some(packet::checksum_field(bytes, info.tcp_offset)),
                "incremental checksum differs from the recomputed one"
            );
        }
        if info.dst.is_ipv6() {
            self.summary.rewritten_v6 += 1;
        }
        if after.window == 0 {
            self.summary.zero_windows += 1;
            let key = FlowKey::from_packet(info.src, info.src_port, info.dst, info.dst_port).0;
            let (snap, keys) = self.engine.snapshot_keyed(usize::MAX);
            let flow = keys
                .iter()
                .position(|k| *k == key)
                .map(|i| &snap.flows[i])
                .expect("a rewritten packet's flow is in the table");
            let rule = &snap.rules[usize::from(flow.rule) - 1];
            // window_clamp: a clamp never closes the window, except for a flow held by household
            // time-sharing.
            assert!(
                rule.controller == "household" && flow.held,
                "a zero window for a flow that is not held (rule {}, {:?})",
                rule.name,
                flow
            );
        }
    }

    fn check_window_updates(&mut self) {
        let updates: Vec<_> = self.engine.drain_window_updates().collect();
        for update in updates {
            self.summary.window_updates += 1;
            let p = &update.packet;
            let info = parse(p).expect("a window update parses as TCP");
            assert!(
                info.flags.ack && !info.flags.syn && !info.flags.rst,
                "{:?}",
                info.flags
            );
            assert_eq!(info.payload_len, 0, "a window update carries data");
            let valid = packet::checksum_valid(p).expect("parsed");
            let origins = self
                .origins
                .get(&masked(p, info.tcp_offset))
                .expect("a window update is a copy of a packet the engine was given");
            assert!(
                origins
                    .iter()
                    .any(|o| o.window >= info.window && (valid || !o.checksum_valid)),
                "window update: window {} checksum valid {valid}, from {origins:?}",
                info.window
            );
        }
    }

    fn check_table(&self, before: usize) {
        let len = self.engine.active_flows();
        assert!(
            len <= self.max_flows || len <= before,
            "flow table grew to {len} (max_flows {}, {before} before)",
            self.max_flows
        );
    }

    fn snapshot(&self) {
        let snap = self.engine.snapshot(usize::MAX);
        let len = self.engine.active_flows();
        assert_eq!(snap.active_flows, len);
        assert_eq!(snap.flows.len(), len);
        assert_eq!(snap.max_flows, self.max_flows);
        assert_eq!(snap.rules.iter().map(|r| r.active_flows).sum::<usize>(), len);
        assert!(snap.rules.len() >= self.engine.configured_rules());
        for f in &snap.flows {
            assert!(usize::from(f.rule) >= 1 && usize::from(f.rule) <= snap.rules.len());
        }
    }

    fn reconfigure(&mut self, r: Reconf) {
        let mut rules = base_rules(&Setup {
            rule_order: r.rule_order,
            ..self.setup.clone()
        });
        if let Some(i) = r.rename_rule {
            let n = rules.len();
            rules[usize::from(i) % n].name.push('2');
        }
        if let Some(i) = r.drop_rule {
            let n = rules.len();
            rules.remove(usize::from(i) % n);
        }
        self.max_flows = usize::from(r.max_flows % 4) + 1;
        self.rules = rules.clone();
        let before = self.engine.active_flows();
        let summary = self
            .engine
            .reconfigure(engine_config(&self.setup, rules, self.max_flows));
        assert_eq!(summary.flows, before);
        assert_eq!(self.engine.active_flows(), before, "a reload dropped flows");
        self.summary.reconfigured += 1;
    }

    fn run_op(&mut self, op: &Op) {
        let before = self.engine.active_flows();
        match op {
            Op::Segment(s) => self.segment(s),
            Op::Raw { dt, meta, bytes } => {
                self.advance(*dt);
                let copy = match meta.copy {
                    CopyIn::HeaderOnly(_) => PacketCopy::HeaderOnly,
                    _ => PacketCopy::Full,
                };
                let meta = self.meta(*meta, 0, false, copy);
                self.feed(bytes.clone(), meta);
            }
            Op::Tick(dt) => {
                self.advance(*dt);
                self.engine.on_tick(self.now);
                self.check_window_updates();
            }
            Op::LearnScales { conn, low, high } => {
                let (c, cp, s, sp) = self.conns[usize::from(*conn) % self.conns.len()];
                let key = FlowKey::from_packet(c, cp, s, sp).0;
                if self.engine.learn_window_scales(key, *low, *high) {
                    self.summary.learned += 1;
                }
            }
            Op::Snapshot => self.snapshot(),
            Op::Reconfigure(r) => self.reconfigure(*r),
        }
        // Events are only handed over; bounded in the engine.
        let _ = self.engine.drain_events().count();
        self.check_table(before);
    }
}

/// Runs one input; panics if the engine breaks a promise.
pub fn run(input: &EngineInput) -> RunSummary {
    let mut h = Harness::new(input.setup.clone());
    for op in input.ops.iter().take(MAX_OPS) {
        h.run_op(op);
        h.summary.ops += 1;
    }
    h.snapshot();
    for rule in h.engine.snapshot(0).rules {
        let kind = match rule.controller {
            "household" => 0,
            "vulture" => 1,
            "fixed_window" => 2,
            _ => 3,
        };
        h.summary.rewritten_rule[kind] += rule.rewritten;
    }
    h.summary.counters = h.engine.counters().clone();
    h.summary
}
