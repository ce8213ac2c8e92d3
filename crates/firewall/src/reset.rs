//! Removing everything Slipstream could have installed, with either backend and any earlier config.

use crate::{
    nft, Backend, CommandRunner, FirewallError, IpFamily, PlannedCommand, CLASSIFY_CHAIN, MAIN_CHAIN,
};
use slipstream_config::Config;

/// Removes everything Slipstream could have installed with `backend` (any hook, any earlier
/// config), and best-effort the other backend's leftovers too. Absent chains are fine. Returns every
/// error met; IPv6 errors are ignored if `config.datapath.ipv6` is false.
pub fn reset(backend: Backend, config: &Config) -> Vec<FirewallError> {
    reset_with(&CommandRunner::host(), backend, config)
}

/// [`reset`] with an explicit runner.
pub fn reset_with(runner: &CommandRunner, backend: Backend, config: &Config) -> Vec<FirewallError> {
    let errors = reset_backend(runner, backend, config.datapath.ipv6);
    let other = match backend {
        Backend::IptablesLegacy => Backend::Nftables,
        Backend::Nftables => Backend::IptablesLegacy,
    };
    for e in reset_backend(runner, other, config.datapath.ipv6) {
        tracing::debug!(error = %e, "clearing leftovers of the other firewall backend (ignored)");
    }
    // Our ipsets, once no rule references them (absent `ipset`: nothing to clear).
    for e in crate::sets::destroy_ipsets_except(runner, &[]) {
        tracing::debug!(error = %e, "clearing Slipstream's ipsets (ignored)");
    }
    errors
}

pub(crate) fn reset_backend(runner: &CommandRunner, backend: Backend, ipv6: bool) -> Vec<FirewallError> {
    match backend {
        Backend::IptablesLegacy => {
            let mut errors = reset_iptables_family(runner, IpFamily::V4);
            let v6 = reset_iptables_family(runner, IpFamily::V6);
            if ipv6 {
                errors.extend(v6);
            } else {
                for e in v6 {
                    tracing::debug!(error = %e, "IPv6 cleanup (ignored: ipv6 = false)");
                }
            }
            errors
        }
        Backend::Nftables => {
            let cmd = PlannedCommand::new("nft", &["-f", "-"]).with_stdin(nft::delete_transaction());
            runner.run(&cmd).err().into_iter().collect()
        }
    }
}

fn is_our_chain(name: &str) -> bool {
    name == MAIN_CHAIN || name == CLASSIFY_CHAIN
}

/// The jumps from other chains to ours as `iptables -S` lists them (`-A FORWARD ... -j
/// SLIPSTREAM`), or `None` if our chains are not installed in this family.
pub(crate) fn installed_hooks(
    runner: &CommandRunner,
    family: IpFamily,
) -> Result<Option<Vec<String>>, FirewallError> {
    let listing = runner.run(&PlannedCommand::new(
        family.program(),
        &["-w", "-t", "mangle", "-S"],
    ))?;
    let mut ours = false;
    let mut hooks = Vec::new();
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["-N", chain] if is_our_chain(chain) => ours = true,
            ["-A", chain, rest @ ..]
                if !is_our_chain(chain)
                    && rest
                        .windows(2)
                        .any(|w| (w[0] == "-j" || w[0] == "-g") && is_our_chain(w[1])) =>
            {
                hooks.push(words.join(" "));
            }
            _ => {}
        }
    }
    Ok(ours.then_some(hooks))
}

/// Lists table `mangle` and deletes every jump to our chains, then flushes and deletes the chains;
/// the same for table `filter`'s [`crate::REFUSE_CHAIN`].
pub(crate) fn reset_iptables_family(runner: &CommandRunner, family: IpFamily) -> Vec<FirewallError> {
    let p = family.program();
    let listing = match runner.run(&PlannedCommand::new(p, &["-w", "-t", "mangle", "-S"])) {
        Ok(l) => l,
        Err(e) => return vec![e],
    };
    let mut errors = Vec::new();
    let mut chains = Vec::new();
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["-N", chain] if is_our_chain(chain) => chains.push(chain.to_string()),
            ["-A", chain, rest @ ..] if !is_our_chain(chain) => {
                let jumps_to_us = rest
                    .windows(2)
                    .any(|w| (w[0] == "-j" || w[0] == "-g") && is_our_chain(w[1]));
                if jumps_to_us {
                    let mut args = vec!["-w", "-t", "mangle", "-D", chain];
                    args.extend(rest);
                    if let Err(e) = runner.run(&PlannedCommand::new(p, &args)) {
                        errors.push(e);
                    }
                }
            }
            _ => {}
        }
    }
    // Flush both before deleting either: SLIPSTREAM references SLIPSTREAM_CLASSIFY.
    for op in ["-F", "-X"] {
        for chain in &chains {
            if let Err(e) = runner.run(&PlannedCommand::new(p, &["-w", "-t", "mangle", op, chain])) {
                errors.push(e);
            }
        }
    }
    // Table filter: the reject rules of `quic = "refuse"`, if any.
    errors.extend(crate::refuse::reset(runner, family));
    errors
}
