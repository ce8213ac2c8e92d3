//! Helpers shared by the lab's root tests.

/// The root namespace's mangle rules (iptables-legacy-save without comments and counters), to
/// compare before and after a run: the lab must never touch the host's own firewall.
pub fn root_mangle_rules() -> String {
    std::process::Command::new("iptables-legacy-save")
        .args(["-t", "mangle"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.starts_with('#') && !l.starts_with(':'))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}
