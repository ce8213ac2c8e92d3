//! Slipstream's own firewall rules: pure generation plus one layer that applies and removes them.
//!
//! # Why the rules look the way they do
//!
//! The daemon only sees packets the kernel queues to it, so the firewall decides *which* packets
//! (background flows only) and *where* (two NFQUEUE queues):
//!
//! * **Classification in the kernel, once per flow, on its opening packets.** Only packets with
//!   SYN set (the SYN and the SYN-ACK) of unclassed flows walk `SLIPSTREAM_CLASSIFY`, which holds
//!   one block per config rule; the first block that matches stores the rule number (1-based,
//!   shifted into `datapath.mark_mask`) in the connection mark, where it stays for the whole flow.
//!   Every block ends with "return if classed", so a later rule never overwrites an earlier one
//!   (first match wins, as in the config). Flows that match nothing stay at 0 and never leave the
//!   kernel; their other packets skip the classify chain (the docs of `plan.rs` explain MAC
//!   criteria, and why classing on SYNs only loses nothing).
//! * **UDP rules** (`protocol = "udp"` / `"both"`): UDP has no SYN, so a UDP flow is classed on
//!   the first packet of its conntrack entry (`--ctstate NEW`), from either end, into the same
//!   connmark, and every packet of a classed UDP flow is queued as TCP's are (with the eBPF
//!   datapath too, whose tc programs handle TCP only). UDP enters the chains only when a rule
//!   covers it, and then an unclassed flow's later packets leave at the chain's first rule.
//!   `quic = "refuse"` rejects a rule's UDP/443 flows: in table `filter` for iptables, where
//!   `REJECT` lives (`refuse.rs`).
//! * **Flow offloading** (OpenWrt's fw4/fw3 flowtables) hides established flows from all of this;
//!   [`detect_flow_offload`] finds it and says how to turn it off.
//! * **The rule number travels with each packet.** `CONNMARK --restore-mark` copies the connmark
//!   bits into the packet mark, which NFQUEUE hands to the daemon (see [`rule_number_from_mark`]),
//!   so the daemon needs no conntrack lookups.
//! * **Two queues.** Handshakes and ACKs (short packets) go to `ack_queue` with a full copy, since
//!   the daemon rewrites their window; longer data packets go to `data_queue`, copied as
//!   `datapath.data_copy_bytes` says (whole by default). `--queue-bypass` lets traffic flow if the daemon is not running.
//! * **The daemon owns its chains** (netavark / mullvad style): `SLIPSTREAM` and
//!   `SLIPSTREAM_CLASSIFY` in table `mangle` (and `SLIPSTREAM_REFUSE` in `filter` when a rule
//!   refuses QUIC), or `table inet slipstream` for nftables, plus one jump per protocol from
//!   each hooked built-in chain. Nothing else is touched, so [`reset`] can delete
//!   everything by name.
//!
//! # Lifecycle
//!
//! [`Firewall::install`] takes over what a previous run left (a crash, `kill -9`, a restart)
//! without a moment without rules: per IP family one `iptables-legacy-restore --noflush` empties
//! and refills our chains and adds or deletes only the hook jumps that differ (the ones both have
//! stay, counters and all), or one `nft -f -` transaction replaces the table; the other
//! backend's leftovers are [`reset`]. Then it verifies the chains are in place; if any step
//! fails it undoes what it did. Installing twice is idempotent. While no daemon listens, the
//! rules pass packets on (`--queue-bypass`), so a killed daemon breaks no connection, and the
//! next one picks the rules up as they are: a SYN that arrives while it starts is still classed. [`Firewall::remove`] (and `Drop`, best-effort) lists the table
//! and deletes what is there, collecting every error instead of stopping at the first, and is fine
//! with chains that are already gone.
//!
//! Commands run through a [`CommandRunner`], which may carry a prefix like
//! `ip netns exec <ns>` so tests work in a throwaway network namespace.

mod error;
mod firewall;
mod nft;
mod offload;
mod plan;
mod refuse;
mod reset;
mod runner;
mod sets;

pub use error::FirewallError;
pub use firewall::Firewall;
pub use nft::{delete_transaction as nft_delete_transaction, QUEUE_PROBE as NFT_QUEUE_PROBE};
pub use offload::{
    blocking_findings, detect_flow_offload, detect_flow_offload_at, offload_findings, OffloadFinding,
    OffloadSource, FIREWALL_UCI_PATH, OFFLOAD_FIX,
};
pub use plan::{
    multiport_chunks, plan, plan_keeping, plan_with_hosts, IpFamily, IptablesPlan, PlannedCommand, RulePlan,
    CLASSIFY_CHAIN, HOOK_CHAINS, MAIN_CHAIN, MULTIPORT_MAX_SLOTS, NFT_TABLE,
};
pub use refuse::REFUSE_CHAIN;
pub use reset::{reset, reset_with};
pub use runner::CommandRunner;
pub use sets::{
    ipset_create_input, ipset_hosts_input, kernel_sets, nft_hosts_transaction, nft_kept_entries,
    set_entry_counts, HostAddrs, KeptEntries, KernelSet,
};

use slipstream_config::FirewallBackend;
use std::fmt;

/// The tool the rules are installed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `iptables-legacy` and `ip6tables-legacy`, table `mangle`.
    IptablesLegacy,
    /// `nft`, `table inet slipstream`; needs the kernel's nft `queue` expression.
    Nftables,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::IptablesLegacy => "iptables-legacy",
            Backend::Nftables => "nftables",
        })
    }
}

/// The rule number stored in a packet or connection mark: 1-based, `None` if the field is 0.
pub fn rule_number_from_mark(mark: u32, mask: u32) -> Option<u16> {
    if mask == 0 {
        return None;
    }
    let n = (mark & mask) >> mask.trailing_zeros();
    u16::try_from(n).ok().filter(|&n| n != 0)
}

/// Picks the backend: `Iptables` / `Nftables` as requested (checking they are usable), `Auto`:
/// nftables if `nft -c` accepts a `queue num 0 bypass` statement, else iptables-legacy.
pub fn detect_backend(requested: FirewallBackend) -> Result<Backend, FirewallError> {
    detect_backend_with(&CommandRunner::host(), requested)
}

/// [`detect_backend`] with an explicit runner.
pub fn detect_backend_with(
    runner: &CommandRunner,
    requested: FirewallBackend,
) -> Result<Backend, FirewallError> {
    let nft_probe = || {
        runner
            .run(&PlannedCommand::new("nft", &["-c", "-f", "-"]).with_stdin(nft::QUEUE_PROBE.to_owned()))
            .map(|_| Backend::Nftables)
    };
    let iptables_probe = || {
        runner
            .run(&PlannedCommand::new("iptables-legacy", &["-V"]))
            .map(|_| Backend::IptablesLegacy)
    };
    match requested {
        FirewallBackend::Iptables => iptables_probe(),
        FirewallBackend::Nftables => nft_probe().map_err(|e| match e {
            FirewallError::Failed { stderr, .. } => FirewallError::NftQueueUnsupported { stderr },
            other => other,
        }),
        FirewallBackend::Auto => nft_probe().or_else(|nft_err| {
            tracing::info!(reason = %nft_err, "nftables cannot queue packets here; using iptables-legacy");
            iptables_probe()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mark_to_rule_number() {
        assert_eq!(rule_number_from_mark(0, 0x00ff_0000), None);
        assert_eq!(rule_number_from_mark(0x0001_0000, 0x00ff_0000), Some(1));
        assert_eq!(rule_number_from_mark(0xab03_1234, 0x00ff_0000), Some(3));
        assert_eq!(rule_number_from_mark(0x00fa_0000, 0x00ff_0000), Some(250));
        assert_eq!(rule_number_from_mark(0x0000_0002, 0x0000_00ff), Some(2));
        assert_eq!(
            rule_number_from_mark(0xffff_0000, 0xffff_ffff),
            None,
            "does not fit u16"
        );
        assert_eq!(rule_number_from_mark(5, 0), None);
    }
}
