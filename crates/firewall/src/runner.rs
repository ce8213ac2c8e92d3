//! Running firewall commands, optionally under a prefix such as `ip netns exec <ns>` so tests can
//! work inside a throwaway network namespace. The only place that spawns processes.

use crate::plan::PlannedCommand;
use crate::FirewallError;
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs [`PlannedCommand`]s, each prefixed by `prefix` (empty: run directly on the host).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandRunner {
    prefix: Vec<String>,
}

impl CommandRunner {
    /// Runs commands directly (the daemon's case).
    pub fn host() -> Self {
        CommandRunner { prefix: Vec::new() }
    }

    /// Runs every command as `<prefix...> <program> <args...>`.
    pub fn with_prefix(prefix: Vec<String>) -> Self {
        CommandRunner { prefix }
    }

    /// Runs every command inside network namespace `name` (`ip netns exec <name> ...`).
    pub fn in_netns(name: &str) -> Self {
        Self::with_prefix(
            ["ip", "netns", "exec", name]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        )
    }

    /// What every command is prefixed with (e.g. `ip netns exec NS`); empty on the host.
    pub fn prefix(&self) -> &[String] {
        &self.prefix
    }

    /// Runs `cmd`; returns its standard output if it exits with status 0, else an error carrying
    /// the command line, stderr and a hint about what to check.
    ///
    /// A missing `iptables-legacy*` / `ip6tables-legacy*` program is retried under its plain name
    /// (`iptables`, `iptables-restore`, ...) if that one says it is the legacy variant: OpenWrt
    /// releases with fw3 (21.02 and older) and other systems without iptables-nft install the
    /// legacy tools only under the plain names.
    pub fn run(&self, cmd: &PlannedCommand) -> Result<String, FirewallError> {
        match self.run_exact(cmd) {
            Err(FirewallError::NotFound { .. }) if self.legacy_under_plain_name(&cmd.program) => {
                let plain = plain_legacy_name(&cmd.program).expect("checked");
                tracing::debug!(program = %cmd.program, plain, "using the plain name of the legacy tool");
                self.run_exact(&PlannedCommand {
                    program: plain.to_owned(),
                    ..cmd.clone()
                })
            }
            other => other,
        }
    }

    /// Whether `program` (an `*tables-legacy*` name) is missing but its plain name is a legacy
    /// iptables (its `-V` prints "(legacy)").
    fn legacy_under_plain_name(&self, program: &str) -> bool {
        plain_legacy_name(program).is_some_and(|plain| {
            self.run_exact(&PlannedCommand::new(plain, &["-V"]))
                .is_ok_and(|v| v.contains("(legacy)"))
        })
    }

    fn run_exact(&self, cmd: &PlannedCommand) -> Result<String, FirewallError> {
        let mut argv: Vec<&str> = self.prefix.iter().map(String::as_str).collect();
        argv.push(&cmd.program);
        argv.extend(cmd.args.iter().map(String::as_str));
        let command_line = cmd.to_string();
        tracing::debug!(command = %command_line, prefix = ?self.prefix, "firewall command");

        let mut child = Command::new(argv[0])
            .args(&argv[1..])
            .stdin(if cmd.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("LC_ALL", "C")
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    FirewallError::not_found(argv[0])
                } else {
                    FirewallError::Io {
                        command: command_line.clone(),
                        source: e,
                    }
                }
            })?;
        if let Some(input) = &cmd.stdin {
            // Take the pipe so it is closed (EOF) once written.
            let mut pipe = child.stdin.take().expect("stdin is piped");
            if let Err(e) = pipe.write_all(input.as_bytes()) {
                // The program may exit early (e.g. a syntax error) and close its end; its status
                // and stderr below are more telling than EPIPE.
                tracing::debug!(error = %e, "writing firewall command input");
            }
        }
        let out = child.wait_with_output().map_err(|e| FirewallError::Io {
            command: command_line.clone(),
            source: e,
        })?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        // `ip netns exec` (and `env`) report a missing program themselves.
        if !self.prefix.is_empty()
            && (stderr.contains("exec of") || stderr.starts_with("env:"))
            && stderr.contains("No such file or directory")
        {
            return Err(FirewallError::not_found(&cmd.program));
        }
        Err(FirewallError::failed(
            &command_line,
            out.status.to_string(),
            stderr,
        ))
    }
}

/// `iptables-legacy-restore` -> `iptables-restore`, `ip6tables-legacy` -> `ip6tables`; `None` for
/// any other program.
pub(crate) fn plain_legacy_name(program: &str) -> Option<&'static str> {
    Some(match program {
        "iptables-legacy" => "iptables",
        "iptables-legacy-save" => "iptables-save",
        "iptables-legacy-restore" => "iptables-restore",
        "ip6tables-legacy" => "ip6tables",
        "ip6tables-legacy-save" => "ip6tables-save",
        "ip6tables-legacy-restore" => "ip6tables-restore",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_of_the_legacy_tools() {
        assert_eq!(plain_legacy_name("iptables-legacy"), Some("iptables"));
        assert_eq!(
            plain_legacy_name("ip6tables-legacy-restore"),
            Some("ip6tables-restore")
        );
        assert_eq!(plain_legacy_name("iptables-legacy-save"), Some("iptables-save"));
        assert_eq!(plain_legacy_name("nft"), None);
        assert_eq!(plain_legacy_name("iptables"), None);
    }

    /// A system with the legacy tools only under the plain names (OpenWrt fw3): stand-ins for
    /// `iptables` in a directory of their own, reached through `env PATH=...` as the prefix.
    #[test]
    fn falls_back_to_the_plain_name_of_a_legacy_iptables() {
        let dir = std::env::temp_dir().join(format!("slipstream-fw3-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stand_in = |name: &str, version: &str| {
            let p = dir.join(name);
            std::fs::write(
                &p,
                format!("#!/bin/sh\n[ \"$1\" = -V ] && {{ echo '{version}'; exit 0; }}\necho \"ran $*\"\n"),
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        stand_in("iptables", "iptables v1.8.7 (legacy)");
        stand_in("ip6tables", "ip6tables v1.8.9 (nf_tables)");
        // `env` reports a missing program as exit 127 with "No such file or directory".
        let runner = CommandRunner::with_prefix(vec!["env".into(), format!("PATH={}", dir.display())]);
        let out = runner
            .run(&PlannedCommand::new("iptables-legacy", &["-t", "mangle", "-S"]))
            .expect("plain iptables used");
        assert_eq!(out.trim(), "ran -t mangle -S");
        // ip6tables here is the nftables variant: not a stand-in for ip6tables-legacy.
        let err = runner
            .run(&PlannedCommand::new("ip6tables-legacy", &["-S"]))
            .unwrap_err();
        assert!(matches!(err, FirewallError::NotFound { .. }), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
