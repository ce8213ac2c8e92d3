//! The datapath scenario's summary table: one row per metric, one column per mode.

use crate::result::{RowSpec, RunResult, Table, Unit};

pub(super) fn table(columns: Vec<String>, runs: &[RunResult]) -> Table {
    let rows: [(&str, Unit, &str, &str); 13] = [
        ("Packets/s through the router (MSS 536, unlimited)", Unit::PacketsPerS, "pps", "throughput"),
        ("Packets/s relative to kernel forwarding (same round)", Unit::Ratio, "pps_ratio", "throughput"),
        ("Load goodput (MSS 536, unlimited)", Unit::Mbps, "goodput", "throughput"),
        ("User-space process CPU per million packets", Unit::S, "process_cpu_per_mpkt", "throughput"),
        (
            "Process CPU relative to slipstreamd with NFQUEUE (same round)",
            Unit::Ratio,
            "process_cpu_vs_nfqueue",
            "throughput",
        ),
        ("Machine busy CPU per million packets (2 cores)", Unit::S, "machine_busy_per_mpkt", "throughput"),
        ("Machine system CPU per million packets", Unit::S, "machine_system_per_mpkt", "throughput"),
        ("Machine softirq CPU per million packets", Unit::S, "machine_softirq_per_mpkt", "throughput"),
        ("Machine user CPU per million packets", Unit::S, "machine_user_per_mpkt", "throughput"),
        ("TCP probe RTT median under fixed load", Unit::Us, "probe_rtt_p50", "latency"),
        ("TCP probe RTT p99 under fixed load", Unit::Us, "probe_rtt_p99", "latency"),
        ("Probe RTT median added vs kernel (2 queued packets)", Unit::Us, "probe_rtt_added_p50", "latency"),
        ("Load goodput during the probe", Unit::Mbps, "loaded_goodput", "latency"),
    ];
    Table::of(
        columns,
        runs,
        rows.map(|(label, unit, name, period)| RowSpec::new(label, unit, name).period(period)),
    )
}
