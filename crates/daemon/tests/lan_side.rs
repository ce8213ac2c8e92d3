//! The daemon tells the LAN host of a forwarded flow by the interface its packets came in on:
//! on the namespace testbed (server 10.77.1.2 - isp - router - LAN client 10.77.3.2 behind the
//! router's `br-lan`), a background download and a background upload run through the real
//! `slipstreamd`, and its flow list (`slipstream flows`) must name the download's link "download" and the
//! upload's "upload". Without the input interface the engine would take each flow's lower
//! address, the server's, as the LAN host, and call both the other way round.
//!
//! Needs root and the testbed's tools (see `slipstream_testbed::netns_supported`); ignored by
//! default, run with --ignored; without them it fails saying why.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use slipstream_testbed::{netns_supported, IperfEnds};

mod common;
use common::{forward_testbed, start_router_daemon, TestDir};

/// `{"cmd":"flows"}` on the control socket (protocol in `slipstream_inspect`): the flow list.
fn flows(socket: &Path) -> Value {
    let mut conn = UnixStream::connect(socket).expect("control socket");
    conn.write_all(b"{\"cmd\":\"flows\"}\n").unwrap();
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line).unwrap();
    let response: Value = serde_json::from_str(&line).unwrap();
    response["flows"].clone()
}

/// The link of the flow with `port` among its endpoints, once the daemon knows it.
fn link_of(flows: &Value, port: u16) -> Option<String> {
    let suffix = format!(":{port}");
    flows["flows"].as_array()?.iter().find_map(|f| {
        let ends = f["endpoints"].as_array()?;
        if !ends
            .iter()
            .any(|e| e.as_str().is_some_and(|e| e.ends_with(&suffix)))
        {
            return None;
        }
        f["link"].as_str().map(str::to_owned)
    })
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn forwarded_flows_know_their_lan_host() {
    if let Err(why) = netns_supported() {
        panic!("cannot run here: {why}");
    }
    let tb = forward_testbed("sslan");
    let dir = TestDir::new("lan-side");
    let daemon = start_router_daemon(&tb, &dir, &format!("\"{}\"", tb.router_lan_if()), "");
    for port in [6881, 6882] {
        tb.start_iperf_server(port).expect("iperf3 server");
    }
    std::thread::sleep(Duration::from_millis(300));
    let ends = IperfEnds { client: 1, server: 1 };
    let download = tb.run_iperf(ends, 6881, 4, "cubic", true, &[]).expect("download");
    let upload = tb.run_iperf(ends, 6882, 4, "cubic", false, &[]).expect("upload");

    // Both transfers last 4 s; a loaded machine can start one a few seconds late (once in a
    // full scripts/test.sh run the upload's data connection had carried nothing after 4 s).
    let deadline = Instant::now() + Duration::from_secs(8);
    let (mut down_link, mut up_link, mut last) = (None, None, Value::Null);
    while Instant::now() < deadline && (down_link.is_none() || up_link.is_none()) {
        std::thread::sleep(Duration::from_millis(300));
        last = flows(&dir.socket);
        down_link = link_of(&last, 6881);
        up_link = link_of(&last, 6882);
    }
    eprintln!("slipstream flows --json:\n{last:#}");
    let _ = download.wait();
    let _ = upload.wait();
    let log = daemon.log();
    let status = daemon.stop().expect("slipstreamd stops");
    let _ = std::fs::remove_dir_all(&dir.dir);
    assert!(status.success(), "slipstreamd exit status {status}:\n{log}");
    assert_eq!(
        down_link.as_deref(),
        Some("download"),
        "the download's link; daemon log:\n{log}"
    );
    assert_eq!(
        up_link.as_deref(),
        Some("upload"),
        "the upload's link; daemon log:\n{log}"
    );
}
