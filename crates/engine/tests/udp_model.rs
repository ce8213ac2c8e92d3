//! Background UDP flows under household control, in a model of the access link: a FIFO
//! bottleneck (rate, buffer, tail drop) in front of the router, a loss-based sender per flow
//! (Reno: +1 packet per RTT, halved once per RTT on loss), the engine as the router's shaper (a
//! held packet goes on when its verdict says) or policer, and, for flows the router cannot time (QUIC), the engine's delay probes to a reflector beyond
//! the bottleneck. Best effort is a Reno download the engine never sees; the WAN counters count
//! it, as the router's interface does.
//!
//! The model is what the lab cannot be: exact, fast and the same every run. It asks whether the
//! control loop (shaper rate = allocation / RTT, budget from the measured queue) holds best
//! effort's rate beside a background that only understands loss, and still fills an idle link.

mod common;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use etherparse::PacketBuilder;
use slipstream_control::{ControllerConfig, Duration, Instant};
use slipstream_engine::{Engine, EngineConfig, LinkCounters, PacketCopy, PacketMeta, RuleSpec, Verdict};
use slipstream_household::{HouseholdConfig, UdpEnforcement};

const PACKET: u64 = 1228; // IP bytes of a 1200-byte UDP payload
const ACK: u64 = 78;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// A QUIC-like flow: opaque payload, the router cannot time it.
    Quic,
    /// uTP: the sender's microsecond timestamp in each header.
    Utp,
    /// Best effort: the engine never sees it.
    BestEffort,
}

/// A Reno sender of fixed-size packets.
struct Sender {
    kind: Kind,
    port: u16,
    cwnd: f64,
    ssthresh: f64,
    in_flight: u64,
    next_id: u64,
    last_cut: Instant,
    srtt: Duration,
    /// The window the receiver's last ACK advertised, packets (uTP's `wnd_size`, as the router
    /// forwarded it).
    peer_window: u64,
    /// Payload bytes the receiver got, and when the flow runs.
    delivered: u64,
    start: Instant,
    stop: Instant,
}

impl Sender {
    fn new(kind: Kind, port: u16, start_ms: u64, stop_ms: u64) -> Sender {
        Sender {
            kind,
            port,
            cwnd: 10.0,
            ssthresh: f64::MAX,
            in_flight: 0,
            next_id: 0,
            last_cut: Instant::ZERO,
            srtt: Duration::from_millis(100),
            peer_window: u64::MAX,
            delivered: 0,
            start: Instant::from_millis(start_ms),
            stop: Instant::from_millis(stop_ms),
        }
    }

    fn on_ack(&mut self) {
        self.in_flight -= 1;
        if self.cwnd < self.ssthresh {
            self.cwnd += 1.0;
        } else {
            self.cwnd += 1.0 / self.cwnd;
        }
    }

    fn on_loss(&mut self, now: Instant) {
        self.in_flight -= 1;
        if now.saturating_since(self.last_cut) > self.srtt {
            self.cwnd = (self.cwnd / 2.0).max(2.0);
            self.ssthresh = self.cwnd;
            self.last_cut = now;
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Event {
    /// The sender may send (after an ACK or a loss, or at its start).
    Wake(usize),
    /// A data packet reaches the router after the bottleneck (sent at the server's clock, us).
    AtRouter(usize, u64),
    /// The router's shaper lets a packet it held go on to the receiver (sent at, us).
    Released(usize, u64),
    Acked(usize),
    Lost(usize),
    /// The router sends a probe / the answer comes back (sent at).
    Probe,
    AtReflector(u64),
    ProbeBack(u64),
    Tick,
}

struct Model {
    engine: Engine,
    senders: Vec<Sender>,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    /// Bottleneck: bytes per second, buffer, when it is busy until (us).
    rate: f64,
    buffer: u64,
    queue: VecDeque<(u64, u64)>, // (departure us, bytes)
    busy_until: u64,
    one_way_us: u64,
    wan_down: LinkCounters,
    wan_up: LinkCounters,
    next_probe: u64,
    /// Samples of the bottleneck queue's delay (us) while best effort runs.
    queue_samples: Vec<u64>,
}

impl Model {
    fn new(rate_mbit: f64, rtt_ms: u64, buffer_bdp: f64, senders: Vec<Sender>) -> Model {
        Model::with(rate_mbit, rtt_ms, buffer_bdp, senders, UdpEnforcement::default())
    }

    fn with(
        rate_mbit: f64,
        rtt_ms: u64,
        buffer_bdp: f64,
        senders: Vec<Sender>,
        udp: UdpEnforcement,
    ) -> Model {
        let rate = rate_mbit * 1e6 / 8.0;
        let engine = Engine::new(EngineConfig {
            rules: vec![RuleSpec {
                name: "udp".into(),
                controller: ControllerConfig::Household,
                share: Default::default(),
            }],
            max_flows: 64,
            idle_timeout: Duration::from_secs(120),
            evict_idle_after: Duration::from_secs(10),
            household: HouseholdConfig {
                udp,
                ..Default::default()
            },
        });
        let mut m = Model {
            engine,
            senders,
            events: BinaryHeap::new(),
            seq: 0,
            rate,
            buffer: (rate * rtt_ms as f64 / 1000.0 * buffer_bdp) as u64,
            queue: VecDeque::new(),
            busy_until: 0,
            one_way_us: rtt_ms * 500,
            wan_down: LinkCounters {
                header_bytes: 0,
                ..Default::default()
            },
            wan_up: LinkCounters::default(),
            next_probe: 0,
            queue_samples: Vec::new(),
        };
        for i in 0..m.senders.len() {
            let start = m.senders[i].start;
            m.at(
                start.saturating_since(Instant::ZERO).as_micros() as u64,
                Event::Wake(i),
            );
        }
        m.at(0, Event::Tick);
        m
    }

    fn at(&mut self, us: u64, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((us, self.seq, event)));
    }

    /// Enqueues `bytes` at the bottleneck at `now` (us); the departure time, or `None` if the
    /// buffer is full.
    fn bottleneck(&mut self, now: u64, bytes: u64) -> Option<u64> {
        while self.queue.front().is_some_and(|(dep, _)| *dep <= now) {
            self.queue.pop_front();
        }
        let queued: u64 = self.queue.iter().map(|(_, b)| b).sum();
        if queued + bytes > self.buffer {
            return None;
        }
        let start = self.busy_until.max(now);
        let dep = start + (bytes as f64 / self.rate * 1e6) as u64;
        self.busy_until = dep;
        self.queue.push_back((dep, bytes));
        Some(dep)
    }

    fn packet(&self, i: usize, from_server: bool, sent_us: u64) -> Vec<u8> {
        let s = &self.senders[i];
        let mut payload = vec![0x41u8; if from_server { 1200 } else { 50 }];
        if s.kind == Kind::Utp {
            payload[0] = if from_server { 0x01 } else { 0x21 };
            payload[1] = 0;
            payload[4..8].copy_from_slice(&(sent_us as u32).to_be_bytes());
        }
        let (src, dst, sport, dport) = if from_server {
            ([192, 0, 2, 1], [10, 0, 0, 2 + i as u8], 443, s.port)
        } else {
            ([10, 0, 0, 2 + i as u8], [192, 0, 2, 1], s.port, 443)
        };
        let mut out = Vec::new();
        PacketBuilder::ipv4(src, dst, 64)
            .udp(sport, dport)
            .write(&mut out, &payload)
            .unwrap();
        out
    }

    fn feed(&mut self, now: u64, bytes: &mut [u8], from_lan: bool) -> Verdict {
        let meta = PacketMeta {
            rule: Some(1),
            copy: PacketCopy::Full,
            checksum_ready: true,
            from_lan: Some(from_lan),
            arrival: Some(Instant::from_micros(now)),
        };
        self.engine.handle_packet(Instant::from_micros(now), bytes, meta)
    }

    fn run(&mut self, until_ms: u64, be_window: (u64, u64)) {
        while let Some(Reverse((now, _, event))) = self.events.pop() {
            if now > until_ms * 1000 {
                break;
            }
            let t = Instant::from_micros(now);
            match event {
                Event::Wake(i) => {
                    if self.senders[i].next_id == 0 && self.senders[i].kind != Kind::BestEffort {
                        // The LAN host opens the flow (a QUIC Initial, a uTP SYN): its answer
                        // comes a round trip later.
                        let mut hello = self.packet(i, false, now);
                        self.feed(now, &mut hello, true);
                        self.senders[i].next_id = 1;
                        self.at(now + self.one_way_us, Event::Wake(i));
                        continue;
                    }
                    let window = |s: &Sender| (s.cwnd as u64).min(s.peer_window);
                    while self.senders[i].in_flight < window(&self.senders[i]) && t < self.senders[i].stop {
                        self.senders[i].in_flight += 1;
                        self.senders[i].next_id += 1;
                        // The server sits right before the bottleneck.
                        match self.bottleneck(now, PACKET) {
                            Some(dep) => self.at(dep + self.one_way_us, Event::AtRouter(i, now)),
                            None => self.at(now + 2 * self.one_way_us, Event::Lost(i)),
                        }
                    }
                }
                Event::AtRouter(i, sent) => {
                    self.wan_down.bytes += PACKET;
                    self.wan_down.packets += 1;
                    let verdict = if self.senders[i].kind == Kind::BestEffort {
                        Verdict::Accept
                    } else {
                        let mut p = self.packet(i, true, sent);
                        self.feed(now, &mut p, false)
                    };
                    match verdict {
                        Verdict::Drop => self.at(now + self.one_way_us, Event::Lost(i)),
                        Verdict::Hold { until, .. } => self.at(
                            until.saturating_since(Instant::ZERO).as_micros() as u64,
                            Event::Released(i, sent),
                        ),
                        _ => self.at(now, Event::Released(i, sent)),
                    }
                }
                Event::Released(i, sent) => {
                    self.senders[i].delivered += 1200;
                    // The receiver's ACK goes straight back up (an uncongested uplink).
                    if self.senders[i].kind != Kind::BestEffort {
                        let mut ack = self.packet(i, false, now);
                        self.feed(now, &mut ack, true);
                        if self.senders[i].kind == Kind::Utp {
                            // libutp sends no more than the receiver's window beyond its ACK.
                            let w = u32::from_be_bytes([ack[40], ack[41], ack[42], ack[43]]);
                            self.senders[i].peer_window = (u64::from(w) / 1200).max(1);
                        }
                    }
                    self.wan_up.bytes += ACK;
                    self.wan_up.packets += 1;
                    let rtt = Duration::from_micros(now + self.one_way_us - sent);
                    let s = &mut self.senders[i];
                    s.srtt = (s.srtt * 7 + rtt) / 8;
                    self.at(now + self.one_way_us, Event::Acked(i));
                }
                Event::Acked(i) => {
                    self.senders[i].on_ack();
                    self.at(now, Event::Wake(i));
                }
                Event::Lost(i) => {
                    self.senders[i].on_loss(t);
                    self.at(now, Event::Wake(i));
                }
                Event::Probe => {
                    // Up to the reflector (uncongested), back through the bottleneck.
                    self.at(now + self.one_way_us, Event::AtReflector(now));
                }
                Event::AtReflector(sent) => {
                    if let Some(dep) = self.bottleneck(now, 64) {
                        self.at(dep + self.one_way_us, Event::ProbeBack(sent));
                    }
                }
                Event::ProbeBack(sent) => {
                    self.wan_down.bytes += 64;
                    self.wan_down.packets += 1;
                    self.engine.on_probe_sample(Instant::from_micros(sent), t);
                }
                Event::Tick => {
                    self.engine.on_link_counters(self.wan_down, self.wan_up);
                    self.engine.on_tick(t);
                    if let Some(interval) = self.engine.probe_interval() {
                        if now >= self.next_probe {
                            self.next_probe = now + interval.as_micros() as u64;
                            self.at(now, Event::Probe);
                        }
                    }
                    if (be_window.0 * 1000..be_window.1 * 1000).contains(&now) {
                        let queued = self.busy_until.saturating_sub(now);
                        self.queue_samples.push(queued);
                    }
                    if std::env::var_os("UDP_MODEL_TRACE").is_some()
                        && now
                            % std::env::var("UDP_MODEL_EVERY")
                                .ok()
                                .and_then(|v| v.parse().ok())
                                .unwrap_or(100_000u64)
                            == 0
                        && now
                            < std::env::var("UDP_MODEL_UNTIL")
                                .ok()
                                .and_then(|v| v.parse().ok())
                                .unwrap_or(u64::MAX)
                    {
                        let snap = self.engine.snapshot(4);
                        let l = &snap.links[0];
                        let f = snap.flows.iter().find(|f| f.udp.is_some());
                        eprintln!(
                            "t={:.1} budget={} phase={:?} q={:?} be={:?} base={:?} police={:?} alloc={:?} cwnd={:.0} bneck_q={:.1}ms",
                            now as f64 / 1e6,
                            l.budget_bytes,
                            l.phase,
                            l.queue_delay,
                            l.best_effort_bits_per_second.map(|b| (b / 1e6 * 10.0).round() / 10.0),
                            l.base_rtt,
                            f.and_then(|f| f.udp.as_ref().unwrap().policed_bits_per_second).map(|b| (b / 1e5).round() / 10.0),
                            f.and_then(|f| f.allocation),
                            self.senders[0].cwnd,
                            self.busy_until.saturating_sub(now) as f64 / 1000.0
                        );
                    }
                    self.at(now + 5_000, Event::Tick);
                }
            }
        }
    }

    fn delivered(&self, i: usize) -> u64 {
        self.senders[i].delivered
    }
}

/// Rates (Mbit/s) of each sender over [from, to) ms: runs the model in two steps.
fn rates_between(m: &mut Model, from_ms: u64, to_ms: u64, be: (u64, u64)) -> Vec<f64> {
    m.run(from_ms, be);
    let before: Vec<u64> = (0..m.senders.len()).map(|i| m.delivered(i)).collect();
    m.run(to_ms, be);
    (0..m.senders.len())
        .map(|i| (m.delivered(i) - before[i]) as f64 * 8.0 / ((to_ms - from_ms) as f64 / 1000.0) / 1e6)
        .collect()
}

fn p95(v: &mut [u64]) -> f64 {
    v.sort_unstable();
    v.get(v.len() * 95 / 100).copied().unwrap_or(0) as f64 / 1000.0
}

/// One run: the background alone for 20 s, then best effort beside it for 20 s. Returns the
/// background's fill alone (10-20 s), best effort's share of the link (30-40 s), and the
/// bottleneck queue's p95 (ms) while the background was alone.
fn background_then_best_effort(kind: Kind, rate_mbit: f64, rtt_ms: u64, bdp: f64) -> (f64, f64, f64) {
    background_then_best_effort_by(kind, rate_mbit, rtt_ms, bdp, UdpEnforcement::default())
}

fn background_then_best_effort_by(
    kind: Kind,
    rate_mbit: f64,
    rtt_ms: u64,
    bdp: f64,
    udp: UdpEnforcement,
) -> (f64, f64, f64) {
    let mut m = Model::with(
        rate_mbit,
        rtt_ms,
        bdp,
        vec![
            Sender::new(kind, 50_000, 0, 40_000),
            Sender::new(Kind::BestEffort, 50_001, 20_000, 40_000),
        ],
        udp,
    );
    let alone = rates_between(&mut m, 10_000, 20_000, (10_000, 20_000));
    let alone_delay = p95(&mut std::mem::take(&mut m.queue_samples));
    let beside = rates_between(&mut m, 30_000, 40_000, (30_000, 40_000));
    let delay = p95(&mut m.queue_samples);
    eprintln!(
        "{kind:?} {} {rate_mbit} Mbit/s {rtt_ms} ms {bdp} BDP: alone {:.2} Mbit/s (queue p95 {alone_delay:.1} ms), beside: background {:.2} best effort {:.2} Mbit/s (queue p95 {delay:.1} ms), drops {}, probes {}",
        udp.name(), alone[0], beside[0], beside[1],
        m.engine.counters().udp_dropped, m.engine.counters().probe_samples
    );
    (alone[0] / rate_mbit, beside[1] / rate_mbit, alone_delay)
}

// The model's senders are Reno: after each loss they take a round trip per packet to grow back,
// so a policed flow held near a 10 ms queue fills less of a long-RTT link than it does with its
// own full buffer, and overshoots the target before each loss (the lab measures real QUIC stacks,
// whose Cubic grows back faster). A uTP flow is held by its receiver's window instead, without a
// loss. What the model holds the engine to: best effort keeps its rate, the background fills most
// of an idle link, and the queue it builds alone stays within a few targets (10 ms).

/// What best effort keeps beside a QUIC download: the background's floor, two packets per round
/// trip, is 2.5% of a 10 Mbit/s link at 100 ms, and a shaped sender keeps it (0.949 here) where
/// the policer's drops cost a Reno sender more than its floor (0.976).
const BEST_EFFORT_KEPT: f64 = 0.94;

#[test]
fn a_quic_download_fills_an_idle_link_and_yields_to_best_effort() {
    for (rate, rtt, bdp, fill_at_least) in [(10.0, 100, 1.0, 0.85), (50.0, 20, 5.0, 0.9)] {
        let (fill, best_effort, queue) = background_then_best_effort(Kind::Quic, rate, rtt, bdp);
        assert!(
            fill >= fill_at_least,
            "{rate} Mbit/s: the QUIC flow alone filled {fill:.2}"
        );
        assert!(
            best_effort >= BEST_EFFORT_KEPT,
            "{rate} Mbit/s: best effort kept {best_effort:.3}"
        );
        assert!(
            queue <= 30.0,
            "{rate} Mbit/s: the QUIC flow alone queued {queue:.1} ms (p95)"
        );
    }
}

/// The shaper (the default) against the policer it replaced, same model, same links: the
/// packets over the rate wait at the router instead of being lost, so a Reno sender's halving
/// finds them there to keep the link busy while it grows back.
#[test]
fn a_shaped_quic_download_fills_more_than_a_policed_one_and_yields_as_well() {
    for (rate, rtt, bdp) in [(10.0, 100, 1.0), (50.0, 20, 5.0)] {
        let (shaped, shaped_be, shaped_queue) =
            background_then_best_effort_by(Kind::Quic, rate, rtt, bdp, UdpEnforcement::Shape);
        let (policed, policed_be, _) =
            background_then_best_effort_by(Kind::Quic, rate, rtt, bdp, UdpEnforcement::Police);
        eprintln!("{rate} Mbit/s: fill shaped {shaped:.3} policed {policed:.3}; best effort shaped {shaped_be:.3} policed {policed_be:.3}");
        assert!(
            shaped >= policed + 0.05 || shaped >= 0.95,
            "{rate} Mbit/s: shaped {shaped:.3}, policed {policed:.3}"
        );
        assert!(
            shaped_be >= BEST_EFFORT_KEPT,
            "{rate} Mbit/s: best effort kept {shaped_be:.3}"
        );
        assert!(
            shaped_queue <= 30.0,
            "{rate} Mbit/s: queue p95 {shaped_queue:.1} ms"
        );
    }
}

#[test]
fn a_utp_download_is_timed_by_its_headers_without_probes() {
    let (fill, best_effort, queue) = background_then_best_effort(Kind::Utp, 10.0, 100, 1.0);
    assert!(fill >= 0.9, "uTP alone filled {fill:.2}");
    assert!(best_effort >= 0.95, "best effort kept {best_effort:.2}");
    assert!(queue <= 20.0, "uTP alone queued {queue:.1} ms (p95)");
}

#[test]
fn two_hosts_share_the_link_whatever_their_transport() {
    // Host 1 downloads over QUIC (probed), host 2 over uTP (timed by its headers), both
    // background under one rule: equal shares per LAN host.
    let mut m = Model::new(
        10.0,
        100,
        1.0,
        vec![
            Sender::new(Kind::Quic, 50_000, 0, 40_000),
            Sender::new(Kind::Utp, 50_001, 0, 40_000),
        ],
    );
    let rates = rates_between(&mut m, 20_000, 40_000, (20_000, 40_000));
    let ratio = rates[0].max(rates[1]) / rates[0].min(rates[1]).max(1e-9);
    eprintln!(
        "QUIC host {:.2} Mbit/s, uTP host {:.2} Mbit/s: ratio {ratio:.2}, total {:.2}",
        rates[0],
        rates[1],
        rates[0] + rates[1]
    );
    // The Reno QUIC flow grows while the budget does (its shaper holds nothing back then) where
    // the uTP flow is held to its window: 1.17 here; the lab's real stacks (udp-mix) split
    // 1.04.
    assert!(ratio <= 1.35, "host share ratio {ratio:.2}");
    assert!(
        rates[0] + rates[1] >= 7.5,
        "together {:.2} Mbit/s",
        rates[0] + rates[1]
    );
}
