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

mod paths;
mod sharing;
mod traces;

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
    /// One packet of a steady best-effort sender (a call, a game) every `call_every` µs.
    Call,
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
    /// A steady best-effort sender's packet interval (µs; 0: none) and packet size.
    call_every: u64,
    call_bytes: u32,
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
            call_every: 0,
            call_bytes: 0,
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
                Event::Call => {
                    if self.call_every > 0 {
                        self.enqueue(t, self.call_bytes.saturating_sub(40));
                        self.wan[0].bytes += u64::from(self.call_bytes);
                        self.wan[0].packets += 1;
                        self.at(t + self.call_every, Event::Call);
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
