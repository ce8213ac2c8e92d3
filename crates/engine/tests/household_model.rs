//! Household control driven by a model of a home network: window-limited senders behind one
//! bottleneck (a FIFO served at a fixed rate), a router running the real engine on real packets
//! (checksums, window scale; no TCP timestamps as Windows clients, or with them as Linux and
//! macOS ones, `Sim::timestamps`), LAN receivers that ACK every
//! segment, optional best-effort cross traffic sharing the bottleneck, and the daemon's window
//! updates delivered to the senders. Every budget controller runs the same cases.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use etherparse::{PacketBuilder, TcpOptionElement};
use slipstream_control::{ControllerConfig, Duration, Instant};
use slipstream_engine::{
    Engine, EngineConfig, HouseholdConfig, LinkCounters, PacketCopy, PacketMeta, RuleSpec, ShareSpec,
};
use slipstream_household::delay_target::DelayTargetConfig;
use slipstream_household::{BudgetConfig, KeyBinarySearchConfig, KeyStochasticConfig};
use slipstream_wire::parse;

const MSS: u32 = 1448;
const SCALE: u8 = 7;
/// The hosts' own window: 4 MiB (field 32768 at scale 7).
const HOST_FIELD: u16 = 32768;
const SERVER_ISN: u32 = 1000;

/// The modelled network.
#[derive(Clone, Copy, Debug)]
struct Net {
    /// Bottleneck rate, bytes per second.
    rate: f64,
    /// One-way delays router -> server and server -> router (after the queue), microseconds.
    ack_delay: u64,
    data_delay: u64,
    /// Router <-> LAN host one way, microseconds.
    lan_delay: u64,
}

impl Net {
    fn home(rate_mbit: f64, rtt_ms: u64) -> Net {
        Net {
            rate: rate_mbit * 1e6 / 8.0,
            ack_delay: rtt_ms * 500,
            data_delay: rtt_ms * 500,
            lan_delay: 200,
        }
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Start {
        flow: usize,
    },
    Tick,
    Cross,
    /// `ts`: the segment's (TSval, TSecr) when the flows carry timestamps.
    DataAtRouter {
        flow: usize,
        seq: u32,
        len: u32,
        ts: Option<(u32, u32)>,
    },
    DataAtHost {
        flow: usize,
        seq: u32,
        len: u32,
        tsval: Option<u32>,
    },
    AckAtRouter {
        flow: usize,
        ack: u32,
    },
    AckAtServer {
        flow: usize,
        packet: Vec<u8>,
    },
}

struct SimFlow {
    host: u8,
    port: u16,
    snd_una: u32,
    snd_nxt: u32,
    edge: u32,
    cwnd: u32,
    rcv_nxt: u32,
    /// Bytes delivered to the host, and in the measurement window.
    delivered: u64,
    /// The last TSval each end received, echoed in its TSecr (RFC 7323's TS.Recent): the
    /// server's of the host's ACKs, the host's of the server's segments.
    server_ts_recent: u32,
    host_ts_recent: u32,
}

/// TSval clocks, 1 kHz as Linux's, with different origins: the server's and the LAN host's.
fn server_tsval(t_us: u64) -> u32 {
    (t_us / 1000) as u32 + 3_000_000
}

fn host_tsval(t_us: u64) -> u32 {
    (t_us / 1000) as u32 + 700_000
}

struct Sim {
    net: Net,
    engine: Engine,
    flows: Vec<SimFlow>,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    busy_until: u64,
    cross_rate: f64,
    cross_until: u64,
    cross_bytes: u64,
    queue_samples: Vec<u64>,
    window_updates: u64,
    /// Flow i belongs to rule `rules[i]`.
    rules: Vec<u16>,
    /// The router's WAN counters (download, upload), given to the engine before each packet
    /// when `counted` (a router that counts best effort's traffic, as the daemon's does).
    counted: bool,
    wan: [LinkCounters; 2],
    /// The flows negotiate TCP timestamps (Linux and macOS hosts; Windows does not).
    timestamps: bool,
}

fn server(port: u16) -> ([u8; 4], u16) {
    ([192, 0, 2, 1], port)
}

fn client(host: u8) -> ([u8; 4], u16) {
    ([10, 0, 0, host], 40000)
}

/// A segment of flow `f`; `ts` its (TSval, TSecr) when timestamps were negotiated.
fn packet(
    from_server: bool,
    f: &SimFlow,
    seq: u32,
    ack: u32,
    syn: bool,
    payload: u32,
    ts: Option<(u32, u32)>,
) -> Vec<u8> {
    let (s, c) = (server(f.port), client(f.host));
    let ((src, sp), (dst, dp)) = if from_server { (s, c) } else { (c, s) };
    // The host's window starts at 64 KB and grows with what it received (Linux autotuning).
    let field = if syn {
        65535
    } else {
        ((65535 + 2 * f.delivered) >> SCALE).min(u64::from(HOST_FIELD)) as u16
    };
    let mut b = PacketBuilder::ipv4(src, dst, 64).tcp(sp, dp, seq, field);
    if syn {
        b = b.syn();
    }
    if !syn || from_server {
        b = b.ack(ack);
    }
    let mut options = Vec::new();
    if syn {
        options.extend([
            TcpOptionElement::MaximumSegmentSize(MSS as u16),
            TcpOptionElement::Noop,
            TcpOptionElement::WindowScale(SCALE),
        ]);
    }
    if let Some((tsval, tsecr)) = ts {
        options.extend([
            TcpOptionElement::Noop,
            TcpOptionElement::Noop,
            TcpOptionElement::Timestamp(tsval, tsecr),
        ]);
    }
    let b = b.options(&options).expect("options");
    // Data segments reach the engine header-only, as through the data queue.
    let mut out = Vec::new();
    b.write(&mut out, &vec![0u8; payload as usize]).expect("write");
    out
}

impl Sim {
    fn new(net: Net, budget: BudgetConfig, hosts_flows: &[(u8, u16)], shares: &[ShareSpec]) -> Sim {
        let rules = shares
            .iter()
            .enumerate()
            .map(|(i, share)| RuleSpec {
                name: format!("r{i}"),
                controller: ControllerConfig::Household,
                share: *share,
            })
            .collect();
        let engine = Engine::new(EngineConfig {
            rules,
            max_flows: 4096,
            idle_timeout: Duration::from_secs(120),
            evict_idle_after: Duration::from_secs(10),
            household: HouseholdConfig {
                budget,
                ..HouseholdConfig::default()
            },
        });
        let flows = hosts_flows
            .iter()
            .enumerate()
            .map(|(i, &(host, _))| SimFlow {
                host,
                port: 6881 + i as u16,
                snd_una: SERVER_ISN + 1,
                snd_nxt: SERVER_ISN + 1,
                edge: SERVER_ISN + 1,
                cwnd: 10 * MSS,
                rcv_nxt: SERVER_ISN + 1,
                delivered: 0,
                server_ts_recent: 0,
                host_ts_recent: 0,
            })
            .collect();
        let mut sim = Sim {
            net,
            engine,
            flows,
            events: BinaryHeap::new(),
            seq: 0,
            busy_until: 0,
            cross_rate: 0.0,
            cross_until: 0,
            cross_bytes: 0,
            queue_samples: Vec::new(),
            window_updates: 0,
            rules: hosts_flows.iter().map(|&(_, rule)| rule).collect(),
            counted: false,
            wan: [LinkCounters::default(); 2],
            timestamps: false,
        };
        sim.at(0, Event::Tick);
        sim
    }

    fn at(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, e)));
    }

    fn handle(&mut self, t: u64, bytes: &mut [u8], from_lan: bool, rule: u16) {
        self.handle_copy(t, bytes, from_lan, rule, PacketCopy::Full);
    }

    fn handle_copy(&mut self, t: u64, bytes: &mut [u8], from_lan: bool, rule: u16, copy: PacketCopy) {
        if self.counted {
            // The IP length, also of a header-only copy: the segment crossed the WAN whole.
            let c = &mut self.wan[usize::from(from_lan)];
            c.bytes += u64::from(u16::from_be_bytes([bytes[2], bytes[3]]));
            c.packets += 1;
            self.engine.on_link_counters(self.wan[0], self.wan[1]);
        }
        let meta = PacketMeta {
            rule: Some(rule),
            copy,
            checksum_ready: true,
            from_lan: Some(from_lan),
            arrival: None,
        };
        self.engine.handle_packet(Instant::from_micros(t), bytes, meta);
        let updates: Vec<Vec<u8>> = self.engine.drain_window_updates().map(|u| u.packet).collect();
        for packet in updates {
            self.window_updates += 1;
            let info = parse(&packet).expect("window update parses");
            assert!(
                slipstream_wire::tcp_checksum_valid(&packet),
                "window update checksum"
            );
            let flow = self
                .flows
                .iter()
                .position(|f| f.port == info.dst_port)
                .expect("flow");
            self.at(t + self.net.ack_delay, Event::AckAtServer { flow, packet });
        }
    }

    /// Opens flow `flow` at `t` (microseconds).
    fn open(&mut self, flow: usize, t: u64) {
        self.at(t, Event::Start { flow });
    }

    /// Handshakes (the LAN host opens each connection), then the senders start.
    fn start(&mut self, flow: usize, t: u64) {
        let rule = self.rules[flow];
        let f = &self.flows[flow];
        let rtt = self.net.ack_delay + self.net.data_delay;
        let at_ack = t + rtt + 2 * self.net.lan_delay;
        let ts = |tsval: u32, tsecr: u32| self.timestamps.then_some((tsval, tsecr));
        let (host0, server0, host1) = (
            host_tsval(t),
            server_tsval(t + self.net.ack_delay),
            host_tsval(at_ack),
        );
        let mut syn = packet(false, f, 100, 0, true, 0, ts(host0, 0));
        let mut synack = packet(true, f, SERVER_ISN, 101, true, 0, ts(server0, host0));
        let mut ack = packet(false, f, 101, SERVER_ISN + 1, false, 0, ts(host1, server0));
        let f = &mut self.flows[flow];
        (f.server_ts_recent, f.host_ts_recent) = (host1, server0);
        self.handle(t, &mut syn, true, rule);
        self.handle(t + rtt, &mut synack, false, rule);
        self.handle(t + rtt + 2 * self.net.lan_delay, &mut ack, true, rule);
        // The sender's first window is what the router forwarded.
        let window = parse(&ack).expect("ack").window;
        let f = &mut self.flows[flow];
        f.edge = f.snd_una + (u32::from(window) << SCALE);
        self.send(flow, t + rtt + 2 * self.net.lan_delay + self.net.ack_delay);
    }

    fn enqueue(&mut self, t: u64, len: u32) -> u64 {
        let start = self.busy_until.max(t);
        self.queue_samples.push(start - t);
        self.busy_until = start + (f64::from(len + 40) / self.net.rate * 1e6) as u64;
        self.busy_until + self.net.data_delay
    }

    fn send(&mut self, flow: usize, t: u64) {
        loop {
            let f = &self.flows[flow];
            let limit = f.edge.min(f.snd_una.wrapping_add(f.cwnd));
            if (limit.wrapping_sub(f.snd_nxt) as i32) < MSS as i32 {
                return;
            }
            let seq = f.snd_nxt;
            let ts = self.timestamps.then_some((server_tsval(t), f.server_ts_recent));
            self.flows[flow].snd_nxt = seq.wrapping_add(MSS);
            let arrive = self.enqueue(t, MSS);
            self.at(
                arrive,
                Event::DataAtRouter {
                    flow,
                    seq,
                    len: MSS,
                    ts,
                },
            );
        }
    }

    fn run(&mut self, until_s: f64, mut each: impl FnMut(&mut Sim, u64)) {
        let until = (until_s * 1e6) as u64;
        let mut next_check = 0;
        while let Some(Reverse((t, _, e))) = self.events.pop() {
            if t > until {
                self.at(t, e);
                break;
            }
            if t >= next_check {
                each(self, t);
                next_check = t + 100_000;
            }
            match e {
                Event::Start { flow } => self.start(flow, t),
                Event::Tick => {
                    self.engine.on_tick(Instant::from_micros(t));
                    self.at(t + 100_000, Event::Tick);
                }
                Event::Cross => {
                    if t < self.cross_until && self.cross_rate > 0.0 {
                        self.enqueue(t, 1460);
                        self.cross_bytes += 1500;
                        self.wan[0].bytes += 1500;
                        self.wan[0].packets += 1;
                        self.at(t + (1500.0 / self.cross_rate * 1e6) as u64, Event::Cross);
                    }
                }
                Event::DataAtRouter { flow, seq, len, ts } => {
                    let rule = self.rules[flow];
                    let mut bytes = packet(true, &self.flows[flow], seq, 101, false, len, ts);
                    bytes.truncate(bytes.len() - len as usize);
                    // The header-only copy still says the IP length of the whole segment.
                    self.handle_copy(t, &mut bytes, false, rule, PacketCopy::HeaderOnly);
                    let tsval = ts.map(|(tsval, _)| tsval);
                    self.at(
                        t + self.net.lan_delay,
                        Event::DataAtHost {
                            flow,
                            seq,
                            len,
                            tsval,
                        },
                    );
                }
                Event::DataAtHost {
                    flow,
                    seq,
                    len,
                    tsval,
                } => {
                    let f = &mut self.flows[flow];
                    if seq == f.rcv_nxt {
                        f.rcv_nxt = seq.wrapping_add(len);
                        f.delivered += u64::from(len);
                        if let Some(tsval) = tsval {
                            f.host_ts_recent = tsval;
                        }
                    }
                    let ack = f.rcv_nxt;
                    self.at(t + self.net.lan_delay, Event::AckAtRouter { flow, ack });
                }
                Event::AckAtRouter { flow, ack } => {
                    let rule = self.rules[flow];
                    let f = &self.flows[flow];
                    let ts = self.timestamps.then_some((host_tsval(t), f.host_ts_recent));
                    let mut bytes = packet(false, f, 101, ack, false, 0, ts);
                    self.handle(t, &mut bytes, true, rule);
                    self.at(t + self.net.ack_delay, Event::AckAtServer { flow, packet: bytes });
                }
                Event::AckAtServer { flow, packet } => {
                    let info = parse(&packet).expect("ack parses");
                    let f = &mut self.flows[flow];
                    let advance = info.ack.wrapping_sub(f.snd_una) as i32;
                    if advance >= 0 {
                        if let Some((tsval, _)) = info.options.timestamps {
                            f.server_ts_recent = tsval;
                        }
                        f.snd_una = info.ack;
                        f.cwnd = f.cwnd.saturating_add(advance as u32);
                        // The sender keeps the furthest edge (a receiver never shrinks it).
                        let edge = info.ack.wrapping_add(u32::from(info.window) << SCALE);
                        if edge.wrapping_sub(f.edge) as i32 > 0 {
                            f.edge = edge;
                        }
                        self.send(flow, t);
                    }
                }
            }
        }
    }

    fn delivered(&self) -> Vec<u64> {
        self.flows.iter().map(|f| f.delivered).collect()
    }
}

fn budget_uses_delay(name: &str) -> bool {
    budgets().iter().any(|(n, b)| *n == name && b.uses_delay())
}

fn budgets() -> Vec<(&'static str, BudgetConfig)> {
    vec![
        (
            "delay_target",
            BudgetConfig::DelayTarget(DelayTargetConfig::default()),
        ),
        ("ledbat", BudgetConfig::DelayTarget(DelayTargetConfig::ledbat())),
        (
            "key_binary_search",
            BudgetConfig::KeyBinarySearch(KeyBinarySearchConfig::default()),
        ),
        (
            "key_stochastic",
            BudgetConfig::KeyStochastic(KeyStochasticConfig::default()),
        ),
    ]
}

/// Goodput of the background flows between two instants, as a fraction of the link rate.
fn share(before: &[u64], after: &[u64], secs: f64, net: Net) -> f64 {
    let bytes: u64 = after.iter().zip(before).map(|(a, b)| a - b).sum();
    bytes as f64 / secs / net.rate
}

fn percentile(v: &mut [u64], p: f64) -> f64 {
    v.sort_unstable();
    v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0) as f64
        / 1000.0
}

/// Runs one background flow alone for 20 s, then beside cross traffic at 95% of the link for
/// 10 s. Returns (share alone, share beside, queue delay p50 alone in ms).
fn alone_then_beside(budget: BudgetConfig, net: Net) -> (f64, f64, f64) {
    let mut sim = Sim::new(net, budget, &[(2, 1)], &[ShareSpec::default()]);
    sim.open(0, 0);
    sim.run(10.0, |_, _| {});
    let d0 = sim.delivered();
    sim.queue_samples.clear();
    sim.run(20.0, |_, _| {});
    let d1 = sim.delivered();
    let q_alone = percentile(&mut sim.queue_samples, 0.5);
    sim.cross_rate = 0.95 * net.rate;
    sim.cross_until = 30_000_000;
    sim.at(20_000_000, Event::Cross);
    sim.run(22.0, |_, _| {});
    let d2 = sim.delivered();
    sim.run(30.0, |_, _| {});
    let d3 = sim.delivered();
    (share(&d0, &d1, 10.0, net), share(&d2, &d3, 8.0, net), q_alone)
}

#[test]
fn every_controller_fills_an_idle_link_and_yields_without_timestamps() {
    let net = Net::home(10.0, 100);
    for (name, budget) in budgets() {
        let (alone, beside, q) = alone_then_beside(budget, net);
        eprintln!("{name}: alone {alone:.3} of the link (queue p50 {q:.1} ms), beside 95% cross traffic {beside:.3}");
        // Every controller moves data and stays within the link; only the delay controllers are
        // held to filling and yielding: Key et al.'s search reads only rates, and with the paper's
        // parameters binary search tolerates a queue that grows with the RTT (no bound at 100 ms)
        // and stochastic approximation gains 100 B per round (see their modules). Their figures
        // are printed for the report.
        assert!((0.1..=1.0).contains(&alone), "{name}: alone {alone:.3}");
        if budget_uses_delay(name) {
            assert!(alone >= 0.9, "{name}: alone {alone:.3}");
            assert!(beside <= 0.2, "{name}: beside {beside:.3}");
        }
    }
}

#[test]
fn delay_target_fills_and_yields_at_two_settings() {
    for net in [Net::home(10.0, 100), Net::home(50.0, 20)] {
        let (alone, beside, q) = alone_then_beside(BudgetConfig::default(), net);
        eprintln!("{net:?}: alone {alone:.3} (queue p50 {q:.1} ms), beside {beside:.3}");
        assert!(alone >= 0.95, "alone {alone:.3}");
        assert!(q <= 15.0, "queue p50 {q:.1} ms");
        assert!(beside <= 0.06, "beside {beside:.3}");
    }
}

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * s2)
}

#[test]
fn many_flows_share_per_host_and_yield() {
    let net = Net::home(10.0, 100);
    for n in [16usize, 64] {
        // Host 2 has one flow, host 3 all the others.
        let flows: Vec<(u8, u16)> = (0..n).map(|i| (if i == 0 { 2 } else { 3 }, 1)).collect();
        let mut sim = Sim::new(net, BudgetConfig::default(), &flows, &[ShareSpec::default()]);
        for i in 0..n {
            sim.open(i, i as u64 * 20_000);
        }
        sim.run(10.0, |_, _| {});
        let d0 = sim.delivered();
        sim.run(30.0, |_, _| {});
        let d1 = sim.delivered();
        let per: Vec<f64> = d1.iter().zip(&d0).map(|(a, b)| (a - b) as f64).collect();
        let host2 = per[0];
        let host3: f64 = per[1..].iter().sum();
        let total = share(&d0, &d1, 20.0, net);
        let jain_host3 = jain(&per[1..]);
        eprintln!(
            "N = {n}: total {total:.3}, host 2 / host 3 = {:.3}, Jain among host 3's flows {jain_host3:.3}, window updates {}",
            host2 / host3,
            sim.window_updates
        );
        // At 64 flows the floors exceed the BDP and flows take turns; each turn's start costs
        // about one RTT of its slot, and the budget yields at once to every queue the turns
        // build (measured 0.741; 16 flows: 0.973; before rounds took flows in key order, runs
        // spread 0.54-0.92 with the flow table's hash order).
        let must_fill = if n <= 16 { 0.95 } else { 0.65 };
        assert!(total >= must_fill, "N = {n}: total {total:.3}");
        // The issue asks 10% of real TCP (the namespace test measured 2.5%); the model measures
        // 8.6% at 16 flows and 3.5% at 64.
        assert!(
            (host2 / host3 - 1.0).abs() <= 0.15,
            "N = {n}: hosts {host2} vs {host3}"
        );
        assert!(jain_host3 >= 0.95, "N = {n}: Jain {jain_host3:.3}");
        assert!(per.iter().all(|&b| b > 0.0), "N = {n}: a flow stalled: {per:?}");
        // Best effort arrives: all flows together yield.
        sim.cross_rate = 0.95 * net.rate;
        sim.cross_until = 50_000_000;
        sim.at(30_000_000, Event::Cross);
        sim.run(35.0, |_, _| {});
        let d2 = sim.delivered();
        let mut q = std::mem::take(&mut sim.queue_samples);
        sim.run(50.0, |_, _| {});
        let d3 = sim.delivered();
        let beside = share(&d2, &d3, 15.0, net);
        let qp = percentile(&mut q, 0.5);
        eprintln!("N = {n}: beside cross traffic {beside:.3}, queue p50 {qp:.1} ms");
        assert!(beside <= 0.06, "N = {n}: beside {beside:.3}");
    }
}

#[test]
fn weights_and_min_rate() {
    let net = Net::home(10.0, 100);
    let shares = [
        ShareSpec::default(),
        ShareSpec {
            weight: 3,
            ..ShareSpec::default()
        },
        ShareSpec {
            min_rate: 250_000,
            ..ShareSpec::default()
        },
    ];
    let mut sim = Sim::new(net, BudgetConfig::default(), &[(2, 1), (3, 2)], &shares);
    sim.open(0, 0);
    sim.open(1, 0);
    sim.run(10.0, |_, _| {});
    let d0 = sim.delivered();
    sim.run(30.0, |_, _| {});
    let d1 = sim.delivered();
    let ratio = (d1[1] - d0[1]) as f64 / (d1[0] - d0[0]) as f64;
    eprintln!("weights 1:3 -> {ratio:.3}");
    assert!((ratio / 3.0 - 1.0).abs() <= 0.1, "ratio {ratio:.3}");

    // A 2 Mbit/s minimum rate beside cross traffic at 70% of the link.
    let mut sim = Sim::new(net, BudgetConfig::default(), &[(2, 3)], &shares);
    sim.open(0, 0);
    sim.cross_rate = 0.7 * net.rate;
    sim.cross_until = 40_000_000;
    sim.at(0, Event::Cross);
    sim.run(10.0, |_, _| {});
    let d0 = sim.delivered();
    sim.run(30.0, |_, _| {});
    let d1 = sim.delivered();
    let rate = (d1[0] - d0[0]) as f64 * 8.0 / 20.0 / 1e6;
    eprintln!("min_rate 2 Mbit/s beside 7 Mbit/s: {rate:.2} Mbit/s");
    assert!(rate >= 1.8, "min rate {rate:.2}");
}

#[test]
#[ignore = "debugging aid: prints the engine's view every second"]
fn trace_one_flow() {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let net = Net::home(env("TRACE_MBIT", 10) as f64, env("TRACE_RTT_MS", 100));
    let (secs, every) = (env("TRACE_SECS", 5) as f64, env("TRACE_EVERY_MS", 500) * 1000);
    let mut sim = Sim::new(net, BudgetConfig::default(), &[(2, 1)], &[ShareSpec::default()]);
    sim.timestamps = env("TRACE_TIMESTAMPS", 0) == 1;
    sim.open(0, 0);
    let mut last = 0;
    sim.run(secs, |s, t| {
        if t >= last + every {
            last = t;
            let snap = s.engine.snapshot(4);
            let l = &snap.links[0];
            let f = snap.flows.first();
            eprintln!(
                "active={} {:?} t={:.1} budget={} q={:?} base={:?} phase={} flows={} held={} | flow alloc={:?} fwd={:?} unclamped={:?} link={:?} | counters rewritten={} busy_q={:.1}ms",
                snap.active_flows, slipstream_engine::PassReason::ALL.iter().map(|r| (r.as_str(), snap.counters.passed(*r))).filter(|x| x.1 > 0).collect::<Vec<_>>(), t as f64 / 1e6, l.budget_bytes, l.queue_delay, l.base_rtt, l.phase, l.flows, l.held_flows,
                f.and_then(|f| f.allocation), f.and_then(|f| f.forwarded_window), f.and_then(|f| f.unclamped_reason), f.and_then(|f| f.link),
                snap.counters.rewritten, (s.busy_until.saturating_sub(t)) as f64 / 1000.0
            );
        }
    });
}

#[test]
#[ignore = "debugging aid: 64 flows, the link's view every half second"]
fn trace_many_flows() {
    let net = Net::home(10.0, 100);
    let flows: Vec<(u8, u16)> = (0..64).map(|i| (if i == 0 { 2 } else { 3 }, 1)).collect();
    let mut sim = Sim::new(net, BudgetConfig::default(), &flows, &[ShareSpec::default()]);
    for i in 0..64 {
        sim.open(i, i as u64 * 20_000);
    }
    let mut last = 0;
    let mut prev = sim.delivered();
    sim.run(12.0, |s, t| {
        if t >= last + 500_000 {
            last = t;
            let snap = s.engine.snapshot(usize::MAX);
            let l = &snap.links[0];
            let d = s.delivered();
            let rate: u64 = d.iter().zip(&prev).map(|(a, b)| a - b).sum();
            prev = d;
            eprintln!(
                "t={:.1} budget={} q={:?} phase={} flows={} held={} goodput={:.2} Mbit/s queue={:.1} ms updates={}",
                t as f64 / 1e6, l.budget_bytes, l.queue_delay, l.phase, l.flows, l.held_flows,
                rate as f64 * 8.0 / 0.5 / 1e6, (s.busy_until.saturating_sub(t)) as f64 / 1000.0, s.window_updates
            );
        }
    });
}

#[test]
#[ignore = "debugging aid: the first windows forwarded for one flow"]
fn trace_start() {
    let net = Net::home(10.0, 100);
    let mut sim = Sim::new(net, BudgetConfig::default(), &[(2, 1)], &[ShareSpec::default()]);
    sim.open(0, 0);
    eprintln!(
        "edge after handshake: {}",
        sim.flows[0].edge - sim.flows[0].snd_una
    );
    sim.run(0.6, |s, t| {
        let f = &s.flows[0];
        eprintln!(
            "t={:.3} una={} nxt={} edge-una={} cwnd={}",
            t as f64 / 1e6,
            f.snd_una,
            f.snd_nxt,
            f.edge.wrapping_sub(f.snd_una),
            f.cwnd
        );
    });
}

/// One background flow alone across the coordinated slowdown due about 32 s in (the first comes
/// 2 s in, during the start): the two rounds at the minimum still come, and then the flow is back
/// at once at the budget before, with the same share of the link. Before the controllers skipped
/// the rounds that measured the slowdown, the delay target yielded on one of them to half its
/// budget (share 0.68 in the second after, 0.97 before), and LEDBAT's window regrew from the
/// floor by the allocator's demand rule (its smallest window 6% of the budget, share 0.75). Key
/// et al.'s controllers run at 50 Mbit/s and 20 ms (at 100 ms, T / RTT = 2 and binary search
/// climbs to its cap, see above); binary search's restart shows in the household's unit tests
/// (`slowdown_tests`), here it depends on where in its cycle the slowdown falls. Each runs with
/// and without timestamps: with them the delay target's window in the second after fell to
/// 0.66 of the budget before while the restart's burst was read as a queue (`RESUME_ROUNDS`).
#[test]
fn every_controller_goes_on_across_a_slowdown() {
    for ((name, budget), timestamps) in budgets()
        .into_iter()
        .flat_map(|b| [(b.clone(), false), (b, true)])
    {
        let net = if budget.uses_delay() {
            Net::home(10.0, 100)
        } else {
            Net::home(50.0, 20)
        };
        let mut sim = Sim::new(net, budget, &[(2, 1)], &[ShareSpec::default()]);
        sim.timestamps = timestamps;
        sim.open(0, 0);
        // Every 100 ms: (t in µs, phase, slowdowns so far, the budget, the flow's allocation,
        // bytes delivered).
        let mut seen: Vec<(u64, &'static str, u64, u64, u64, u64)> = Vec::new();
        sim.run(34.5, |s, t| {
            let snap = s.engine.snapshot(1);
            let l = &snap.links[0];
            let allocation = snap.flows.first().and_then(|f| f.allocation).unwrap_or(0);
            let delivered = s.delivered()[0];
            seen.push((
                t,
                l.phase.as_str(),
                l.slowdowns,
                l.budget_bytes,
                allocation.into(),
                delivered,
            ));
        });
        let start = seen.iter().position(|x| x.2 == 2).expect("a second slowdown");
        let end = start
            + seen[start..]
                .iter()
                .position(|x| x.1 != "slowdown")
                .expect("its end");
        let at = |t: u64| seen.iter().find(|x| x.0 >= t).expect("a sample");
        let (t0, t1) = (seen[start].0, seen[end].0);
        let before: Vec<u64> = seen
            .iter()
            .filter(|x| x.0 + 5_000_000 >= t0 && x.0 < t0)
            .map(|x| x.3)
            .collect();
        let before = before.iter().sum::<u64>() as f64 / before.len() as f64;
        let lowest = seen
            .iter()
            .filter(|x| x.0 >= t1 && x.0 < t1 + 1_000_000)
            .map(|x| x.3.min(x.4))
            .min()
            .expect("samples after");
        let share =
            |from: u64, to: u64| (at(to).5 - at(from).5) as f64 / ((to - from) as f64 / 1e6) / net.rate;
        let (share_before, share_after) = (share(t0 - 5_000_000, t0), share(t1, t1 + 1_000_000));
        eprintln!(
            "{name}, timestamps {timestamps}: slowdown {:.1}-{:.1} s; budget {} before, {} after; window in the second after at \
             least {lowest} ({:.3} of the budget before); share of the link {share_before:.3} in the 5 s \
             before, {share_after:.3} in the second after",
            t0 as f64 / 1e6,
            t1 as f64 / 1e6,
            seen[start - 1].3,
            seen[end].3,
            lowest as f64 / before,
        );
        // Two segments: of 1448 bytes, 1436 with timestamps.
        let held = seen[start..end].iter().all(|x| x.3 <= 2 * u64::from(MSS));
        assert!(
            held && t1 - t0 >= 200_000,
            "{name}: the slowdown holds the minimum"
        );
        let (last, first) = (seen[start - 1].3 as f64, seen[end].3 as f64);
        assert!(
            (first / last - 1.0).abs() <= 0.1,
            "{name}: budget {last} before, {first} after"
        );
        assert!(
            share_after >= 0.9 * share_before,
            "{name}: share {share_before:.3} -> {share_after:.3}"
        );
        if budget_uses_delay(name) {
            // Key et al.'s binary search restarts from a closed bracket every few seconds here
            // (one round's rho more than epsilon low), slowdown or not.
            assert!(
                lowest as f64 >= 0.9 * before,
                "{name}: window {lowest}, budget before {before:.0}"
            );
        }
    }
}

/// At stop the engine opens every held flow to its receiver's own window (issue 23: the daemon
/// sends these before it goes, so no sender waits for its persist timer): flows that yielded to
/// best effort each get a window update wider than what they were held to, and a second call
/// has none left (their edges are recorded as forwarded).
#[test]
fn held_flows_get_a_final_window_at_stop() {
    let net = Net::home(10.0, 100);
    let flows: Vec<(u8, u16)> = (0..16).map(|_| (3, 1)).collect();
    let mut sim = Sim::new(net, BudgetConfig::default(), &flows, &[ShareSpec::default()]);
    for i in 0..16 {
        sim.open(i, i as u64 * 20_000);
    }
    sim.cross_rate = 0.95 * net.rate;
    sim.cross_until = 30_000_000;
    sim.at(5_000_000, Event::Cross);
    sim.run(15.0, |_, _| {});
    let now = Instant::from_micros(15_000_000);
    let finals = sim.engine.final_window_updates(now);
    eprintln!("{} of 16 flows held at stop got a final window", finals.len());
    assert!(!finals.is_empty(), "flows beside best effort are held");
    for update in &finals {
        let info = parse(&update.packet).expect("a TCP packet");
        assert!(info.flags.ack && info.window > 0, "{info:?}");
    }
    assert!(sim.engine.final_window_updates(now).is_empty(), "sent once");
}

/// A route change: the base RTT steps from 100 to 130 ms under a background download alone, on a
/// router that counts best effort's traffic (none here). The flows' bases are too low by 30 ms
/// until measured afresh: the longest run of whole seconds in which the background fills under
/// 90% of the link (the false yield) is at most 2 s (issue 22; before the stale base's cuts
/// were undone, 5 s here and 3 s in the lab), with and without timestamps (with them 4 s while
/// the fresh-base slowdown's restart burst was read as a queue, see `RESUME_ROUNDS`).
/// `HOUSEHOLD_MODEL_TRACE` prints the link's view every 0.25 s (0.05 s around the step).
#[test]
fn a_longer_path_is_no_queue() {
    for timestamps in [false, true] {
        longer_path(timestamps);
    }
}

fn longer_path(timestamps: bool) {
    let net = Net::home(10.0, 100);
    let mut sim = Sim::new(net, BudgetConfig::default(), &[(2, 1)], &[ShareSpec::default()]);
    sim.counted = true;
    sim.timestamps = timestamps;
    sim.open(0, 0);
    let trace = std::env::var_os("HOUSEHOLD_MODEL_TRACE").is_some();
    let mut per_second = Vec::new();
    let mut last = sim.delivered()[0];
    let mut next_trace = 0;
    let step_s = 15;
    for second in 1..=25u64 {
        if second == step_s + 1 {
            sim.net.data_delay += 15_000;
            sim.net.ack_delay += 15_000;
        }
        sim.run(second as f64, |s, t| {
            if trace && t >= next_trace {
                next_trace = t + if (15_000_000..19_500_000).contains(&t) {
                    50_000
                } else {
                    250_000
                };
                let snap = s.engine.snapshot(1);
                let l = &snap.links[0];
                eprintln!(
                    "t={:.2} budget={} q={:?} base={:?} phase={} busy_q={:.1}ms",
                    t as f64 / 1e6,
                    l.budget_bytes,
                    l.queue_delay,
                    l.base_rtt,
                    l.phase,
                    s.busy_until.saturating_sub(t) as f64 / 1000.0
                );
            }
        });
        let now = sim.delivered()[0];
        per_second.push((now - last) as f64 / net.rate / (f64::from(MSS) / f64::from(MSS + 40)));
        last = now;
    }
    let shown: Vec<String> = per_second.iter().map(|u| format!("{u:.2}")).collect();
    eprintln!(
        "timestamps {timestamps}: use of the link per second (the step after second {step_s}): {}",
        shown.join(" ")
    );
    let before = &per_second[5..step_s as usize];
    assert!(before.iter().all(|&u| u >= 0.9), "before the step: {shown:?}");
    let after = &per_second[step_s as usize..];
    let longest = after.split(|&u| u >= 0.9).map(<[f64]>::len).max().unwrap_or(0);
    assert!(
        longest <= 2,
        "a false yield of {longest} s after the step: {shown:?}"
    );
}

/// A long path (a satellite link, a server on another continent): the background alone fills
/// 10 Mbit/s at 300 ms. Each 1.5x probe reaches a window-limited sender as one burst (at
/// 300 ms, from 57 to 85 kB: 23 ms of queue), and read as a standing queue it set the probe's
/// limits for ten seconds, after which the budget grew by a segment a round: the link's use
/// over seconds 10-20 was 0.41 (0.97 from 23 s on). Now a queue the raise's burst explains is
/// measured once, a limit whose rate the link then outran by a quarter is lifted, and the
/// drain after a cut may last two rounds while the queue shrinks: 0.79 (at 200 ms 0.97, as
/// before). What is left at 300 ms: the round after a cut reads the same flat queue (its data
/// left before the cut), which counts as a queue that held, and a second cut follows. With
/// timestamps too (0.94 and 0.85; 0.66 and 0.54 over seconds 5-20 before a raise's burst under
/// the target stopped restarting the low rounds a probe waits for).
/// One background flow alone on `net` for `secs` seconds: its share of the link in each second,
/// and the model after them.
fn alone_each_second(net: Net, timestamps: bool, secs: u32) -> (Vec<f64>, Sim) {
    let mut sim = Sim::new(net, BudgetConfig::default(), &[(2, 1)], &[ShareSpec::default()]);
    sim.timestamps = timestamps;
    sim.open(0, 0);
    let mut per_s = Vec::new();
    let mut prev = sim.delivered();
    for s in 1..=secs {
        sim.run(f64::from(s), |_, _| {});
        let d = sim.delivered();
        per_s.push(share(&prev, &d, 1.0, net));
        prev = d;
    }
    (per_s, sim)
}

#[test]
fn a_long_path_is_filled_without_waiting_out_a_bursts_limits() {
    let mut shares = Vec::new();
    for (rtt, timestamps) in [(200, false), (300, false), (200, true), (300, true)] {
        let (per_s, _) = alone_each_second(Net::home(10.0, rtt), timestamps, 20);
        let shown: Vec<String> = per_s.iter().map(|s| format!("{s:.2}")).collect();
        eprintln!(
            "10 Mbit/s, {rtt} ms, timestamps {timestamps}, each second: {}",
            shown.join(" ")
        );
        shares.push(per_s[10..].iter().sum::<f64>() / 10.0);
    }
    eprintln!("seconds 10-20: {shares:.3?}");
    assert!(shares.iter().all(|&s| s >= 0.75), "seconds 10-20: {shares:.3?}");
}

/// The background alone at other rates and RTTs, with and without timestamps: its use of the
/// link over seconds 5-20 and 20-40 (a coordinated slowdown falls in the second), the worst
/// second of 20-40, and each second. Printed for the notes, not judged.
#[test]
#[ignore = "debugging aid: prints the background's fill across rates and RTTs"]
fn fill_across_rates_and_rtts() {
    for (rate, rtt) in [
        (4.0, 30),
        (10.0, 100),
        (50.0, 20),
        (20.0, 200),
        (100.0, 50),
        (10.0, 300),
    ] {
        for ts in [false, true] {
            let (per, mut sim) = alone_each_second(Net::home(rate, rtt), ts, 40);
            let q = percentile(&mut sim.queue_samples, 0.5);
            let shown: Vec<String> = per.iter().map(|s| format!("{s:.2}")).collect();
            let m = |a: usize, b: usize| per[a..b].iter().sum::<f64>() / (b - a) as f64;
            eprintln!(
                "{rate}/{rtt} ts={ts}: 5-20 {:.3} 20-40 {:.3} min(20-40) {:.2} q50 {q:.1} | {}",
                m(5, 20),
                m(20, 40),
                per[20..].iter().cloned().fold(9.0, f64::min),
                shown.join(" ")
            );
        }
    }
}
