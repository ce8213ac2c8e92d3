//! A tiny discrete-event model of one flow: sender --50 ms--> 10 Mbit/s FIFO bottleneck -->
//! router (Vulture) --> receiver; ACKs router --50 ms--> sender. The sender is window-limited by
//! min(cwnd, advertised window) and emits at most one segment per `pace_gap`; TSvals tick at
//! 1 kHz on both hosts; the sender echoes the newest ACK TSval. No loss (unbounded buffer).

use super::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const PROP_US: u64 = 50_000;
const WIRE_BYTES: u64 = MSS as u64 + 52;
const HOST_WINDOW: u32 = 4 << 20;
const RCV_TS_OFFSET: u32 = 7_000_000;

pub(super) struct Config {
    pub bottleneck_bps: u64,
    /// Sender pacing rate; 1 Gbit/s is an unpaced, ACK-clocked sender.
    pub pace_bps: u64,
    /// Sender cwnd cap (it grows by the acked bytes up to this).
    pub cwnd_max: u32,
    pub initial_cwnd: u32,
    pub duration_us: u64,
    pub controlled: bool,
    pub vulture: VultureConfig,
}

/// One epoch decision seen by the simulation.
#[derive(Debug, Clone, Copy)]
pub(super) struct Decision {
    pub at_us: u64,
    pub policy: WindowPolicy,
    pub epoch: EpochSummary,
    /// Queueing delay of the segments arriving in the decided epoch: first and last.
    pub queue_first_us: u64,
    pub queue_last_us: u64,
    /// The queueing delay never fell by more than one service time during the epoch.
    pub queue_monotone: bool,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Data {
        len: u32,
        tsval: u32,
        tsecr: u32,
        queue_us: u64,
    },
    Ack {
        acked: u32,
        wnd: u32,
        tsval: u32,
    },
}

pub(super) struct Outcome {
    pub decisions: Vec<Decision>,
    /// (arrival at the router, queueing delay) of every segment.
    pub queue: Vec<(u64, u64)>,
    pub max_target: u32,
    pub first_target: Option<u32>,
    pub delivered_bytes: u64,
    pub lbe_at_us: Option<u64>,
    pub sender_clock: Option<TsClock>,
}

impl Outcome {
    pub(super) fn max_queue_after_us(&self, t: u64) -> u64 {
        self.queue
            .iter()
            .filter(|&&(at, _)| at >= t)
            .map(|&(_, q)| q)
            .max()
            .unwrap_or(0)
    }
}

pub(super) fn run(cfg: Config) -> Outcome {
    let svc_us = WIRE_BYTES * 8 * 1_000_000 / cfg.bottleneck_bps;
    let gap_us = (WIRE_BYTES * 8 * 1_000_000 / cfg.pace_bps).max(1);
    let rtt = Some(Duration::from_micros(2 * PROP_US + svc_us));
    let mut v = Vulture::new(cfg.vulture.clone());
    let mut est = TsClockEstimator::new();
    let mut events: BinaryHeap<Reverse<(u64, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let (mut inflight, mut cwnd, mut adv_wnd, mut ts_recent) = (0u32, cfg.initial_cwnd, HOST_WINDOW, 0u32);
    let (mut last_send, mut busy_until) = (0u64, 0u64);
    let mut out = Outcome {
        decisions: Vec::new(),
        queue: Vec::new(),
        max_target: 0,
        first_target: None,
        delivered_bytes: 0,
        lbe_at_us: None,
        sender_clock: None,
    };
    let mut epoch_queues: Vec<u64> = Vec::new();
    let mut last_summary = None;

    // Sends what the window allows at `now`.
    let mut send = |now: u64,
                    inflight: &mut u32,
                    cwnd: u32,
                    adv_wnd: u32,
                    ts_recent: u32,
                    events: &mut BinaryHeap<Reverse<(u64, u64, Ev)>>,
                    seq: &mut u64| {
        while *inflight + MSS <= cwnd.min(adv_wnd) {
            let t = now.max(last_send + gap_us);
            last_send = t;
            let at_bottleneck = t + PROP_US;
            let depart = at_bottleneck.max(busy_until) + svc_us;
            busy_until = depart;
            let tsval = (t / 1000) as u32;
            *seq += 1;
            let ev = Ev::Data {
                len: MSS,
                tsval,
                tsecr: ts_recent,
                queue_us: depart - at_bottleneck - svc_us,
            };
            events.push(Reverse((depart, *seq, ev)));
            *inflight += MSS;
        }
    };
    send(0, &mut inflight, cwnd, adv_wnd, ts_recent, &mut events, &mut seq);

    while let Some(Reverse((now, _, ev))) = events.pop() {
        if now > cfg.duration_us {
            break;
        }
        match ev {
            Ev::Data {
                len,
                tsval,
                tsecr,
                queue_us,
            } => {
                est.observe(Instant::from_micros(now), tsval);
                let c = FlowContext {
                    rtt,
                    sender_clock: est.clock(),
                    ..FlowContext::new(MSS)
                };
                let sample = DataSample {
                    payload_len: len,
                    timestamps: Some(Timestamps { tsval, tsecr }),
                    out_of_order: false,
                };
                if cfg.controlled {
                    v.on_data(Instant::from_micros(now), &c, &sample);
                }
                out.delivered_bytes += u64::from(len);
                out.queue.push((now, queue_us));
                epoch_queues.push(queue_us);
                let s = v.stats();
                if s.last_epoch.is_some() && s.last_epoch != last_summary
                    || out.decisions.last().is_some_and(|d| d.at_us == now)
                {
                    last_summary = s.last_epoch;
                    // The completing segment belongs to the next epoch.
                    let q = &epoch_queues[..epoch_queues.len() - 1];
                    out.decisions.push(Decision {
                        at_us: now,
                        policy: s.policy,
                        epoch: s.last_epoch.unwrap(),
                        queue_first_us: q.first().copied().unwrap_or(0),
                        queue_last_us: q.last().copied().unwrap_or(0),
                        queue_monotone: q.windows(2).all(|w| w[1] + svc_us >= w[0]),
                    });
                    epoch_queues.clear();
                    epoch_queues.push(queue_us);
                }
                // The receiver ACKs every segment at once.
                let rcv_tsval = RCV_TS_OFFSET + (now / 1000) as u32;
                let a = AckSample {
                    acked_bytes: len,
                    tsval: Some(rcv_tsval),
                    reports_loss: false,
                };
                let target = if cfg.controlled {
                    v.on_ack(Instant::from_micros(now), &c, &a)
                } else {
                    None
                };
                if let Some(t) = target {
                    assert!(t >= 2 * MSS);
                    out.lbe_at_us.get_or_insert(now);
                    out.first_target.get_or_insert(t);
                    out.max_target = out.max_target.max(t);
                }
                let wnd = target.map_or(HOST_WINDOW, |t| t.min(HOST_WINDOW));
                seq += 1;
                events.push(Reverse((
                    now + PROP_US,
                    seq,
                    Ev::Ack {
                        acked: len,
                        wnd,
                        tsval: rcv_tsval,
                    },
                )));
            }
            Ev::Ack { acked, wnd, tsval } => {
                inflight -= acked;
                cwnd = cwnd.saturating_add(acked).min(cfg.cwnd_max);
                adv_wnd = wnd;
                ts_recent = tsval;
                send(
                    now,
                    &mut inflight,
                    cwnd,
                    adv_wnd,
                    ts_recent,
                    &mut events,
                    &mut seq,
                );
            }
        }
    }
    out.sender_clock = est.clock();
    out
}
