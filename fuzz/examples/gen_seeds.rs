//! Writes the committed seed corpus (`fuzz/corpus/<target>/`).
//!
//! * `parse` and `rewrite_window`: packets like the wire crate's fixtures (Linux SYN, IPv6 ACK
//!   with SACK, hop-by-hop, data with payload, padding, header-only cut, fragments, UDP, AH, bad
//!   options, IPv4 options, unknown TCP options), the latter with a few clamp parameter headers.
//! * `engine`: the hand-written scenarios (`slipstream_fuzz::scenarios`: downloads under each
//!   controller, household flows, mid-stream recovery, reload, eviction), and for each
//!   behaviour of interest (a rewrite by each controller, a window update, eviction, expiry, a
//!   close, a flow recovered mid-stream, a reload, ...) the smallest input that shows it, among
//!   seeded pseudo-random inputs and the files of any directories given (e.g. a fuzzing run's
//!   working corpus).
//!
//! Usage (from `fuzz/`): `cargo run --release --example gen_seeds -- corpus [DIR...]`
//! Also `... -- --stats DIR` prints how many inputs of DIR show each behaviour.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};
use slipstream_engine::PassReason;
use slipstream_fuzz::engine_run::{run, EngineInput, RunSummary};
use slipstream_fuzz::packet::{self, TcpSpec, ACK, PSH, SYN};

fn spec(src: &str, dst: &str) -> TcpSpec {
    TcpSpec {
        src: src.parse::<IpAddr>().unwrap(),
        dst: dst.parse::<IpAddr>().unwrap(),
        src_port: 54321,
        dst_port: 443,
        seq: 0xa1b2_c3d4,
        ack: 0,
        flags: SYN,
        ns: false,
        window: 64240,
        urgent: 0,
        options: Vec::new(),
        payload_len: 0,
        tos: 0x20,
        ip_options: 0,
    }
}

fn fix_ipv4_header(p: &mut [u8]) {
    let ihl = usize::from(p[0] & 0x0f) * 4;
    p[10] = 0;
    p[11] = 0;
    let mut sum = 0u32;
    for c in p[..ihl].chunks(2) {
        sum += u32::from(c[0]) << 8 | u32::from(c[1]);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    p[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// Named packets like the wire crate's fixtures.
fn wire_packets() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    // The wire fixtures' IPv4 SYN, byte for byte (Linux option order).
    let v4_syn: Vec<u8> = vec![
        0x45, 0x20, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x26, 0xc9, 0xc0, 0xa8, 0x01, 0x0a, 0x5d,
        0xb8, 0xd8, 0x22, 0xd4, 0x31, 0x01, 0xbb, 0xa1, 0xb2, 0xc3, 0xd4, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02,
        0xfa, 0xf0, 0xe5, 0xa5, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x12, 0x34,
        0x56, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];
    assert!(slipstream_wire::tcp_checksum_valid(&v4_syn));
    out.push(("v4-syn-linux", v4_syn.clone()));

    let mut ack6 = spec("2001:db8::10", "2001:db8:ff00::22");
    ack6.flags = ACK;
    ack6.seq = 777;
    ack6.ack = 4000;
    ack6.window = 1234;
    ack6.tos = 0xb8;
    ack6.options = vec![1, 1, 8, 10, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 1, 1, 5, 18];
    for v in [5000u32, 6000, 8000, 9000] {
        ack6.options.extend_from_slice(&v.to_be_bytes());
    }
    out.push(("v6-ack-ts-sack", packet::build(&ack6)));

    let mut hbh = spec("2001:db8::10", "2001:db8:ff00::22");
    hbh.flags = ACK | PSH;
    hbh.ip_options = 1;
    hbh.options = vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
    hbh.payload_len = 33;
    out.push(("v6-hop-by-hop-data", packet::build(&hbh)));

    let mut data4 = spec("192.168.1.10", "93.184.216.34");
    data4.flags = ACK | PSH;
    data4.seq = 1000;
    data4.ack = 2000;
    data4.window = 501;
    data4.options = vec![1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];
    data4.payload_len = 100;
    let data4 = packet::build(&data4);
    out.push(("v4-data", data4.clone()));
    let mut padded = data4.clone();
    padded.extend_from_slice(&[0xee; 14]);
    out.push(("v4-data-padded", padded));
    out.push(("v4-data-header-only", data4[..52].to_vec()));

    let mut frag = data4.clone();
    frag[6] = 0x20;
    fix_ipv4_header(&mut frag);
    out.push(("v4-fragment-mf", frag));

    let mut udp = data4.clone();
    udp[9] = 17;
    fix_ipv4_header(&mut udp);
    out.push(("v4-udp", udp));

    // TCP behind an IPsec AH header (12-byte ICV).
    let bare = {
        let mut s = spec("192.168.1.10", "93.184.216.34");
        s.flags = ACK;
        packet::build(&s)
    };
    let mut ah = bare[..20].to_vec();
    ah[9] = 51;
    ah.extend_from_slice(&[6, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
    ah.extend_from_slice(&[0; 12]);
    ah.extend_from_slice(&bare[20..]);
    let total = ah.len() as u16;
    ah[2..4].copy_from_slice(&total.to_be_bytes());
    fix_ipv4_header(&mut ah);
    out.push(("v4-ah-tcp", ah));

    // IPv6 fragment header (atomic fragment) before TCP.
    let v6 = {
        let mut s = spec("2001:db8::10", "2001:db8:ff00::22");
        s.flags = ACK;
        packet::build(&s)
    };
    let mut frag6 = v6[..40].to_vec();
    frag6[6] = 44;
    frag6.extend_from_slice(&[6, 0, 0, 0, 0x12, 0x34, 0x56, 0x78]);
    frag6.extend_from_slice(&v6[40..]);
    let payload = (frag6.len() - 40) as u16;
    frag6[4..6].copy_from_slice(&payload.to_be_bytes());
    out.push(("v6-fragment", frag6));

    let mut zero6 = v6.clone();
    zero6[4] = 0;
    zero6[5] = 0;
    out.push(("v6-zero-payload-length", zero6));

    let mut bad_opts = v4_syn.clone();
    bad_opts[41] = 1;
    out.push(("v4-syn-bad-mss-length", bad_opts));

    let mut ipopt = spec("10.0.0.2", "192.0.2.1");
    ipopt.flags = ACK;
    ipopt.ip_options = 2;
    ipopt.window = 3000;
    ipopt.options = vec![2, 4, 5, 0xb4, 1, 3, 3, 14];
    out.push(("v4-ip-options", packet::build(&ipopt)));

    let mut unknown = spec("10.0.0.2", "192.0.2.1");
    unknown.flags = SYN | ACK;
    unknown.options = vec![
        34, 10, 1, 2, 3, 4, 5, 6, 7, 8, 30, 4, 0x10, 0, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2,
    ];
    out.push(("v4-tfo-mptcp-then-ts", packet::build(&unknown)));

    for (name, p) in &out {
        let _ = name;
        slipstream_fuzz::wire_checks::check_parse(p);
    }
    out
}

/// Clamp parameter headers for `rewrite_window` seeds (see `wire_checks::check_rewrite`).
fn rewrite_headers() -> Vec<(&'static str, [u8; 12])> {
    let h = |mode: u8, scale: u8, target: u32, edge: u32, mss: u16| {
        let mut b = [0u8; 12];
        b[0] = mode;
        b[1] = scale;
        b[2..6].copy_from_slice(&target.to_be_bytes());
        b[6..10].copy_from_slice(&edge.to_be_bytes());
        b[10..12].copy_from_slice(&mss.to_be_bytes());
        b
    };
    vec![
        ("fixed-target", h(1, 7, 20_000, 0, 1448)),
        ("edge-ahead", h(1 | 4, 7, 20_000, 64_256, 1448)),
        ("hold", h(1 | 2 | 4, 2, 0, 5_000, 1448)),
        ("raw-offset", h(8, 20, 0x1234, 0, 0)),
    ]
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// splitmix64, so the pseudo-random candidates are the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn features(s: &RunSummary) -> Vec<&'static str> {
    let c = &s.counters;
    let mut f = Vec::new();
    let mut add = |cond: bool, name: &'static str| {
        if cond {
            f.push(name);
        }
    };
    add(s.rewritten_rule[0] > 0, "rewrite-household");
    add(s.rewritten_rule[1] > 0, "rewrite-vulture");
    add(s.rewritten_rule[2] > 0, "rewrite-fixed");
    add(s.rewritten_v6 > 0, "rewrite-ipv6");
    add(s.window_updates > 0, "window-update");
    add(s.zero_windows > 0, "zero-window-held");
    add(c.flows_evicted > 0, "evicted");
    add(c.flows_expired > 0, "expired");
    add(c.flows_closed > 0, "closed");
    add(c.flows_reopened > 0, "reopened");
    add(c.flows_recovered > 0, "recovered-midstream");
    add(c.flows_without_handshake > 0, "no-handshake");
    add(c.flows_without_timestamps > 0, "no-timestamps");
    add(c.passed(PassReason::TableFull) > 0, "table-full");
    add(c.passed(PassReason::RuleRemoved) > 0, "rule-removed");
    add(c.passed(PassReason::HeaderOnly) > 0, "header-only-ack");
    add(c.passed(PassReason::ChecksumNotReady) > 0, "checksum-not-ready");
    add(c.passed(PassReason::Malformed) > 0, "malformed");
    add(s.reconfigured > 0 && c.rewritten > 0, "reload-and-rewrite");
    f
}

fn summarize(bytes: &[u8]) -> Option<RunSummary> {
    let input = EngineInput::arbitrary_take_rest(Unstructured::new(bytes)).ok()?;
    match std::panic::catch_unwind(|| run(&input)) {
        Ok(s) => Some(s),
        Err(_) => {
            eprintln!(
                "an input panics: {} bytes (run the engine target on it)",
                bytes.len()
            );
            None
        }
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--stats") {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        let mut n = 0;
        for path in args[1..].iter().flat_map(|d| files(Path::new(d))) {
            n += 1;
            if let Some(s) = summarize(&std::fs::read(&path).unwrap()) {
                for f in features(&s) {
                    *counts.entry(f).or_default() += 1;
                }
            }
        }
        println!("{n} inputs");
        for (f, c) in counts {
            println!("{c:8} {f}");
        }
        return;
    }
    let out = PathBuf::from(args.first().cloned().unwrap_or_else(|| "corpus".into()));

    for (name, p) in wire_packets() {
        write(&out.join("parse"), name, &p);
        for (hname, h) in rewrite_headers() {
            // Every packet with one header, and the fixture packets with all of them.
            if hname == "fixed-target" || name.starts_with("v4-syn-linux") || name == "v6-ack-ts-sack" {
                let mut input = h.to_vec();
                input.extend_from_slice(&p);
                write(&out.join("rewrite_window"), &format!("{name}.{hname}"), &input);
            }
        }
    }

    // Engine: the smallest input per behaviour.
    let mut best: BTreeMap<&'static str, Vec<u8>> = BTreeMap::new();
    let consider = |bytes: Vec<u8>, best: &mut BTreeMap<&'static str, Vec<u8>>| {
        if let Some(s) = summarize(&bytes) {
            for f in features(&s) {
                if best.get(f).is_none_or(|b| b.len() > bytes.len()) {
                    best.insert(f, bytes.clone());
                }
            }
        }
    };
    let mut rng = Rng(0x005e_ed0f_5119_5742);
    for _ in 0..20_000 {
        let len = 256 + (rng.next() % 3840) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        consider(bytes, &mut best);
    }
    for dir in &args[1..] {
        for path in files(Path::new(dir)) {
            consider(std::fs::read(&path).unwrap(), &mut best);
        }
    }
    let dir = out.join("engine");
    let mut written = std::collections::HashSet::new();
    for (name, input) in slipstream_fuzz::scenarios::all() {
        let bytes = slipstream_fuzz::encode::to_bytes(&input);
        let s = summarize(&bytes).expect("scenarios run");
        println!("engine seed {name}: {} bytes, {:?}", bytes.len(), features(&s));
        write(&dir, name, &bytes);
        written.insert(bytes);
    }
    for (feature, bytes) in &best {
        if written.insert(bytes.clone()) {
            println!("engine seed {feature}: {} bytes", bytes.len());
            write(&dir, feature, bytes);
        }
    }
}
