//! `slipstream presets`: the built-in presets, from the same embedded file the daemon reads.

use slipstream_names::presets::{self, Preset};
use std::fmt::Write;
use std::process::ExitCode;

/// Prints the list, or one preset in full; exit 1 for an unknown name.
pub(crate) fn show(name: Option<&str>) -> ExitCode {
    match name {
        None => {
            print!("{}", list(presets::all()));
            ExitCode::SUCCESS
        }
        Some(n) => match presets::find(&n.to_ascii_lowercase()) {
            Some(p) => {
                print!("{}", detail(p));
                ExitCode::SUCCESS
            }
            None => {
                eprintln!(
                    "error: unknown preset {n:?}; known: {}",
                    presets::names().join(", ")
                );
                ExitCode::FAILURE
            }
        },
    }
}

/// One line per preset: name, number of patterns, description.
pub(crate) fn list(all: &[Preset]) -> String {
    let width = all.iter().map(|p| p.name.len()).max().unwrap_or(4).max(4);
    let mut s = format!("{:width$}  NAMES  DESCRIPTION\n", "NAME");
    for p in all {
        let _ = writeln!(s, "{:width$}  {:>5}  {}", p.name, p.domains.len(), p.description);
    }
    s.push_str("\nUse one in a rule: preset = \"steam\". Details: slipstream presets <name>\n");
    s
}

/// A preset's protocol, patterns, sources and note.
pub(crate) fn detail(p: &Preset) -> String {
    let mut s = format!(
        "{}: {}\n\nprotocol: {}{}\n\nnames:\n",
        p.name,
        p.description,
        p.protocol,
        if p.protocol.udp() {
            " (the hosts also serve QUIC: a rule naming the preset covers UDP too)"
        } else {
            ""
        }
    );
    for d in &p.domains {
        let _ = writeln!(s, "  {d}");
    }
    s.push_str("\nsources:\n");
    for src in &p.sources {
        let _ = writeln!(s, "  {src}");
    }
    if let Some(note) = &p.note {
        let _ = write!(s, "\nnote: {note}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_and_detail() {
        let l = list(presets::all());
        assert!(l.starts_with("NAME "), "{l}");
        assert!(
            l.lines().any(|x| x.starts_with("steam ") && x.contains("Steam")),
            "{l}"
        );
        assert_eq!(l.lines().count(), presets::all().len() + 3);
        let d = detail(presets::find("windows_update").unwrap());
        assert!(d.contains("\n  *.dl.delivery.mp.microsoft.com\n"), "{d}");
        assert!(d.contains("sources:\n  https://"), "{d}");
        assert!(d.contains("note: Delivery Optimization"), "{d}");
        assert!(d.contains("\nprotocol: tcp\n"), "{d}");
        let d = detail(presets::find("google_play").unwrap());
        assert!(d.contains("\nprotocol: both (the hosts also serve QUIC"), "{d}");
    }
}
