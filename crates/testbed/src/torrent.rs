//! A BitTorrent swarm over uTP (issue 24): one seeder on a server, leechers on LAN hosts, a
//! local tracker, Transmission 3.00 daemons driven over their RPC.
//!
//! Why it exists: BitTorrent clients move their bulk data over uTP (BEP 29, UDP with LEDBAT),
//! whose delay-based congestion control and one-way delay timestamps Slipstream's UDP policer
//! must live with; only a real client shows what that looks like on the link.
//!
//! The parts, all inside the testbed's namespaces and removed with it:
//! - a random file of the given size and its torrent (`transmission-create`, 256 KiB pieces),
//!   announcing to `http://<server>:6969/announce`;
//! - `opentracker` on the seeder's server, TCP and UDP 6969, chrooted to the swarm's directory
//!   and serving only this torrent (`-w`: Debian's build has the whitelist compiled in; the path
//!   is inside the chroot);
//! - `transmission-daemon` per peer (seeder: peer port [`SEED_PORT`]; leechers: [`LEECH_PORT`]),
//!   DHT, LPD, PEX and port mapping off, uTP on, no speed or ratio limits, RPC on
//!   127.0.0.1:9091 in its own namespace;
//! - TCP to either peer port refused with a reset (iptables INPUT in both namespaces): the peers
//!   can only speak uTP.
//!
//! **UDP ports.** uTP runs on the peer port's UDP socket (Transmission binds TCP and UDP on the
//! same number): seeder `SEED_PORT` ↔ leecher `LEECH_PORT`, both directions of the flow. A rule
//! classing the swarm matches the seeder's port as the remote port (or the leecher's as a local
//! one). The tracker's announces are HTTP over TCP 6969.
//!
//! The leecher's goodput: the uTP payload it receives from the seeder's port, counted by an
//! iptables rule in its namespace (jumping to the empty chain [`COUNT_CHAIN`]) every [`POLL_S`]:
//! IP bytes minus [`UTP_HEADERS`] per packet, as interval series like iperf3's ([`TorrentRun`]).
//! Not Transmission's own `downloadedEver` over RPC: it moves in bursts (up to 150 Mbit/s in one
//! 0.5 s poll and near 0 in the next on a 50 Mbit/s link) and the RPC answers late when the
//! daemon is busy, so a 10 s window could be off by a tenth. BitTorrent's framing (13 bytes per
//! 16 KiB block) is not taken off: 0.08 %.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::iperf::{Interval, IperfResult};
use crate::{cmd, Ns, Testbed};

/// The seeder's peer port (TCP refused, UDP = uTP).
pub const SEED_PORT: u16 = 51413;
/// The leechers' peer port.
pub const LEECH_PORT: u16 = 51414;
/// The tracker's port (HTTP over TCP, and UDP).
pub const TRACKER_PORT: u16 = 6969;
/// How often the leecher's byte count is polled, s.
pub const POLL_S: f64 = 0.5;
const RPC_URL: &str = "http://127.0.0.1:9091/transmission/rpc";
/// The chain the leecher's counting rule jumps to (empty: packets return at once).
pub const COUNT_CHAIN: &str = "ss-utp";
/// Header bytes of a uTP packet on the wire above its payload: IPv4 20, UDP 8, uTP 20.
pub const UTP_HEADERS: u64 = 48;

/// One peer's Transmission daemon: its namespace and its RPC session id.
#[derive(Debug)]
pub struct Peer {
    ns_name: String,
    dir: PathBuf,
    session: Mutex<String>,
}

/// A swarm: tracker and seeder running; leechers join with [`Testbed::start_leecher`] and
/// [`Swarm::start_download`].
#[derive(Debug)]
pub struct Swarm {
    dir: PathBuf,
    torrent: PathBuf,
    /// The torrent's info hash, hex.
    pub info_hash: String,
    /// The shared file's size, bytes.
    pub file_bytes: u64,
    seeder: Peer,
}

/// One of the peers a leecher is connected to.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerLink {
    pub address: String,
    pub port: u16,
    pub is_utp: bool,
}

/// A leecher's counters at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct LeechStats {
    /// Payload bytes received so far.
    pub downloaded: u64,
    /// The fraction of the file it has, 0-1.
    pub percent_done: f64,
    pub peers: Vec<PeerLink>,
}

impl LeechStats {
    /// From a `torrent-get` answer with one torrent.
    pub fn from_rpc(v: &Value) -> Result<LeechStats> {
        let t = v
            .pointer("/arguments/torrents/0")
            .ok_or_else(|| anyhow!("torrent-get returned no torrent: {v}"))?;
        let peers = t
            .get("peers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .map(|p| PeerLink {
                address: p.get("address").and_then(Value::as_str).unwrap_or("").into(),
                port: p.get("port").and_then(Value::as_u64).unwrap_or(0) as u16,
                is_utp: p.get("isUTP").and_then(Value::as_bool).unwrap_or(false),
            })
            .collect();
        Ok(LeechStats {
            downloaded: t.get("downloadedEver").and_then(Value::as_u64).unwrap_or(0),
            percent_done: t.get("percentDone").and_then(Value::as_f64).unwrap_or(0.0),
            peers,
        })
    }
}

/// Transmission's settings for a peer on `addr`:`port`, data in `data_dir`.
pub fn daemon_settings(addr: &str, port: u16, data_dir: &Path) -> Value {
    json!({
        "bind-address-ipv4": addr,
        "peer-port": port,
        "peer-port-random-on-start": false,
        "utp-enabled": true,
        "dht-enabled": false,
        "lpd-enabled": false,
        "pex-enabled": false,
        "port-forwarding-enabled": false,
        "blocklist-enabled": false,
        "encryption": 1,
        "download-dir": data_dir,
        "incomplete-dir-enabled": false,
        "rename-partial-files": false,
        "preallocation": 0,
        "cache-size-mb": 16,
        "download-queue-enabled": false,
        "seed-queue-enabled": false,
        "queue-stalled-enabled": false,
        "ratio-limit-enabled": false,
        "idle-seeding-limit-enabled": false,
        "speed-limit-down-enabled": false,
        "speed-limit-up-enabled": false,
        "alt-speed-enabled": false,
        "start-added-torrents": true,
        "message-level": 1,
        "rpc-enabled": true,
        "rpc-bind-address": "127.0.0.1",
        "rpc-port": 9091,
        "rpc-whitelist-enabled": false,
        "rpc-host-whitelist-enabled": false,
        "rpc-authentication-required": false,
    })
}

/// Writes `bytes` of pseudo-random data (xorshift: incompressible, no entropy wasted) to `path`.
pub fn write_random_file(path: &Path, bytes: u64, seed: u64) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let mut x = seed | 1;
    let mut left = bytes;
    let mut block = [0u8; 8192];
    while left > 0 {
        for chunk in block.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(block.len() as u64) as usize;
        w.write_all(&block[..n])?;
        left -= n as u64;
    }
    w.flush()?;
    Ok(())
}

impl Peer {
    /// An RPC call (curl in the peer's namespace), handling the session id handshake (409).
    pub fn rpc(&self, method: &str, arguments: Value) -> Result<Value> {
        let body = json!({"method": method, "arguments": arguments}).to_string();
        for _ in 0..2 {
            let session = self.session.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let header = format!("X-Transmission-Session-Id: {session}");
            let args = ["curl", "-s", "-m", "5", "-i", "-H", &header, "-d", &body, RPC_URL];
            let out = cmd::run_command(cmd::netns_exec(&self.ns_name, &args))?;
            let (head, answer) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
            if head.contains(" 409 ") {
                let id = head
                    .lines()
                    .find_map(|l| l.strip_prefix("X-Transmission-Session-Id: "))
                    .ok_or_else(|| anyhow!("409 without a session id"))?;
                *self.session.lock().unwrap_or_else(|e| e.into_inner()) = id.trim().to_string();
                continue;
            }
            let v: Value = serde_json::from_str(answer)
                .with_context(|| format!("{method}: answer is not JSON: {out}"))?;
            if v.get("result").and_then(Value::as_str) != Some("success") {
                bail!("{method} failed: {v}");
            }
            return Ok(v);
        }
        bail!("{method}: no session id accepted")
    }

    /// The one torrent's fields `fields`.
    fn torrent_get(&self, fields: &[&str]) -> Result<Value> {
        self.rpc("torrent-get", json!({"fields": fields}))
    }
}

impl Testbed {
    /// Starts a Transmission daemon in `ns` on `addr`:`port` with its state under `dir`,
    /// refusing TCP to `port` (uTP only); waits for its RPC.
    fn start_transmission(&self, ns: Ns, addr: &str, port: u16, dir: &Path) -> Result<Peer> {
        let (conf, data) = (dir.join("config"), dir.join("data"));
        std::fs::create_dir_all(&conf)?;
        std::fs::create_dir_all(&data)?;
        std::fs::write(
            conf.join("settings.json"),
            daemon_settings(addr, port, &data).to_string(),
        )?;
        let p = port.to_string();
        self.run_in(
            ns,
            &[
                "iptables-legacy",
                "-w",
                "-A",
                "INPUT",
                "-p",
                "tcp",
                "--dport",
                &p,
                "-j",
                "REJECT",
                "--reject-with",
                "tcp-reset",
            ],
        )?;
        let conf_s = conf.to_string_lossy().to_string();
        self.spawn_owned(
            ns,
            &format!("transmission-{}", ns.suffix()),
            &["transmission-daemon", "-f", "-g", &conf_s],
        )?;
        let peer = Peer {
            ns_name: self.ns_name(ns),
            dir: data,
            session: Mutex::new(String::new()),
        };
        let up = cmd::wait_until(Duration::from_secs(10), || {
            peer.rpc("session-get", json!({})).is_ok()
        });
        if !up {
            bail!(
                "transmission-daemon in {} did not answer its RPC within 10 s",
                peer.ns_name
            );
        }
        Ok(peer)
    }

    /// Makes a random file of `file_bytes` and its torrent under `dir`, starts the tracker and
    /// the seeder on server `server` and waits until the seeder has checked the file and seeds.
    pub fn start_swarm(&self, dir: &Path, server: u8, file_bytes: u64) -> Result<Swarm> {
        std::fs::create_dir_all(dir)?;
        let seed_dir = dir.join("seed");
        std::fs::create_dir_all(seed_dir.join("data"))?;
        let file = seed_dir.join("data").join("payload.bin");
        write_random_file(&file, file_bytes, 0x5eed_0000 + u64::from(server))?;
        let srv = self.server_addr_of(server, false).to_string();
        let announce = format!("http://{srv}:{TRACKER_PORT}/announce");
        let torrent = dir.join("payload.torrent");
        let (t, f) = (
            torrent.to_string_lossy().to_string(),
            file.to_string_lossy().to_string(),
        );
        cmd::run(
            "transmission-create",
            &["-o", &t, "-s", "256", "-t", &announce, &f],
        )?;
        let show = cmd::run_command({
            let mut c = std::process::Command::new("transmission-show");
            c.arg(&t);
            c
        })?;
        let info_hash = show
            .lines()
            .find_map(|l| l.trim().strip_prefix("Hash: "))
            .map(|h| h.trim().to_lowercase())
            .ok_or_else(|| anyhow!("no hash in transmission-show's output:\n{show}"))?;
        // The tracker, chrooted to `dir`: its whitelist path is inside the chroot.
        let tracker_dir = dir.join("tracker");
        std::fs::create_dir_all(&tracker_dir)?;
        std::fs::write(tracker_dir.join("whitelist"), format!("{info_hash}\n"))?;
        let (td, tp) = (
            tracker_dir.to_string_lossy().to_string(),
            TRACKER_PORT.to_string(),
        );
        let ns = Ns::server(server);
        self.spawn_owned(
            ns,
            "opentracker",
            &[
                "opentracker",
                "-i",
                &srv,
                "-p",
                &tp,
                "-P",
                &tp,
                "-d",
                &td,
                "-w",
                "/whitelist",
            ],
        )?;
        let filter = format!("sport = :{TRACKER_PORT}");
        if !cmd::wait_until(Duration::from_secs(5), || {
            self.run_in(ns, &["ss", "-Hltn", &filter])
                .is_ok_and(|o| !o.trim().is_empty())
        }) {
            bail!("opentracker not listening on {srv}:{TRACKER_PORT} after 5 s");
        }
        let seeder = self.start_transmission(ns, &srv, SEED_PORT, &seed_dir)?;
        seeder.rpc("torrent-add", json!({"filename": t, "download-dir": seeder.dir}))?;
        let seeding = cmd::wait_until(Duration::from_secs(120), || {
            seeder
                .torrent_get(&["percentDone", "status"])
                .is_ok_and(|v| v.pointer("/arguments/torrents/0/status").and_then(Value::as_u64) == Some(6))
        });
        if !seeding {
            bail!("the seeder did not check its file and seed within 120 s");
        }
        // A leecher that announces before the seeder has is told of no peer, and asks again only
        // at the tracker's interval (opentracker: 30 min): wait for the seeder's announce.
        let announced = || {
            cmd::wait_until(Duration::from_secs(15), || {
                seeder.torrent_get(&["trackerStats"]).is_ok_and(|v| {
                    v.pointer("/arguments/torrents/0/trackerStats/0/lastAnnounceSucceeded")
                        .and_then(Value::as_bool)
                        == Some(true)
                })
            })
        };
        if !announced() {
            seeder.rpc("torrent-reannounce", json!({}))?;
            if !announced() {
                bail!("the seeder's announce to the tracker did not succeed within 30 s");
            }
        }
        Ok(Swarm {
            dir: dir.to_path_buf(),
            torrent,
            info_hash,
            file_bytes,
            seeder,
        })
    }

    /// Starts a leecher on LAN host `client` (its daemon, not yet the torrent) and the rule
    /// counting what it receives from the seeder's port.
    pub fn start_leecher(&self, swarm: &Swarm, client: u8) -> Result<Peer> {
        let addr = self.client_addr_of(client, false).to_string();
        let dir = swarm.dir.join(format!("leech{client}"));
        let ns = Ns::client(client);
        let sport = SEED_PORT.to_string();
        self.run_in(ns, &["iptables-legacy", "-w", "-N", COUNT_CHAIN])?;
        self.run_in(
            ns,
            &[
                "iptables-legacy",
                "-w",
                "-I",
                "INPUT",
                "-p",
                "udp",
                "--sport",
                &sport,
                "-j",
                COUNT_CHAIN,
            ],
        )?;
        self.start_transmission(ns, &addr, LEECH_PORT, &dir)
    }
}

impl Swarm {
    /// The seeder's daemon.
    pub fn seeder(&self) -> &Peer {
        &self.seeder
    }

    /// Adds the torrent to `leecher` (it starts downloading at once) and returns a run that
    /// polls its counters until [`TorrentRun::wait`]. At most `seconds`: then the torrent is
    /// stopped.
    pub fn start_download(&self, leecher: Peer, seconds: f64) -> Result<TorrentRun> {
        let t = self.torrent.to_string_lossy().to_string();
        leecher.rpc("torrent-add", json!({"filename": t, "download-dir": leecher.dir}))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let handle = std::thread::spawn(move || poll_leecher(leecher, seconds, &stop2));
        Ok(TorrentRun {
            handle: Some(handle),
            stop,
        })
    }
}

/// A leecher downloading; [`TorrentRun::wait`] gives its series.
pub struct TorrentRun {
    handle: Option<JoinHandle<Result<TorrentResult>>>,
    stop: Arc<AtomicBool>,
}

/// What a leecher got.
#[derive(Debug, Clone)]
pub struct TorrentResult {
    /// Its goodput series, [`POLL_S`] intervals from the torrent's start.
    pub intervals: Vec<Interval>,
    /// Its peers at the last poll with data (uTP or not).
    pub peers: Vec<PeerLink>,
    /// Whether it had the whole file before the end.
    pub completed: bool,
}

impl TorrentResult {
    /// As an [`IperfResult`] (goodput over the series; no retransmit count).
    pub fn into_iperf(self) -> IperfResult {
        let (bytes, secs) = self
            .intervals
            .iter()
            .fold((0u64, 0.0), |(b, s), iv| (b + iv.bytes, s + (iv.end - iv.start)));
        let peers: Vec<Value> = self
            .peers
            .iter()
            .map(|p| json!({"address": p.address, "port": p.port, "utp": p.is_utp}))
            .collect();
        IperfResult {
            goodput_mbps: if secs > 0.0 {
                bytes as f64 * 8.0 / secs / 1e6
            } else {
                0.0
            },
            intervals: self.intervals,
            local_port: None,
            remote_port: None,
            retransmits: None,
            raw: json!({"peers": peers, "completed": self.completed}),
        }
    }
}

impl TorrentRun {
    /// Stops polling (the leecher keeps its data) and returns the series.
    pub fn wait(mut self) -> Result<TorrentResult> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .expect("handle until wait")
            .join()
            .map_err(|_| anyhow!("the leecher's poller panicked"))?
    }

    /// Waits until the poller ends by itself (its `seconds` are up) and returns the series.
    pub fn finish(mut self) -> Result<TorrentResult> {
        self.handle
            .take()
            .expect("handle until wait")
            .join()
            .map_err(|_| anyhow!("the leecher's poller panicked"))?
    }
}

impl Drop for TorrentRun {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// uTP payload bytes received from the seeder so far: the counting rule's IP bytes minus
/// [`UTP_HEADERS`] per packet.
fn utp_payload(ns_name: &str) -> Result<u64> {
    let args = ["iptables-legacy", "-w", "-L", "INPUT", "-v", "-n", "-x"];
    let out = cmd::run_command(cmd::netns_exec(ns_name, &args))?;
    let (packets, bytes) = cmd::chain_jump_counters(&out, COUNT_CHAIN)
        .ok_or_else(|| anyhow!("no rule jumps to {COUNT_CHAIN} in {ns_name}:\n{out}"))?;
    Ok(bytes.saturating_sub(packets * UTP_HEADERS))
}

/// Polls `leecher`'s counter every [`POLL_S`] (its RPC every 2 s, for its peers) for
/// `seconds` (or until `stop`), then stops its torrent.
fn poll_leecher(leecher: Peer, seconds: f64, stop: &AtomicBool) -> Result<TorrentResult> {
    let fields = ["downloadedEver", "percentDone", "peers"];
    let start = Instant::now();
    let first = utp_payload(&leecher.ns_name)?;
    let (mut intervals, mut last, mut peers, mut completed) = (Vec::new(), first, Vec::new(), false);
    let mut next = POLL_S;
    let mut polls = 0u32;
    while next <= seconds + 1e-9 && !stop.load(Ordering::Relaxed) {
        let wait = next - start.elapsed().as_secs_f64();
        if wait > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(wait));
        }
        let now = start.elapsed().as_secs_f64();
        let total = utp_payload(&leecher.ns_name)?;
        let bytes = total.saturating_sub(last);
        last = total;
        let begin = intervals.last().map_or(0.0, |iv: &Interval| iv.end);
        let bits_per_second = if now > begin {
            bytes as f64 * 8.0 / (now - begin)
        } else {
            0.0
        };
        intervals.push(Interval {
            start: begin,
            end: now,
            bytes,
            bits_per_second,
            omitted: false,
        });
        polls += 1;
        if polls.is_multiple_of(4) {
            let s = LeechStats::from_rpc(&leecher.torrent_get(&fields)?)?;
            if !s.peers.is_empty() {
                peers = s.peers;
            }
            completed |= s.percent_done >= 1.0;
        }
        next += POLL_S;
    }
    let _ = leecher.rpc("torrent-stop", json!({}));
    Ok(TorrentResult {
        intervals,
        peers,
        completed,
    })
}

#[cfg(test)]
#[path = "torrent_tests.rs"]
mod tests;
