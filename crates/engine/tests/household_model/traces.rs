//! Debugging aids (ignored): the engine's view of one flow, of 64, of a flow's start.

use super::*;

#[test]
#[ignore = "debugging aid: prints the engine's view every second"]
fn trace_one_flow() {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let net = Net::home(env("TRACE_MBIT", 10) as f64, env("TRACE_RTT_MS", 100));
    let (secs, every) = (env("TRACE_SECS", 5) as f64, env("TRACE_EVERY_MS", 500) * 1000);
    let mut sim = Sim::new(net, BudgetConfig::default(), &[(2, 1)], &[ShareSpec::default()]);
    sim.timestamps = env("TRACE_TIMESTAMPS", 0) == 1;
    // Best effort at 95% of the link from TRACE_CROSS_FROM_S to TRACE_CROSS_UNTIL_S (none by default).
    let (cross_from, cross_until) = (env("TRACE_CROSS_FROM_S", 0), env("TRACE_CROSS_UNTIL_S", 0));
    if cross_until > cross_from {
        sim.cross_rate = 0.95 * net.rate;
        sim.cross_until = cross_until * 1_000_000;
        sim.at(cross_from * 1_000_000, Event::Cross);
    }
    // The router counts best effort (TRACE_COUNTED=1, as the daemon's does), and a steady
    // best-effort sender of TRACE_CALL_PPS packets a second, TRACE_CALL_BYTES each (a call).
    sim.counted = env("TRACE_COUNTED", 0) == 1;
    if let Some(pps) = Some(env("TRACE_CALL_PPS", 0)).filter(|&p| p > 0) {
        sim.call_every = 1_000_000 / pps;
        sim.call_bytes = env("TRACE_CALL_BYTES", 1200) as u32;
        sim.at(0, Event::Call);
    }
    sim.open(0, 0);
    let mut last = 0;
    let mut before = 0;
    sim.run(secs, |s, t| {
        if t >= last + every {
            last = t;
            let snap = s.engine.snapshot(4);
            let l = &snap.links[0];
            let f = snap.flows.first();
            let delivered = s.delivered()[0];
            let fill = (delivered - before) as f64 / (every as f64 / 1e6) / s.net.rate;
            before = delivered;
            eprintln!(
                "fill={fill:.2} pace={:?} active={} {:?} t={:.1} budget={} q={:?} base={:?} phase={} flows={} held={} | flow alloc={:?} fwd={:?} unclamped={:?} link={:?} | counters rewritten={} busy_q={:.1}ms",
                l.targets.map(|t| t.pace), snap.active_flows, slipstream_engine::PassReason::ALL.iter().map(|r| (r.as_str(), snap.counters.passed(*r))).filter(|x| x.1 > 0).collect::<Vec<_>>(), t as f64 / 1e6, l.budget_bytes, l.queue_delay, l.base_rtt, l.phase, l.flows, l.held_flows,
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
