//! Across coordinated slowdowns, at stop, and on paths that get longer or are long.

use super::*;

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
