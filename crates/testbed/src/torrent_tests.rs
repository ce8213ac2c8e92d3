use super::*;

#[test]
fn settings_keep_the_swarm_to_utp_and_unlimited() {
    let s = daemon_settings("10.77.3.2", LEECH_PORT, Path::new("/tmp/x"));
    assert_eq!(s["peer-port"], 51414);
    assert_eq!(s["utp-enabled"], true);
    for off in [
        "dht-enabled",
        "lpd-enabled",
        "pex-enabled",
        "port-forwarding-enabled",
        "speed-limit-down-enabled",
        "ratio-limit-enabled",
    ] {
        assert_eq!(s[off], false, "{off}");
    }
    assert_eq!(s["rpc-bind-address"], "127.0.0.1");
}

#[test]
fn random_file_has_its_size_and_does_not_compress() {
    let dir = std::env::temp_dir().join(format!("ss-torrent-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("f");
    write_random_file(&p, 100_003, 7).unwrap();
    let data = std::fs::read(&p).unwrap();
    assert_eq!(data.len(), 100_003);
    // Every byte value occurs, none far more than 1/256 of the time.
    let mut counts = [0u32; 256];
    for b in &data {
        counts[usize::from(*b)] += 1;
    }
    assert!(counts.iter().all(|&c| c > 250 && c < 550), "{counts:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn leech_stats_from_rpc() {
    let v: Value = serde_json::from_str(
        r#"{"arguments":{"torrents":[{"downloadedEver":123456,"percentDone":0.25,
            "peers":[{"address":"10.77.1.2","port":51413,"isUTP":true}]}]},"result":"success"}"#,
    )
    .unwrap();
    let s = LeechStats::from_rpc(&v).unwrap();
    assert_eq!(s.downloaded, 123_456);
    assert_eq!(
        s.peers,
        vec![PeerLink {
            address: "10.77.1.2".into(),
            port: SEED_PORT,
            is_utp: true
        }]
    );
    assert!(LeechStats::from_rpc(&serde_json::json!({"arguments": {"torrents": []}})).is_err());
    let r = TorrentResult {
        intervals: vec![Interval {
            start: 0.0,
            end: 0.5,
            bytes: 625_000,
            bits_per_second: 1e7,
            omitted: false,
        }],
        peers: s.peers,
        completed: false,
    }
    .into_iperf();
    assert!((r.goodput_mbps - 10.0).abs() < 1e-9);
    assert_eq!(r.raw["peers"][0]["utp"], true);
}
