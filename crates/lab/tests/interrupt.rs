//! Ctrl-C in the middle of a run: `slipstream-lab` must stop, exit 130 and leave no namespace,
//! no process and no firewall rule behind.
//!
//! The lab binary runs as a child with a marker in its environment, which every process it
//! starts inherits; after it exits, no process may carry the marker.
//!
//! Needs root and the workspace binaries (`cargo build --release --workspace --bins`): ignored by
//! default, run with --ignored; without them it fails saying why.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::root_mangle_rules;

const MARK_VAR: &str = "SLIPSTREAM_LAB_INTERRUPT_TEST";

/// Pids of processes whose environment holds `MARK_VAR=<mark>`.
fn marked_processes(mark: &str) -> Vec<u32> {
    let needle = format!("{MARK_VAR}={mark}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

fn namespaces_with(prefix: &str) -> Vec<String> {
    slipstream_testbed::list_netns().unwrap().into_iter().filter(|n| n.starts_with(prefix)).collect()
}

#[test]
#[ignore = "needs root, network namespaces and the workspace binaries: scripts/test.sh runs it (--ignored)"]
fn sigint_mid_run_tears_everything_down() {
    if let Err(why) = slipstream_testbed::netns_supported() {
        panic!("cannot run here: {why}");
    }
    let lab = std::path::PathBuf::from(env!("CARGO_BIN_EXE_slipstream-lab"));
    let daemon = slipstream_testbed::workspace_binary("slipstreamd", "SLIPSTREAMD_BIN");
    for bin in [&lab, &daemon] {
        assert!(bin.is_file(), "cannot run here: {} not built", bin.display());
    }
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let mark = format!("{}-{nanos}", std::process::id());
    let out = std::env::temp_dir().join(format!("slipstream-lab-interrupt-{}", std::process::id()));
    let rules_before = root_mangle_rules();
    let mut child = Command::new(&lab)
        .args(["alone", "--alternatives", "slipstream", "--scale", "0.5", "--out"])
        .arg(&out)
        .env(MARK_VAR, &mark)
        .env("SLIPSTREAMD_BIN", &daemon)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn slipstream-lab");
    let prefix = format!("sslab{}x", child.id());

    // Wait until the run is under way: namespaces built and the daemon running in them.
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < Duration::from_secs(60), "the run did not get under way within 60 s");
        assert!(child.try_wait().unwrap().is_none(), "slipstream-lab ended early");
        let running = marked_processes(&mark);
        let daemon_up = running.iter().any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "slipstreamd")
        });
        if namespaces_with(&prefix).len() >= 4 && daemon_up {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
    let before = marked_processes(&mark).len();
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("slipstream-lab still running 30 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!(
        "exited {status:?} {:.1} s after SIGINT; {before} marked processes before",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(status.code(), Some(130), "exit status after SIGINT");
    // Teardown SIGKILLs what ran in the namespaces; give the kernel a moment to reap.
    let gone = Instant::now();
    while !marked_processes(&mark).is_empty() && gone.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(before > 3, "the run had started its processes ({before})");
    let left = marked_processes(&mark);
    let names: Vec<String> = left
        .iter()
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default().replace('\0', " "))
        .collect();
    assert!(left.is_empty(), "processes left behind: {names:?}");
    assert!(namespaces_with(&prefix).is_empty(), "namespaces left: {:?}", namespaces_with(&prefix));
    assert_eq!(root_mangle_rules(), rules_before, "root namespace mangle rules changed");
    let _ = std::fs::remove_dir_all(&out);
}
