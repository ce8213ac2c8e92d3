//! What can go wrong applying rules, with the failing command's stderr and a hint of what to check.

use crate::Backend;

/// A firewall command failed, or the result is not what was planned. The message says which
/// command, its stderr, and what to check.
#[derive(Debug, thiserror::Error)]
pub enum FirewallError {
    /// A program is missing.
    #[error("{program} not found: {hint}")]
    NotFound {
        /// The program.
        program: String,
        /// Which package has it.
        hint: String,
    },
    /// A command exited with an error.
    #[error("`{command}` failed ({status}): {stderr}; check: {hint}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr (with the failing input line, when it names one).
        stderr: String,
        /// What to check (a kernel module, root, ...).
        hint: String,
    },
    /// A command could not be run at all.
    #[error("could not run `{command}`: {source}")]
    Io {
        /// The command line.
        command: String,
        /// Why it could not be started.
        #[source]
        source: std::io::Error,
    },
    /// The commands succeeded but the rules are not what was planned.
    #[error("{backend} rules not in place after install: {what}; check whether another program rewrote the mangle table meanwhile")]
    Verify {
        /// The backend the rules were installed with.
        backend: Backend,
        /// What is missing or different.
        what: String,
    },
    /// `firewall = "nftables"` was requested but nft cannot queue packets here.
    #[error(
        "nftables cannot queue packets on this system (`nft -c` rejected `queue num 0 bypass`: {stderr}); \
         check: modprobe nft_queue (OpenWrt: kmod-nft-queue), or set datapath.firewall = \"iptables\""
    )]
    NftQueueUnsupported {
        /// What `nft -c` said.
        stderr: String,
    },
    /// Several errors (teardown collects them all).
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Several(Vec<FirewallError>),
}

impl FirewallError {
    pub(crate) fn not_found(program: &str) -> Self {
        let hint = if program.contains("iptables") {
            "install iptables with the legacy tools (Debian/Ubuntu: iptables, which ships iptables-legacy; \
             OpenWrt 22.03+: iptables-zz-legacy and ip6tables-zz-legacy; OpenWrt 21.02: iptables, \
             ip6tables)"
        } else if program == "nft" {
            "install nftables, or set datapath.firewall = \"iptables\""
        } else if program == "ip" {
            "install iproute2 (ip)"
        } else {
            "install it or check PATH"
        };
        FirewallError::NotFound {
            program: program.to_owned(),
            hint: hint.to_owned(),
        }
    }

    pub(crate) fn failed(command: &str, status: String, stderr: String) -> Self {
        let hint = hint_for(&stderr);
        FirewallError::Failed {
            command: command.to_owned(),
            status,
            stderr,
            hint,
        }
    }

    /// Adds the offending input line to an `iptables-restore` / `nft -f` error ("line N").
    pub(crate) fn with_input_line(self, input: &str) -> Self {
        match self {
            FirewallError::Failed {
                command,
                status,
                mut stderr,
                hint: _,
            } => {
                if let Some(n) = failing_line(&stderr) {
                    if let Some(line) = input.lines().nth(n.saturating_sub(1)) {
                        stderr = format!("{stderr} [input line {n}: {line}]");
                    }
                }
                let hint = hint_for(&stderr);
                FirewallError::Failed {
                    command,
                    status,
                    stderr,
                    hint,
                }
            }
            other => other,
        }
    }

    pub(crate) fn combine(mut errors: Vec<FirewallError>) -> Option<FirewallError> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(FirewallError::Several(errors)),
        }
    }
}

/// "Error occurred at line: 3" / "line 3 failed" / nft's "/dev/stdin:3:..." -> 3.
fn failing_line(stderr: &str) -> Option<usize> {
    let number_after = |marker: &str| {
        stderr.find(marker).and_then(|i| {
            let digits: String = stderr[i + marker.len()..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
    };
    number_after("Error occurred at line:")
        .or_else(|| number_after("line "))
        .or_else(|| number_after("stdin:"))
}

/// What to check, from a command's stderr.
fn hint_for(stderr: &str) -> String {
    let s = stderr.to_ascii_lowercase();
    if s.contains("permission denied") || s.contains("operation not permitted") || s.contains("must be root")
    {
        return "run as root (or with CAP_NET_ADMIN)".to_owned();
    }
    if s.contains("xtables lock") {
        return "another program holds the xtables lock; retry".to_owned();
    }
    if s.contains("table does not exist") || s.contains("can't initialize") {
        return "the mangle table (or filter, for quic = \"refuse\") is missing: modprobe iptable_mangle / \
                ip6table_mangle (iptable_filter / ip6table_filter) (OpenWrt: kmod-ipt-core, kmod-ip6tables), \
                or set datapath.ipv6 = false if IPv6 is the problem"
            .to_owned();
    }
    let mut modules = Vec::new();
    for (word, module) in [
        (
            "nfqueue",
            "NFQUEUE target missing: modprobe xt_NFQUEUE (OpenWrt: kmod-ipt-nfqueue)",
        ),
        (
            "connmark",
            "connmark missing: modprobe xt_connmark (OpenWrt: kmod-ipt-conntrack-extra)",
        ),
        ("multiport", "multiport missing: modprobe xt_multiport"),
        (
            "dscp",
            "dscp match missing: modprobe xt_dscp (OpenWrt: kmod-ipt-ipopt)",
        ),
        (
            "length",
            "length match missing: modprobe xt_length (OpenWrt: kmod-ipt-ipopt)",
        ),
        ("addrtype", "addrtype match missing: modprobe xt_addrtype"),
        (
            "conntrack",
            "conntrack match missing (UDP rules): modprobe xt_conntrack (OpenWrt: kmod-ipt-conntrack)",
        ),
        (
            "reject",
            "REJECT target missing (quic = \"refuse\"): modprobe ipt_REJECT / ip6t_REJECT (OpenWrt: kmod-ipt-core, kmod-ip6tables)",
        ),
        (
            "queue",
            "nft queue missing: modprobe nft_queue (OpenWrt: kmod-nft-queue)",
        ),
    ] {
        if s.contains(word) {
            modules.push(module);
        }
    }
    if !modules.is_empty() {
        return modules.join("; ");
    }
    "that the kernel has the modules Slipstream uses: xt_NFQUEUE, xt_connmark, xt_length, xt_multiport, \
     xt_dscp, xt_addrtype (OpenWrt: kmod-ipt-nfqueue, kmod-ipt-conntrack-extra, kmod-ipt-ipopt)"
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_line_parsing() {
        assert_eq!(
            failing_line("iptables-restore v1.8.9 (legacy): x\nError occurred at line: 3\nTry"),
            Some(3)
        );
        assert_eq!(failing_line("iptables-restore: line 12 failed"), Some(12));
        assert_eq!(
            failing_line("/dev/stdin:7:2-6: Error: Could not process rule"),
            Some(7)
        );
        assert_eq!(failing_line("nothing"), None);
    }

    #[test]
    fn hints() {
        assert!(hint_for("Couldn't load target `NFQUEUE'").contains("xt_NFQUEUE"));
        assert!(hint_for("Permission denied (you must be root)").contains("root"));
        assert!(hint_for("Couldn't load match `conntrack':No such file").contains("xt_conntrack"));
        assert!(hint_for("Couldn't load target `REJECT'").contains("ipt_REJECT"));
        assert!(
            hint_for("can't initialize ip6tables table `mangle': Table does not exist")
                .contains("ip6table_mangle")
        );
        let e = FirewallError::not_found("iptables-legacy");
        assert!(
            e.to_string()
                .starts_with("iptables-legacy not found: install iptables"),
            "{e}"
        );
        let e = FirewallError::failed(
            "iptables-legacy-restore -w --noflush",
            "exit status: 2".into(),
            "x".into(),
        )
        .with_input_line("a\nb\nc\n");
        assert!(
            e.to_string()
                .contains("`iptables-legacy-restore -w --noflush` failed (exit status: 2)"),
            "{e}"
        );
    }
}
