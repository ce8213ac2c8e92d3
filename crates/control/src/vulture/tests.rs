//! Whole-controller tests: the glue (warmup, LBE switch, epochs, pause, loss), memory, a tiny
//! discrete-event simulation of one flow through a 10 Mbit/s bottleneck, and a proptest.

use super::*;
use crate::controller::{ControllerMode, Timestamps, WindowPolicy};
use crate::ts_clock::{TsClock, TsClockEstimator};

const MSS: u32 = 1448;
const RTT: Duration = Duration::from_millis(100);

fn ctx() -> FlowContext {
    FlowContext {
        rtt: Some(RTT),
        sender_clock: Some(TsClock::from_hz(1000)),
        ..FlowContext::new(MSS)
    }
}

fn data(v: &mut Vulture, arrival_ms: u64, tsval: u32, tsecr: u32) {
    data_len(v, arrival_ms, tsval, tsecr, 1000);
}

fn data_len(v: &mut Vulture, arrival_ms: u64, tsval: u32, tsecr: u32, len: u32) {
    v.on_data(
        Instant::from_millis(arrival_ms),
        &ctx(),
        &DataSample {
            payload_len: len,
            timestamps: Some(Timestamps { tsval, tsecr }),
            out_of_order: false,
        },
    );
}

fn ack(v: &mut Vulture, sent_ms: u64, acked: u32, tsval: Option<u32>) -> Option<u32> {
    v.on_ack(
        Instant::from_millis(sent_ms),
        &ctx(),
        &AckSample {
            acked_bytes: acked,
            tsval,
            reports_loss: false,
        },
    )
}

#[test]
fn size_of_vulture() {
    let size = std::mem::size_of::<Vulture>();
    println!("size_of::<Vulture>() = {size} bytes");
    // 536 on 64-bit targets: Alg. 6 ring 192, Alg. 1 ring 128, the rest counters, times and
    // parameters.
    assert!(size <= 536, "Vulture is {size} bytes");
}

#[test]
fn warmup_until_clock_and_rtt_are_known() {
    let mut v = Vulture::new(VultureConfig::default());
    assert_eq!(v.stats().mode, ControllerMode::Warmup);
    for (rtt, clock) in [
        (None, None),
        (Some(RTT), None),
        (None, Some(TsClock::from_hz(1000))),
    ] {
        let c = FlowContext {
            rtt,
            sender_clock: clock,
            ..FlowContext::new(MSS)
        };
        let a = AckSample {
            acked_bytes: 1000,
            tsval: Some(1),
            reports_loss: false,
        };
        assert_eq!(v.on_ack(Instant::ZERO, &c, &a), None);
    }
    let s = v.stats();
    assert_eq!(
        (s.mode, s.policy, s.target_window),
        (ControllerMode::Warmup, WindowPolicy::Fix, None)
    );
    assert!(!v.is_lbe());
}

#[test]
fn turning_lbe_sets_rwnd_to_the_cwnd_estimate() {
    let mut v = Vulture::new(VultureConfig::default());
    // Alg. 6 runs during warmup: ten segments on an empty ack queue.
    for i in 0..10 {
        data_len(&mut v, i, i as u32, 0, MSS);
    }
    assert_eq!(v.cwnd_estimate(), 10 * MSS);
    assert_eq!(ack(&mut v, 20, MSS, Some(7)), Some(10 * MSS));
    let s = v.stats();
    assert_eq!(
        (s.mode, s.policy, s.target_window),
        (ControllerMode::Conservative, WindowPolicy::Fix, Some(10 * MSS))
    );
    assert!(v.is_paused(), "the switch is a policy change");
    // A tiny estimate is floored at 2 MSS.
    let mut v = Vulture::new(VultureConfig::default());
    data_len(&mut v, 0, 0, 0, 100);
    assert_eq!(ack(&mut v, 20, 100, Some(7)), Some(2 * MSS));
}

/// The pause, the epoch boundary and an epoch decision, hand-computed (1 kHz clock, PSI 20 ms,
/// RTT 100 ms). Tuples are (arrival ms, tsval, tsecr).
#[test]
fn pause_epochs_and_decisions() {
    let mut v = Vulture::new(VultureConfig::default());
    data_len(&mut v, 0, 0, 0, 10_000); // warmup; Alg. 1 queue [(0,0)]; cwnd estimate 10000
    assert_eq!(ack(&mut v, 1, 1000, Some(500)), Some(10_000)); // LBE; pause until TSecr >= 500
    data(&mut v, 10, 10, 499); // queue [(0,0),(10,10)]
    data(&mut v, 60, 30, 499); // PIV +30 ms against (0,0): paused, discarded
    assert!(v.is_paused());
    data(&mut v, 70, 40, 500); // reflects the new window: pause ends, epoch starts at 70;
                               // PIV +30 ms against (10,10) is the epoch's first
    assert!(!v.is_paused());
    data(&mut v, 80, 50, 500); // queue [(50,80)]
    data(&mut v, 90, 60, 500); // queue [(50,80),(60,90)]
    data(&mut v, 105, 75, 500); // PIV 0 against (50,80)
    assert_eq!(v.stats().last_epoch, None);
    // 170 - 70 >= RTT: the epoch [+30, 0] completes (+30 ms rounds to +32 at the 4 ms jiffy: a tie,
    // away from zero). Conservative (sum > 0): high 1, low 1 of 2;
    // neither > 7/8·2 = 1.75: fix, unchanged, so no pause. This segment's PIV (+40 ms against
    // (60,90): psi 40, pai 80) is the first of the next epoch.
    data(&mut v, 170, 100, 500);
    let s = v.stats();
    assert_eq!(
        s.last_epoch,
        Some(EpochSummary {
            piv_count: 2,
            positive: 1,
            piv_sum_micros: 32_000
        })
    );
    assert_eq!(
        (s.mode, s.policy),
        (ControllerMode::Conservative, WindowPolicy::Fix)
    );
    assert!(!v.is_paused());
    // The second epoch [+40] completes at 270: high 1 > 0.875: halve; rwndThresh := 10000.
    data(&mut v, 270, 200, 500);
    let s = v.stats();
    assert_eq!(
        s.last_epoch,
        Some(EpochSummary {
            piv_count: 1,
            positive: 1,
            piv_sum_micros: 40_000
        })
    );
    assert_eq!(s.policy, WindowPolicy::Halve);
    assert_eq!(v.rwnd_thresh(), 10_000);
    assert!(v.is_paused());
    // Alg. 5 halves per ACK; this first ACK after the change carries TSval 600.
    assert_eq!(ack(&mut v, 275, 1000, Some(600)), Some(9_000));
    // Stretched pairs before the reflecting data are ignored...
    data(&mut v, 280, 210, 599); // queue [(200,270),(210,280)]
    data(&mut v, 400, 230, 599); // PIV +100 ms against (200,270): discarded
    assert!(v.is_paused());
    data(&mut v, 410, 240, 600); // ends the pause, epoch starts at 410; PIV +110 ms... counted
    data(&mut v, 520, 340, 600); // completes [+100]: conservative, halve again (no change)
    let s = v.stats();
    assert_eq!(
        s.last_epoch,
        Some(EpochSummary {
            piv_count: 1,
            positive: 1,
            piv_sum_micros: 100_000
        })
    );
    assert_eq!(s.policy, WindowPolicy::Halve);
    assert!(!v.is_paused(), "halve decided again is not a change");
}

#[test]
fn ack_without_tsval_ends_the_pause_after_one_rtt() {
    let mut v = Vulture::new(VultureConfig::default());
    data(&mut v, 0, 0, 0);
    assert!(ack(&mut v, 10, 1000, None).is_some());
    assert!(v.is_paused());
    data(&mut v, 50, 50, 0);
    data(&mut v, 109, 109, 0);
    assert!(v.is_paused());
    data(&mut v, 110, 110, 0);
    assert!(!v.is_paused());
}

#[test]
fn loss_and_reordering_halve_at_once() {
    let mut v = Vulture::new(VultureConfig::default());
    data_len(&mut v, 0, 0, 0, 20_000);
    assert_eq!(ack(&mut v, 1, 0, Some(1)), Some(20_000));
    // A SACK hole: halve, rwndThresh := 20000, and this ACK already halves.
    let lossy = AckSample {
        acked_bytes: 3000,
        tsval: Some(2),
        reports_loss: true,
    };
    assert_eq!(v.on_ack(Instant::from_millis(5), &ctx(), &lossy), Some(17_000));
    assert_eq!((v.policy(), v.rwnd_thresh()), (Policy::Halve, 20_000));
    // An out-of-order segment while already halving changes nothing.
    let mut v2 = v.clone();
    let ooo = DataSample {
        payload_len: 1000,
        timestamps: Some(Timestamps { tsval: 6, tsecr: 2 }),
        out_of_order: true,
    };
    v2.on_data(Instant::from_millis(6), &ctx(), &ooo);
    assert_eq!((v2.policy(), v2.rwnd_thresh()), (Policy::Halve, 20_000));
    // From fix, an out-of-order segment halves too.
    let mut v3 = Vulture::new(VultureConfig::default());
    data_len(&mut v3, 0, 0, 0, 20_000);
    ack(&mut v3, 1, 0, Some(1));
    v3.on_data(Instant::from_millis(6), &ctx(), &ooo);
    assert_eq!((v3.policy(), v3.rwnd_thresh()), (Policy::Halve, 20_000));
    assert!(v3.is_paused());
}

#[test]
fn config_round_trips_and_validates() {
    let c = VultureConfig::default();
    assert_eq!(Vulture::new(c.clone()).config(), c);
    assert_eq!(c.validate(), Ok(()));
    let bad = VultureConfig {
        aggressive_low: Duration::from_millis(20),
        ..c.clone()
    };
    assert!(bad.validate().is_err());
    let bad = VultureConfig { alpha: 0.0, ..c };
    assert!(bad.validate().is_err());
}

mod sim;

fn run_sim(pace_bps: u64, controlled: bool) -> sim::Outcome {
    sim::run(sim::Config {
        bottleneck_bps: 10_000_000,
        pace_bps,
        cwnd_max: 4 << 20,
        initial_cwnd: 10 * MSS,
        duration_us: 20_000_000,
        controlled,
        vulture: VultureConfig::default(),
    })
}

/// A sender limited by its own cwnd (64 KiB, half the path's BDP, so no queue builds and every
/// epoch decides to grow): with Slipstream's validated growth rwnd stops at twice the window the
/// sender uses instead of doubling on and on above the window in force (the paper's rules,
/// same run, end far above it).
#[test]
fn sim_validated_growth_keeps_rwnd_near_what_the_sender_uses() {
    let run = |vulture| {
        sim::run(sim::Config {
            bottleneck_bps: 10_000_000,
            pace_bps: 1_000_000_000,
            cwnd_max: 64 << 10,
            initial_cwnd: 10 * MSS,
            duration_us: 20_000_000,
            controlled: true,
            vulture,
        })
    };
    let in_use = 64 << 10;
    let paper = run(VultureConfig::default());
    let validated = run(VultureConfig {
        validated_growth: true,
        ..VultureConfig::default()
    });
    eprintln!(
        "largest rwnd: paper {}, validated {} (sender's cwnd {in_use})",
        paper.max_target, validated.max_target
    );
    assert!(paper.max_target > 10 * in_use, "paper: {}", paper.max_target);
    assert!(
        validated.max_target <= 2 * in_use + 2 * MSS,
        "validated: {} (the sender's cwnd is {in_use})",
        validated.max_target
    );
    assert!(
        validated.delivered_bytes * 100 >= paper.delivered_bytes * 99,
        "the sender is not slowed"
    );
}

/// A sender pacing at 5 Mbit/s into the 10 Mbit/s bottleneck: packet spacing is preserved, every
/// PIV is 0, so every epoch finds > 7/8 of its PIVs low and Vulture opens the window (double,
/// as rwnd < rwndThresh = u32::MAX without a halve).
#[test]
fn sim_spacing_preserved_vulture_opens_the_window() {
    let o = run_sim(5_000_000, true);
    assert_eq!(o.sender_clock, Some(TsClock::from_hz(1000)));
    let lbe = o.lbe_at_us.expect("turned LBE");
    assert!((250_000..600_000).contains(&lbe), "LBE at {lbe} µs");
    assert!(o.decisions.len() > 50, "{} decisions", o.decisions.len());
    for d in &o.decisions {
        assert_eq!(d.epoch.piv_sum_micros, 0, "{d:?}");
        assert!(
            d.policy == WindowPolicy::Double || d.policy == WindowPolicy::Increase,
            "{d:?}"
        );
    }
    assert!(o.max_target > 4 * o.first_target.unwrap());
    assert_eq!(o.max_queue_after_us(0), 0);
}

/// An ACK-clocked sender (1 Gbit/s access, cwnd up to 4 MiB) against the 10 Mbit/s bottleneck.
/// Whenever Vulture's doubling makes the sender send two segments per ACK, the bottleneck queue
/// builds (arrival spacing 1.2 ms > send spacing): the epoch's PIVs are positive and Vulture
/// halves (or fixes, when just under 7/8 of them are high). With spacing preserved (queue flat)
/// it doubles again. The uncontrolled flow fills the queue with seconds of delay.
#[test]
fn sim_queue_building_makes_vulture_halve() {
    let o = run_sim(1_000_000_000, true);
    let uncontrolled = run_sim(1_000_000_000, false);
    let mut halves_on_growth = 0;
    let mut doubles_on_flat = 0;
    for d in &o.decisions {
        let growth = d.queue_last_us as i64 - d.queue_first_us as i64;
        if d.queue_monotone && growth >= 20_000 {
            assert!(d.epoch.piv_sum_micros > 0, "{d:?}");
            assert!(
                d.policy == WindowPolicy::Halve || d.policy == WindowPolicy::Fix,
                "queue grew but {d:?}"
            );
            halves_on_growth += usize::from(d.policy == WindowPolicy::Halve);
        }
        if growth == 0 && d.epoch.piv_sum_micros == 0 && d.epoch.piv_count > 0 {
            assert!(
                d.policy == WindowPolicy::Double || d.policy == WindowPolicy::Increase,
                "flat queue but {d:?}"
            );
            doubles_on_flat += 1;
        }
    }
    assert!(
        halves_on_growth >= 3,
        "{halves_on_growth} halves on a growing queue"
    );
    assert!(doubles_on_flat >= 3, "{doubles_on_flat} doubles on a flat queue");
    // Vulture keeps the queue far below what the uncontrolled flow builds.
    let controlled_q = o.max_queue_after_us(5_000_000);
    let uncontrolled_q = uncontrolled.max_queue_after_us(5_000_000);
    assert!(controlled_q < 400_000, "controlled queue {controlled_q} µs");
    assert!(
        uncontrolled_q > 1_000_000,
        "uncontrolled queue {uncontrolled_q} µs"
    );
    // ... while still moving data: at least 30 % of 20 s at 10 Mbit/s.
    assert!(o.delivered_bytes > 7_500_000, "{} bytes", o.delivered_bytes);
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Data {
            dt_us: u64,
            len: u32,
            ts: Option<(u32, u32)>,
            out_of_order: bool,
        },
        Ack {
            dt_us: u64,
            acked: u32,
            tsval: Option<u32>,
            reports_loss: bool,
        },
        Context {
            mss: u32,
            rtt_us: Option<u64>,
            hz: Option<u32>,
        },
        /// The engine's timer.
        Tick { dt_us: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        let ts = prop_oneof![
            Just(None),
            (any::<u32>(), any::<u32>()).prop_map(Some),
            (0u32..64, 0u32..64)
                .prop_map(|(a, b)| Some(((u32::MAX - 32).wrapping_add(a), (u32::MAX - 32).wrapping_add(b)))),
        ];
        let dt = prop_oneof![
            0u64..2_000,
            0u64..200_000,
            Just(u64::from(u32::MAX)),
            Just(40 * 60 * 1_000_000)
        ];
        prop_oneof![
            4 => (dt.clone(), 0u32..70_000, ts, any::<bool>()).prop_map(|(dt_us, len, ts, out_of_order)| Op::Data {
                dt_us,
                len,
                ts,
                out_of_order
            }),
            1 => dt.clone().prop_map(|dt_us| Op::Tick { dt_us }),
            4 => (dt, prop_oneof![0u32..10_000, any::<u32>()], proptest::option::of(any::<u32>()), any::<bool>())
                .prop_map(|(dt_us, acked, tsval, reports_loss)| Op::Ack { dt_us, acked, tsval, reports_loss }),
            1 => (
                prop_oneof![Just(0u32), 1u32..9000, Just(u32::MAX)],
                proptest::option::of(prop_oneof![Just(0u64), 1u64..1_000_000]),
                proptest::option::of(prop_oneof![Just(0u32), Just(1000u32), any::<u32>()]),
            )
                .prop_map(|(mss, rtt_us, hz)| Op::Context { mss, rtt_us, hz }),
        ]
    }

    fn config() -> impl Strategy<Value = VultureConfig> {
        let d = |max: u64| (0u64..max).prop_map(Duration::from_micros);
        (
            d(50_000),
            d(10_000),
            d(30_000),
            d(30_000),
            d(50_000),
            d(50_000),
            0.0f64..=1.0,
            proptest::option::of(d(100_000)),
            any::<(bool, bool, bool)>(),
        )
            .prop_map(
                |(psi, res, cl, ch, al, ah, alpha, guard, (draining, bounded, validated))| VultureConfig {
                    psi,
                    piv_resolution: res,
                    conservative_low: cl,
                    conservative_high: ch,
                    aggressive_low: al,
                    aggressive_high: ah,
                    alpha,
                    queue_delay_limit: guard,
                    draining_is_congestion: draining,
                    bounded_steps: bounded,
                    validated_growth: validated,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn never_panics_and_never_below_two_mss(
            default_config in any::<bool>(),
            cfg in config(),
            ops in proptest::collection::vec(op(), 1..400),
        ) {
            let mut v = Vulture::new(if default_config { VultureConfig::default() } else { cfg });
            let mut ctx = ctx();
            let mut now = Instant::from_micros(1_000_000);
            for op in ops {
                match op {
                    Op::Data { dt_us, len, ts, out_of_order } => {
                        now = now + Duration::from_micros(dt_us);
                        let timestamps = ts.map(|(tsval, tsecr)| Timestamps { tsval, tsecr });
                        v.on_data(now, &ctx, &DataSample { payload_len: len, timestamps, out_of_order });
                    }
                    Op::Ack { dt_us, acked, tsval, reports_loss } => {
                        now = now + Duration::from_micros(dt_us);
                        let w = v.on_ack(now, &ctx, &AckSample { acked_bytes: acked, tsval, reports_loss });
                        if let Some(w) = w {
                            prop_assert!(u64::from(w) >= 2 * u64::from(ctx.mss).min(u64::from(MAX_RWND) / 2));
                            prop_assert!(w <= MAX_RWND);
                            prop_assert_eq!(v.stats().target_window, Some(w));
                        }
                    }
                    Op::Tick { dt_us } => {
                        now = now + Duration::from_micros(dt_us);
                        v.on_tick(now, &ctx);
                    }
                    Op::Context { mss, rtt_us, hz } => {
                        ctx = FlowContext {
                            rtt: rtt_us.map(Duration::from_micros),
                            sender_clock: hz.map(TsClock::from_hz),
                            // Some runs see a standing queue of half the RTT.
                            queue_delay: rtt_us.filter(|r| r % 2 == 0).map(|r| Duration::from_micros(r / 2)),
                            base_rtt: rtt_us.map(|r| Duration::from_micros(r / 2)),
                            ..FlowContext::new(mss)
                        };
                    }
                }
                let s = v.stats();
                prop_assert!(matches!(
                    s.mode,
                    ControllerMode::Warmup | ControllerMode::Conservative | ControllerMode::Aggressive
                ));
                prop_assert!(matches!(
                    s.policy,
                    WindowPolicy::Double | WindowPolicy::Increase | WindowPolicy::Halve | WindowPolicy::Fix
                ));
                prop_assert_eq!(s.target_window.is_none(), s.mode == ControllerMode::Warmup);
            }
        }
    }
}
