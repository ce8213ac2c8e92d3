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

    pub fn prefix(&self) -> &[String] {
        &self.prefix
    }

    /// Runs `cmd`; returns its standard output if it exits with status 0, else an error carrying
    /// the command line, stderr and a hint about what to check.
    pub fn run(&self, cmd: &PlannedCommand) -> Result<String, FirewallError> {
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
        // `ip netns exec` reports a missing program itself.
        if !self.prefix.is_empty()
            && stderr.contains("exec of")
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
