//! The daemon as an operator meets it, in two throwaway network namespaces joined by a veth pair
//! (`local` hook: the daemon's namespace downloads from the other one through its own rules):
//! `slipstream status` and `slipstream flows` over the control socket (a real download listed),
//! SIGHUP with a valid changed config (rules replaced in the firewall and shown by `status`, a
//! restart-only setting kept and reported), SIGHUP with an invalid config (old rules kept, error
//! shown), the watchdog re-applying flushed rules, the reload/watchdog metrics, and a clean
//! SIGTERM (exit 0, rules removed, socket file gone). Ignored by default (needs root
//! and the tools); run with --ignored.
//!
//! The `slipstream` CLI is another package's binary: it is taken from the same target directory,
//! and built there first if missing.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{cli_binary, wait_until, Daemon, Pair, TestDir};

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    slipstream_testbed::missing_prerequisite(&[
        "ip",
        "iptables-legacy",
        "iptables-legacy-restore",
        "iperf3",
        "curl",
    ])
}

fn slipstream(socket: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(cli_binary())
        .args(args)
        .arg("--socket")
        .arg(socket)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn status(socket: &Path) -> Value {
    let (code, out, err) = slipstream(socket, &["status", "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn rule_names(status: &Value) -> Vec<String> {
    status["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect()
}

fn config(socket: &Path, ack_queue: u16, rules: &str) -> String {
    format!(
        "[datapath]\nlan_interfaces = [\"vA\"]\nhook = \"local\"\nfirewall = \"iptables\"\nipv6 = false\n\
         ack_queue = {ack_queue}\ndata_queue = 8471\n\
         [control]\nsocket = \"{}\"\n{rules}",
        socket.display()
    )
}

const RULES_A: &str = "[[rules]]\nname = \"bt\"\nremote_ports = [6881]\n\
                       [[rules]]\nname = \"le\"\ndscp = [\"LE\"]\n";
const RULES_B: &str = "[[rules]]\nname = \"backup\"\nremote_ports = [873]\n\
                       controller = { kind = \"fixed_window\", window_bytes = 65535 }\n\
                       [[rules]]\nname = \"bt\"\nremote_ports = [6881]\n";

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn control_socket_reload_watchdog_and_clean_exit() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let cli = cli_binary();
    assert!(cli.exists());
    let TestDir {
        dir,
        socket,
        cfg,
        log,
    } = TestDir::new("control");
    std::fs::write(&cfg, config(&socket, 8470, RULES_A)).unwrap();

    let pair = Pair::create("ssctl", "10.199.0");
    let (mut daemon, pid) = Daemon::start(
        &pair.a,
        &[
            env!("CARGO_BIN_EXE_slipstreamd"),
            "--config",
            cfg.to_str().unwrap(),
        ],
        &log,
    );
    wait_until("the control socket", &log, || {
        slipstream(&socket, &["status"]).0 == 0
    });

    // status, as a table and as JSON.
    let (_, text, _) = slipstream(&socket, &["status"]);
    assert!(text.contains(&format!("(pid {pid})")), "{text}");
    assert!(
        text.contains("firewall    iptables-legacy, rules installed"),
        "{text}"
    );
    assert!(text.contains("queues      ack 8470, data 8471"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("1  bt ")), "{text}");
    let mode = std::fs::metadata(&socket).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    let s = status(&socket);
    assert_eq!(rule_names(&s), ["bt", "le"]);
    assert_eq!(s["config_path"], cfg.to_str().unwrap());
    assert_eq!(s["firewall"]["installed"], true);
    // No probes while the engine wants none: the target is not even looked up.
    assert_eq!(
        s["probe"]["target"],
        "auto (the default gateway, looked up at the first probe)"
    );
    assert_eq!(s["probe"]["sent"], 0);

    // A real download from the other namespace's port 6881: listed by `flows` under "bt".
    let mut server = Pair::exec(&pair.b, &["iperf3", "-s", "-1", "-p", "6881"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut client = Pair::exec(
        &pair.a,
        &[
            "iperf3",
            "-c",
            "10.199.0.2",
            "-p",
            "6881",
            "-R",
            "-t",
            "3",
            "-b",
            "20M",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut flows = Value::Null;
    wait_until("the download in `slipstream flows`", &log, || {
        let (code, out, _) = slipstream(&socket, &["flows", "--json"]);
        flows = serde_json::from_str(&out).unwrap_or(Value::Null);
        code == 0
            && flows["flows"].as_array().is_some_and(|f| {
                f.iter().any(|f| {
                    f["rule"] == "bt"
                        && f["sender"].as_str().is_some_and(|s| s == "10.199.0.2:6881")
                        && f["acked_bytes"].as_u64().unwrap_or(0) > 100_000
                })
            })
    });
    let (code, table, err) = slipstream(&socket, &["flows"]);
    assert_eq!(code, 0, "{err}");
    eprintln!("slipstream flows:\n{table}");
    assert!(table.starts_with("LAN HOST"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("10.199.0.2:6881") && l.contains(" bt ") && l.contains("household")),
        "{table}"
    );
    assert!(table.contains("Mbit/s") || table.contains("kbit/s"), "{table}");
    let _ = client.wait();
    let _ = server.wait();

    // SIGHUP with a valid, changed config: rules replaced (in the firewall too), probes off; the
    // ack queue change needs a restart and is kept.
    let probes_off = format!("[household]\nprobe = \"off\"\n{RULES_B}");
    std::fs::write(&cfg, config(&socket, 9000, &probes_off)).unwrap();
    slipstream_testbed::cmd::signal(pid, libc::SIGHUP);
    wait_until("the reload", &log, || status(&socket)["reloads_ok"] == 1);
    let s = status(&socket);
    let names = rule_names(&s);
    assert_eq!(&names[..2], ["backup", "bt"], "{s:#}");
    assert!(names[2..].is_empty() || s["rules"][2]["removed"] == true, "{s:#}");
    assert_eq!(s["last_reload_error"], Value::Null);
    assert_eq!(s["ack_queue"], 8470);
    assert_eq!(s["probe"]["target"], "off", "applied live");
    let restart = s["restart_needed"][0].as_str().unwrap();
    assert!(
        restart.starts_with("datapath.ack_queue changed from 8470 to 9000"),
        "{restart}"
    );
    let save = pair.run_a(&["iptables-legacy-save", "-t", "mangle"]);
    assert!(save.contains("--dports 873"), "{save}");
    assert!(!save.contains("--dscp 0x01"), "the LE rule is gone:\n{save}");
    assert!(save.contains("--queue-num 8470"), "{save}");
    let (_, text, _) = slipstream(&socket, &["status"]);
    eprintln!("slipstream status:\n{text}");
    assert!(text.contains("restart needed: datapath.ack_queue"), "{text}");

    // SIGHUP with an invalid config: the old rules stay, the error is shown.
    std::fs::write(
        &cfg,
        config(
            &socket,
            8470,
            "[[rules]]\nname = \"x\"\nremote_ports = [\"9000-80\"]\n",
        ),
    )
    .unwrap();
    slipstream_testbed::cmd::signal(pid, libc::SIGHUP);
    wait_until("the failed reload", &log, || {
        status(&socket)["reloads_failed"] == 1
    });
    let s = status(&socket);
    assert_eq!(&rule_names(&s)[..2], ["backup", "bt"]);
    let error = s["last_reload_error"].as_str().unwrap();
    assert!(
        error.contains("slipstream.toml: rules[0].remote_ports[0]: port range 9000-80 is reversed"),
        "{error}"
    );
    assert!(pair
        .run_a(&["iptables-legacy-save", "-t", "mangle"])
        .contains("--dports 873"));
    let (_, text, _) = slipstream(&socket, &["status"]);
    assert!(
        text.contains("last reload FAILED, previous config still in force:"),
        "{text}"
    );

    // The watchdog puts back rules flushed behind the daemon's back.
    pair.run_a(&["iptables-legacy", "-w", "-t", "mangle", "-F"]);
    wait_until("the watchdog", &log, || {
        status(&socket)["firewall"]["reapplied"] == 1
    });
    let save = pair.run_a(&["iptables-legacy-save", "-t", "mangle"]);
    assert!(save.contains("-A OUTPUT ! -o lo -p tcp -j SLIPSTREAM"), "{save}");
    assert!(save.contains("--dports 873"), "{save}");

    // The same counters as metrics.
    let metrics = pair.run_a(&["curl", "-sf", "--max-time", "2", "http://127.0.0.1:9617/metrics"]);
    for line in [
        "slipstream_config_reloads_total{result=\"ok\"} 1",
        "slipstream_config_reloads_total{result=\"failed\"} 1",
        "slipstream_firewall_reapplied_total 1",
        "slipstream_firewall_rules_installed 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
    }
    assert!(metrics.contains("slipstream_config_last_reload_success_timestamp_seconds "));

    // SIGTERM: exit 0, rules and socket gone.
    let code = daemon.terminate(pid);
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(code, Some(0), "{log_text}");
    assert!(!pair
        .run_a(&["iptables-legacy-save", "-t", "mangle"])
        .contains("SLIPSTREAM"));
    assert!(!socket.exists(), "socket file left behind");
    assert!(
        log_text.contains("config reload failed, the previous config stays in force"),
        "{log_text}"
    );
    let (code, _, err) = slipstream(&socket, &["status"]);
    assert_eq!(code, 1);
    assert!(err.contains("is slipstreamd running?"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A daemon killed with SIGKILL leaves its rules and socket file; `--cleanup` (which the OpenWrt
/// init script runs on stop) removes both, and touches nothing while a daemon is running.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn cleanup_removes_what_a_killed_daemon_left() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let TestDir {
        dir,
        socket,
        cfg,
        log,
    } = TestDir::new("cleanup");
    std::fs::write(&cfg, config(&socket, 8470, RULES_A)).unwrap();
    let pair = Pair::create("ssctl", "10.199.0");
    let daemon_bin = env!("CARGO_BIN_EXE_slipstreamd");
    let (mut daemon, _) = Daemon::start(&pair.a, &[daemon_bin, "--config", cfg.to_str().unwrap()], &log);
    wait_until("the control socket", &log, || {
        slipstream(&socket, &["status"]).0 == 0
    });

    let cleanup = |pair: &Pair| {
        Pair::exec(
            &pair.a,
            &[daemon_bin, "--config", cfg.to_str().unwrap(), "--cleanup"],
        )
        .output()
        .unwrap()
    };
    // While the daemon runs, cleanup refuses and touches nothing.
    let out = cleanup(&pair);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("a running daemon serves"));
    assert!(socket.exists());
    assert!(pair
        .run_a(&["iptables-legacy-save", "-t", "mangle"])
        .contains("SLIPSTREAM"));

    // SIGKILL: nothing is cleaned up by the daemon itself.
    let mut child = daemon.0.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let save = pair.run_a(&["iptables-legacy-save", "-t", "mangle"]);
    assert!(save.contains("SLIPSTREAM"), "{save}");
    assert!(socket.exists());

    let out = cleanup(&pair);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!pair
        .run_a(&["iptables-legacy-save", "-t", "mangle"])
        .contains("SLIPSTREAM"));
    assert!(!socket.exists(), "socket file left behind");
    // Running it again on a clean system is fine.
    assert!(cleanup(&pair).status.success());
    std::fs::remove_dir_all(&dir).ok();
}
