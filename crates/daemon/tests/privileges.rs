//! Least privilege, end to end: the real daemon in a throwaway network namespace (`local` hook,
//! iptables-legacy) keeps only CAP_NET_ADMIN and CAP_NET_RAW in every capability set of every
//! thread once it runs (read from `/proc/<pid>/task/*/status`), with no_new_privs, and still does
//! everything that needs them: a download through its queues is listed and counted without
//! datapath errors, the watchdog puts back a deleted rule, a SIGHUP reload replaces the rules, and
//! SIGTERM removes them (all through firewall programs that inherit the two capabilities as
//! ambient ones). Three starts: by root with every capability (the daemon drops the rest), with
//! the sets of `openwrt/files/slipstream.json` (what procd/ujail gives it on OpenWrt: CAP_BPF,
//! CAP_PERFMON and CAP_SETPCAP to drop; also with the eBPF datapath), and without CAP_SETPCAP (the bounding set cannot shrink: a loud warning, and
//! the daemon runs on). Also: the shipped configs keep the metrics listener on loopback, and the
//! control socket is mode 0600. Ignored by default (needs root and the tools); run with --ignored.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{cli_binary, wait_until, Daemon, Pair, TestDir};

/// The daemon namespace's mangle table, as iptables-legacy-save prints it.
fn mangle(pair: &Pair) -> String {
    pair.run_a(&["iptables-legacy-save", "-t", "mangle"])
}

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    slipstream_testbed::missing_prerequisite(&[
        "ip",
        "iptables-legacy",
        "iptables-legacy-restore",
        "iptables-legacy-save",
        "iperf3",
        "setpriv",
    ])
}

/// CAP_NET_ADMIN (12) and CAP_NET_RAW (13).
const KEPT: u64 = 0x3000;
/// CAP_SYS_ADMIN (21), CAP_NET_BIND_SERVICE (10).
const SYS_ADMIN: u64 = 1 << 21;
const NET_BIND_SERVICE: u64 = 1 << 10;

fn status(socket: &Path) -> Option<Value> {
    let out = Command::new(cli_binary())
        .args(["status", "--json", "--socket"])
        .arg(socket)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn config(socket: &Path, rules: &str) -> String {
    format!(
        "[datapath]\nlan_interfaces = [\"vA\"]\nhook = \"local\"\nfirewall = \"iptables\"\nipv6 = false\n\
         [control]\nsocket = \"{}\"\n{rules}",
        socket.display()
    )
}

const RULES: &str = "[[rules]]\nname = \"bt\"\nremote_ports = [6881]\n";
const RULES_RELOADED: &str = "[[rules]]\nname = \"backup\"\nremote_ports = [873]\n\
                              [[rules]]\nname = \"bt\"\nremote_ports = [6881]\n";

/// The capability sets and no_new_privs of one thread.
#[derive(PartialEq, Eq)]
struct Caps {
    inheritable: u64,
    permitted: u64,
    effective: u64,
    bounding: u64,
    ambient: u64,
    no_new_privs: bool,
}

impl std::fmt::Debug for Caps {
    /// As `/proc/<pid>/status` shows them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CapInh {:016x} CapPrm {:016x} CapEff {:016x} CapBnd {:016x} CapAmb {:016x} NoNewPrivs {}",
            self.inheritable,
            self.permitted,
            self.effective,
            self.bounding,
            self.ambient,
            u8::from(self.no_new_privs)
        )
    }
}

fn thread_caps(status: &str) -> Caps {
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("{key} not in\n{status}"))
            .trim()
            .to_owned()
    };
    let mask = |key: &str| u64::from_str_radix(&field(key), 16).unwrap();
    Caps {
        inheritable: mask("CapInh:"),
        permitted: mask("CapPrm:"),
        effective: mask("CapEff:"),
        bounding: mask("CapBnd:"),
        ambient: mask("CapAmb:"),
        no_new_privs: field("NoNewPrivs:") == "1",
    }
}

/// Every thread of `pid` (name, sets): the main thread, the packet thread and (where ctnetlink
/// works) the conntrack thread.
fn caps_of_all_threads(pid: u32) -> Vec<(String, Caps)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue; // a thread that just ended
        };
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        threads.push((name.trim().to_owned(), thread_caps(&status)));
    }
    threads
}

fn assert_caps(pid: u32, bounding: u64, log: &Path) {
    let threads = caps_of_all_threads(pid);
    let names: Vec<&str> = threads.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"packets"), "{names:?}");
    let expected = Caps {
        inheritable: KEPT,
        permitted: KEPT,
        effective: KEPT,
        bounding,
        ambient: KEPT,
        no_new_privs: true,
    };
    for (name, caps) in &threads {
        assert_eq!(
            caps,
            &expected,
            "thread {name}; daemon log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
    eprintln!("{} threads {names:?}: {expected:?}", threads.len());
}

/// Starts the daemon under `launcher` (a command that execs the rest of its arguments), checks
/// its capabilities against `bounding` and the log against `log_says`, and walks it through a
/// download, a watchdog re-apply, a reload and SIGTERM.
fn scenario(tag: &str, launcher: &[String], bounding: u64, log_says: &str) {
    let TestDir {
        dir,
        socket,
        cfg,
        log,
    } = TestDir::new(&format!("priv-{tag}"));
    std::fs::write(&cfg, config(&socket, RULES)).unwrap();
    let pair = Pair::create(&format!("sspriv{tag}"), "10.198.0");

    let mut argv: Vec<&str> = launcher.iter().map(String::as_str).collect();
    argv.extend([
        env!("CARGO_BIN_EXE_slipstreamd"),
        "--config",
        cfg.to_str().unwrap(),
    ]);
    // `ip netns exec` and the launcher exec the daemon: the child's pid is the daemon's.
    let (mut daemon, pid) = Daemon::start(&pair.a, &argv, &log);
    wait_until("the control socket", &log, || status(&socket).is_some());
    assert_caps(pid, bounding, &log);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(log_says), "{log_says:?} not in the log:\n{text}");

    // The control socket: root only.
    let meta = std::fs::metadata(&socket).unwrap();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), 0);

    // A download on the background port: its packets pass the queues, verdicts and all.
    let mut server = Pair::exec(&pair.b, &["iperf3", "-s", "-1", "-p", "6881"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let client = Pair::exec(
        &pair.a,
        &[
            "iperf3",
            "-c",
            "10.198.0.2",
            "-p",
            "6881",
            "-R",
            "-t",
            "2",
            "-b",
            "20M",
        ],
    )
    .output()
    .unwrap();
    let _ = server.wait();
    assert!(
        client.status.success(),
        "download failed: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    let s = status(&socket).unwrap();
    assert!(s["packets"].as_u64().unwrap() > 100, "{s:#}");
    assert_eq!(s["datapath_errors"], 0, "{s:#}");
    // iperf3's control connection and its data connection.
    assert!(s["rules"][0]["flows_started"].as_u64().unwrap() >= 1, "{s:#}");

    // The watchdog puts back a deleted rule, through iptables-legacy(-restore) subprocesses.
    let jump = "-A OUTPUT ! -o lo -p tcp -j SLIPSTREAM";
    assert!(mangle(&pair).contains(jump), "{}", mangle(&pair));
    pair.run_a(&[
        "iptables-legacy",
        "-w",
        "-t",
        "mangle",
        "-D",
        "OUTPUT",
        "!",
        "-o",
        "lo",
        "-p",
        "tcp",
        "-j",
        "SLIPSTREAM",
    ]);
    assert!(!mangle(&pair).contains(jump));
    wait_until("the watchdog", &log, || {
        status(&socket).is_some_and(|s| s["firewall"]["reapplied"] == 1)
    });
    assert!(mangle(&pair).contains(jump), "{}", mangle(&pair));

    // SIGHUP: the new rules are in the kernel.
    std::fs::write(&cfg, config(&socket, RULES_RELOADED)).unwrap();
    slipstream_testbed::cmd::signal(pid, libc::SIGHUP);
    wait_until("the reload", &log, || {
        status(&socket).is_some_and(|s| s["reloads_ok"] == 1)
    });
    let s = status(&socket).unwrap();
    assert_eq!(s["reloads_failed"], 0, "{s:#}");
    assert_eq!(s["last_reload_error"], Value::Null, "{s:#}");
    assert!(mangle(&pair).contains("--dports 873"), "{}", mangle(&pair));
    // Nothing was regained on the way.
    assert_caps(pid, bounding, &log);

    // SIGTERM: exit 0, rules removed (one more firewall program), socket file gone.
    let code = daemon.terminate(pid);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(code, Some(0), "{text}");
    assert!(!mangle(&pair).contains("SLIPSTREAM"), "{}", mangle(&pair));
    assert!(!socket.exists(), "socket file left behind");
    assert!(!text.contains("ERROR"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The capability names of `openwrt/files/slipstream.json`'s `set` list, for setpriv.
fn json_caps(json: &Value, set: &str) -> String {
    json[set]
        .as_array()
        .unwrap_or_else(|| panic!("no {set} list"))
        .iter()
        .map(|c| {
            let name = c.as_str().unwrap().to_ascii_lowercase();
            format!("+{}", name.strip_prefix("cap_").unwrap())
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn root_daemon_keeps_only_net_admin_and_net_raw() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    scenario(
        "root",
        &[],
        KEPT,
        "privileges: keeping CAP_NET_ADMIN, CAP_NET_RAW (effective, permitted, inheritable, ambient and bounding sets); every other capability dropped, no_new_privs set",
    );
}

/// What procd (through ujail) does with `procd_set_param capabilities` and `no_new_privs`,
/// done by setpriv from the same JSON file: the daemon starts with only these sets and works.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn daemon_runs_with_the_openwrt_capability_file() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    scenario(
        "ujail",
        &ujail_launcher(),
        KEPT,
        "privileges: keeping CAP_NET_ADMIN, CAP_NET_RAW (effective, permitted, inheritable, ambient and bounding sets)",
    );
}

/// setpriv doing what ujail does with `openwrt/files/slipstream.json`: as root the daemon is
/// permitted its bounding set; the inheritable and ambient sets are the file's. Checks the sets
/// first: CAP_BPF and CAP_PERFMON (the tc programs), CAP_SETPCAP (to shrink the bounding set)
/// only at start, never inherited; no CAP_SYS_ADMIN.
fn ujail_launcher() -> Vec<String> {
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_file("openwrt/files/slipstream.json")).unwrap())
            .unwrap();
    for set in ["bounding", "effective", "permitted"] {
        assert_eq!(
            json_caps(&json, set),
            "+net_admin,+net_raw,+bpf,+perfmon,+setpcap",
            "{set}"
        );
    }
    for set in ["inheritable", "ambient"] {
        assert_eq!(json_caps(&json, set), "+net_admin,+net_raw", "{set}");
    }
    [
        "setpriv".to_owned(),
        format!("--bounding-set=-all,{}", json_caps(&json, "bounding")),
        format!("--inh-caps=-all,{}", json_caps(&json, "inheritable")),
        format!("--ambient-caps=-all,{}", json_caps(&json, "ambient")),
        "--no-new-privs".to_owned(),
        "--".to_owned(),
    ]
    .into()
}

/// The eBPF datapath under the OpenWrt capability file: the tc programs load and attach with
/// CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (measured: without CAP_PERFMON the verifier refuses
/// the program with EACCES; CAP_SYS_ADMIN is not needed), then the daemon keeps only
/// CAP_NET_ADMIN and CAP_NET_RAW in every set of every thread.
#[test]
#[ignore = "needs root, network namespaces and BPF: scripts/test.sh runs it (--ignored)"]
fn ebpf_datapath_loads_with_the_openwrt_capability_file() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let TestDir {
        dir,
        socket,
        cfg,
        log,
    } = TestDir::new("priv-ebpf");
    std::fs::write(
        &cfg,
        config(&socket, RULES).replace("hook = \"local\"", "hook = \"forward\"\nengine = \"ebpf\""),
    )
    .unwrap();
    let pair = Pair::create("ssprivebpf", "10.198.1");
    let mut argv: Vec<String> = ujail_launcher();
    argv.extend([
        env!("CARGO_BIN_EXE_slipstreamd").to_owned(),
        "--config".to_owned(),
        cfg.display().to_string(),
    ]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (mut daemon, pid) = Daemon::start(&pair.a, &argv, &log);
    wait_until("the control socket", &log, || status(&socket).is_some());
    assert_caps(pid, KEPT, &log);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("eBPF datapath: tc programs on vA"), "{text}");
    assert!(
        text.contains("privileges: keeping CAP_NET_ADMIN, CAP_NET_RAW (effective, permitted, inheritable, ambient and bounding sets); every other capability dropped"),
        "{text}"
    );
    let code = daemon.terminate(pid);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(code, Some(0), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Without CAP_SETPCAP the bounding set cannot shrink: the daemon says so loudly and runs on,
/// with the other sets reduced all the same.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn daemon_that_cannot_drop_warns_and_runs_on() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let launcher: Vec<String> = [
        "setpriv",
        "--bounding-set=-all,+net_admin,+net_raw,+sys_admin,+net_bind_service",
        "--",
    ]
    .map(str::to_owned)
    .into();
    scenario(
        "nosetpcap",
        &launcher,
        KEPT | SYS_ADMIN | NET_BIND_SERVICE,
        "privileges: COULD NOT DROP ALL CAPABILITIES; running with more privilege than needed \
         (CAP_NET_BIND_SERVICE, CAP_SYS_ADMIN left in the bounding set",
    );
}

/// The shipped configs and the defaults keep the metrics listener on loopback and the control
/// socket under /var/run (mode 0600 is checked above).
#[test]
fn shipped_configs_keep_metrics_and_control_local() {
    for path in ["config/slipstream.toml", "openwrt/files/slipstream.config"] {
        let config = slipstream_config::load(&repo_file(path)).unwrap();
        assert!(
            config.metrics.listen.ip().is_loopback(),
            "{path}: {}",
            config.metrics.listen
        );
        assert_eq!(
            config.control.socket,
            Path::new("/var/run/slipstream.sock"),
            "{path}"
        );
    }
    let minimal = std::env::temp_dir().join(format!("ssd-priv-minimal-{}.toml", std::process::id()));
    std::fs::write(&minimal, RULES).unwrap();
    let config = slipstream_config::load(&minimal).unwrap();
    std::fs::remove_file(&minimal).ok();
    assert_eq!(config.metrics.listen.to_string(), "127.0.0.1:9617");
    assert_eq!(config.control.socket, Path::new("/var/run/slipstream.sock"));
}
