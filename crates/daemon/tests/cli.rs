//! The command line as a user meets it: `--check-config` on good and bad files, and the one
//! binary that is the daemon as `slipstreamd` and the CLI as `slipstream`.

use std::process::Command;

mod common;

fn slipstreamd(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_slipstreamd"))
        .args(args)
        .output()
        .expect("run slipstreamd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn shipped_config_checks_out() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/slipstream.toml");
    let (code, stdout, _) = slipstreamd(&["--check-config", path]);
    assert_eq!(code, 0);
    assert!(stdout.contains("valid (3 rules)"), "{stdout}");
}

#[test]
fn bad_config_names_file_and_field_and_exits_2() {
    let dir = std::env::temp_dir().join(format!("slipstreamd-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[rules]]\nname = \"x\"\nremote_ports = [\"9000-80\"]\n").unwrap();
    let bad = bad.to_str().unwrap();
    for flag in ["--check-config", "--config"] {
        let (code, _, stderr) = slipstreamd(&[flag, bad]);
        assert_eq!(code, 2, "{flag}: {stderr}");
        assert!(
            stderr.contains("bad.toml: rules[0].remote_ports[0]: port range 9000-80 is reversed"),
            "{stderr}"
        );
    }
    let (code, _, stderr) = slipstreamd(&["--config", "/nonexistent/slipstream.toml"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("/nonexistent/slipstream.toml"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn config_is_required() {
    let (code, _, stderr) = slipstreamd(&[]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--config"), "{stderr}");
}

fn run(program: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(program).args(args).output().expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn one_binary_is_the_cli_under_the_name_slipstream() {
    let cli = common::cli_binary();
    let version = env!("CARGO_PKG_VERSION");
    let (code, stdout, _) = run(&cli, &["--version"]);
    assert_eq!(
        (code, stdout.trim()),
        (0, format!("slipstream {version}").as_str())
    );
    let (code, stdout, _) = run(&cli, &["presets"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("steam"), "{stdout}");
    // The CLI's own errors, not the daemon's: no daemon listens on this socket.
    let (code, _, stderr) = run(&cli, &["status", "--socket", "/nonexistent/slipstream.sock"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    // The same file under its own name is the daemon.
    let (code, stdout, _) = slipstreamd(&["--version"]);
    assert_eq!(
        (code, stdout.trim()),
        (0, format!("slipstreamd {version}").as_str())
    );
    let (code, _, stderr) = slipstreamd(&["presets"]);
    assert_eq!(code, 2, "the daemon takes no subcommand: {stderr}");
}
