//! The CLI's text views: pure functions of a response.

use std::fmt::Write as _;
use std::net::IpAddr;

use crate::{FlowInfo, FlowList, LinkStatus, Status};

/// `1.5 kB`, `64.0 kB`, `1.20 MB` (decimal units).
pub fn fmt_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1000.0 {
        format!("{bytes} B")
    } else if b < 1e6 {
        format!("{:.1} kB", b / 1e3)
    } else if b < 1e9 {
        format!("{:.2} MB", b / 1e6)
    } else {
        format!("{:.2} GB", b / 1e9)
    }
}

/// Bits per second as `kbit/s` below 1 Mbit/s, else `Mbit/s`.
pub fn fmt_rate(bps: f64) -> String {
    if bps < 1e6 {
        format!("{:.0} kbit/s", bps / 1e3)
    } else {
        format!("{:.2} Mbit/s", bps / 1e6)
    }
}

/// Milliseconds with one decimal below 10 ms, none above.
pub fn fmt_ms(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// `1d 2h`, `3h 4m`, `5m 6s`, `7s`.
pub fn fmt_duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

fn opt_bytes(v: Option<u32>) -> String {
    v.map_or_else(|| "-".to_owned(), |b| fmt_bytes(u64::from(b)))
}

fn is_local(addr: &str) -> bool {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => {
            let o = a.octets();
            a.is_private() || a.is_loopback() || a.is_link_local() || (o[0] == 100 && (o[1] & 0xc0) == 64)
        }
        Ok(IpAddr::V6(a)) => {
            let s = a.segments()[0];
            a.is_loopback() || (s & 0xfe00) == 0xfc00 || (s & 0xffc0) == 0xfe80
        }
        Err(_) => false,
    }
}

/// Which endpoint is the LAN host, which the remote one, and the direction of the bulk data
/// (`down`: towards the LAN host, `up`: from it, `?`: not known yet). The LAN host is the
/// endpoint with a private / unique-local address when exactly one has one, else the receiver
/// (the side whose ACKs are clamped, which is the LAN host of a download).
pub fn lan_and_remote(flow: &FlowInfo) -> (String, String, &'static str) {
    let [a, b] = &flow.endpoints;
    let (lan, remote) = match (is_local(a), is_local(b)) {
        (true, false) => (a.clone(), b.clone()),
        (false, true) => (b.clone(), a.clone()),
        _ => match (&flow.receiver, &flow.sender) {
            (Some(r), Some(s)) => (r.clone(), s.clone()),
            _ => (a.clone(), b.clone()),
        },
    };
    let dir = match (&flow.receiver, &flow.sender) {
        (Some(r), _) if *r == lan => "down",
        (_, Some(s)) if *s == lan => "up",
        _ => "?",
    };
    (lan, remote, dir)
}

/// Left-aligned text columns, right-aligned numeric ones, two spaces between.
fn table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let pad = widths[i].saturating_sub(cell.chars().count());
            if right[i] {
                l.push_str(&" ".repeat(pad));
                l.push_str(cell);
            } else {
                l.push_str(cell);
                l.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for row in rows {
        line(row.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// The `slipstream flows` table: one line per flow, busiest first, then a total line.
pub fn render_flows(list: &FlowList) -> String {
    const HEADER: [&str; 17] = [
        "LAN HOST",
        "REMOTE",
        "DIR",
        "CLASS",
        "CONTROLLER",
        "MODE/POLICY",
        "LINK",
        "ALLOC",
        "HELD",
        "RWND",
        "HOST WND",
        "CWND EST",
        "PIV SUM/POS/N",
        "GOODPUT",
        "RTT",
        "ACKED",
        "UNCLAMPED",
    ];
    const RIGHT: [bool; 17] = [
        false, false, false, false, false, false, false, true, false, true, true, true, true, true, true,
        true, false,
    ];
    let rows: Vec<Vec<String>> = list
        .flows
        .iter()
        .map(|f| {
            let (lan, remote, dir) = lan_and_remote(f);
            let class = if f.rule_removed {
                format!("{} (removed)", f.rule)
            } else if !f.matched_by.is_empty() {
                format!("{} [{}]", f.rule, f.matched_by)
            } else {
                f.rule.clone()
            };
            // A UDP flow has no window: its mode is its policer's rate, and where a TCP flow
            // shows its PIV, what the policer dropped and marked.
            let mode = match (&f.policer, f.mode.is_empty()) {
                (Some(p), _) => format!(
                    "{} police {}",
                    f.protocol,
                    p.rate_bps.map_or_else(|| "-".to_owned(), fmt_rate)
                ),
                (None, true) => "-".to_owned(),
                (None, false) => format!("{}/{}", f.mode, f.policy),
            };
            let piv = match &f.policer {
                Some(p) => format!(
                    "{} drop/{} ce/{} wait",
                    p.dropped_packets, p.marked_packets, p.delayed_packets
                ),
                None => f.piv.map_or_else(
                    || "-".to_owned(),
                    |p| format!("{:+.1} ms/{:.0}%/{}", p.sum_ms, p.positive_ratio * 100.0, p.count),
                ),
            };
            vec![
                lan,
                remote,
                dir.to_owned(),
                class,
                f.controller.clone(),
                mode,
                f.link.clone().unwrap_or_else(|| "-".to_owned()),
                opt_bytes(f.allocation_bytes),
                if f.held { "HELD" } else { "-" }.to_owned(),
                opt_bytes(f.rwnd_bytes),
                opt_bytes(f.host_window_bytes),
                opt_bytes(f.cwnd_estimate_bytes),
                piv,
                fmt_rate(f.goodput_bps),
                f.rtt_ms.map_or_else(|| "-".to_owned(), fmt_ms),
                fmt_bytes(f.acked_bytes),
                f.unclamped.clone().unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    let mut out = if rows.is_empty() {
        String::from("no flows\n")
    } else {
        table(&HEADER, &RIGHT, &rows)
    };
    let total = list.flows.iter().fold(0.0, |sum, f| sum + f.goodput_bps);
    let _ = write!(
        out,
        "{} flows (table {}/{}), goodput {}",
        list.flows.len(),
        list.active,
        list.max,
        fmt_rate(total)
    );
    // Held flows move nothing until their turn: worth a count where the eye lands.
    let held = list.flows.iter().filter(|f| f.held).count();
    if held > 0 {
        let _ = write!(out, ", {held} held");
    }
    out.push('\n');
    out
}

/// The `slipstream status` text. `now_unix` turns timestamps into ages.
pub fn render_status(s: &Status, now_unix: u64) -> String {
    let ago = |t: u64| format!("{} ago", fmt_duration(now_unix.saturating_sub(t)));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "slipstreamd {} (pid {}), up {}",
        s.version,
        s.pid,
        fmt_duration(s.uptime_secs)
    );
    let _ = writeln!(
        out,
        "config      {} (loaded {}; reloads: {} ok, {} failed)",
        s.config_path,
        ago(s.config_loaded_unix),
        s.reloads_ok,
        s.reloads_failed
    );
    if let Some(e) = &s.last_reload_error {
        let _ = writeln!(out, "last reload FAILED, previous config still in force: {e}");
    }
    for r in &s.restart_needed {
        let _ = writeln!(out, "restart needed: {r}");
    }
    let fw = &s.firewall;
    let checked = fw
        .last_check_unix
        .map_or_else(|| "not checked yet".to_owned(), |t| format!("checked {}", ago(t)));
    let _ = writeln!(
        out,
        "firewall    {}, rules {} ({checked}), re-applied {} times",
        fw.backend,
        if fw.installed { "installed" } else { "MISSING" },
        fw.reapplied
    );
    if let Some(e) = &fw.last_error {
        let _ = writeln!(out, "firewall error: {e}");
    }
    let _ = writeln!(out, "queues      ack {}, data {}", s.ack_queue, s.data_queue);
    let _ = writeln!(
        out,
        "packets     {} handled, {} rewritten, {} passed; {} datapath errors",
        s.packets, s.packets_rewritten, s.packets_passed, s.datapath_errors
    );
    let _ = writeln!(
        out,
        "flows       {} active of {} max",
        s.flows_active, s.flows_max
    );
    for n in &s.name_sets {
        let entries = n
            .entries
            .map_or_else(|| "cannot be listed".to_owned(), |e| format!("{e} addresses"));
        let _ = writeln!(out, "names       rule {}: set {} holds {entries}", n.rule, n.set);
    }
    if let Some(p) = &s.probe {
        let _ = write!(
            out,
            "probes      {}: {} sent, {} answered, {} lost",
            p.target, p.sent, p.answered, p.lost
        );
        let _ = match p.last_rtt_ms {
            Some(rtt) => writeln!(out, ", last RTT {}", fmt_ms(rtt)),
            None => writeln!(out),
        };
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = s
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                if r.removed {
                    "-".to_owned()
                } else {
                    (i + 1).to_string()
                },
                if r.removed {
                    format!("{} (removed)", r.name)
                } else {
                    r.name.clone()
                },
                r.controller.clone(),
                r.active_flows.to_string(),
                r.flows_started.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["#", "RULE", "CONTROLLER", "ACTIVE FLOWS", "STARTED"],
        &[true, false, false, true, true],
        &rows,
    ));
    if !s.household.is_empty() {
        out.push('\n');
        out.push_str(&render_household(&s.household));
    }
    out
}

/// The household block of `slipstream status`: one line per access link.
fn render_household(links: &[LinkStatus]) -> String {
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), fmt_ms);
    let rows: Vec<Vec<String>> = links
        .iter()
        .map(|l| {
            vec![
                l.link.clone(),
                format!("{}/{}", l.controller, l.phase),
                fmt_bytes(l.budget_bytes),
                fmt_bytes(l.in_flight_bytes),
                ms(l.queue_delay_ms),
                queue_target(l),
                ms(l.base_rtt_ms),
                l.flows.to_string(),
                l.held_flows.to_string(),
                fmt_rate(l.goodput_bps),
                l.slowdowns.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "HOUSEHOLD",
            "CONTROLLER/PHASE",
            "BUDGET",
            "IN FLIGHT",
            "QUEUE DELAY",
            "TARGET",
            "BASE RTT",
            "FLOWS",
            "HELD",
            "GOODPUT",
            "SLOWDOWNS",
        ],
        &[
            false, false, true, true, true, false, true, true, true, true, true,
        ],
        &rows,
    )
}

/// The queue a link's background keeps and why: `10.0 ms alone`, `3.0 ms browsing`,
/// `3.0/1.0 ms steady` (yields above 3 ms, steps towards 1 ms beside a call or a game).
fn queue_target(l: &LinkStatus) -> String {
    let Some(target) = l.queue_target_ms else {
        return "-".to_owned();
    };
    let pace = l.best_effort_pace.as_deref().unwrap_or("?");
    match l.queue_aim_ms.filter(|&aim| aim < target) {
        Some(aim) => format!("{target:.1}/{aim:.1} ms {pace}"),
        None => format!("{target:.1} ms {pace}"),
    }
}
