//! The link-delay prober: ICMP echo requests to a reflector beyond the access link, for the
//! engine's household control while the link carries flows nothing else times (QUIC: encrypted,
//! no timestamps). The reflector's round-trip time is the link's base delay plus its queueing
//! delay, as cake-autorate and sqm-autorate measure it.
//!
//! The engine decides when and how often ([`Engine::probe_interval`]; the loop asks every turn,
//! and `None` sends nothing); this shell sends, receives, timestamps and hands each answer to
//! [`Engine::on_probe_sample`]. It runs on the packet thread and never waits there: the socket
//! is non-blocking, a turn reads at most [`MAX_REPLIES_PER_TURN`] replies and only while probes
//! wait for one, and the receive time is the kernel's stamp (`SO_TIMESTAMPNS`, carried onto the
//! engine's clock as the NFQUEUE datapath carries its packets', `kernel_time`), so the time a
//! reply waits for the loop does not count.
//!
//! The target is `household.probe`: the default route's gateway ("auto", looked up again every
//! [`RESOLVE_EVERY`] while probing, so a PPPoE session or DHCP lease that changes it is
//! followed), an address, or "off". Sockets are opened at the first probe of their family and
//! kept; a socket that cannot be opened is said once and tried again at the next target change.

mod echo;
mod gateway;
mod outstanding;
mod socket;
mod timestamp;

use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use slipstream_config::ProbeTarget;
use slipstream_control::{Duration, Instant};
use slipstream_engine::OneWayDelays;
use slipstream_metrics::ProbeCounters;
use tracing::{debug, info, warn};

use crate::clock::MonotonicClock;
use crate::kernel_time;
use echo::our_reply;
use gateway::Gateway;
use outstanding::Outstanding;
use socket::EchoSocket;

/// How often "auto" looks the gateway up again while probing.
pub(crate) const RESOLVE_EVERY: Duration = Duration::from_secs(10);
/// Most replies read in one loop turn (more wait for the next turn, a few hundred µs later).
pub(crate) const MAX_REPLIES_PER_TURN: usize = 16;
/// Timestamp requests lost (unanswered for `outstanding::LOST_AFTER`) before any was answered:
/// the target does not answer them (a firewall that passes only echoes), echoes from then on.
pub(crate) const TIMESTAMP_TRIES: u32 = 10;

/// Whether the target answers ICMP timestamp requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timestamps {
    /// Not yet known: this many lost without an answer.
    Trying(u32),
    Answered,
    Refused,
}

/// Where the probes go now.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Resolved {
    /// Not looked up yet (or the setting changed).
    Unknown,
    /// No target: "off", or "auto" without a default gateway.
    None,
    /// This address (with its scope for a link-local IPv6 gateway), and how it was chosen.
    To(SocketAddr, String),
}

pub(crate) struct Prober {
    setting: ProbeTarget,
    target: Resolved,
    resolved_at: Option<Instant>,
    v4: Option<EchoSocket>,
    v6: Option<EchoSocket>,
    /// A socket of this family could not be opened (said once, until the target changes).
    failed_v4: bool,
    failed_v6: bool,
    outstanding: Outstanding,
    /// The identifier raw sockets send (unprivileged ones get the kernel's).
    id: u16,
    /// Drawn at start: replies to an earlier run's probes are not ours.
    cookie: [u8; 8],
    next_seq: u16,
    /// When the last probe was due (sent, or not for want of a target or socket).
    last_sent: Option<Instant>,
    /// Since when the engine has wanted probes, and how many were sent since (a debug line
    /// when it stops: how long each spell of probing lasts).
    wanted_since: Option<(Instant, u64)>,
    /// A send failed since the last one that went out (said once).
    send_failing: bool,
    counters: Arc<ProbeCounters>,
    timestamps: Timestamps,
    scratch: [u8; 128],
}

impl Prober {
    pub(crate) fn new(setting: ProbeTarget, counters: Arc<ProbeCounters>) -> Prober {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let seed = (u64::from(std::process::id()) << 32) ^ now.as_nanos() as u64;
        counters.set_target(unresolved(setting));
        Prober {
            setting,
            target: Resolved::Unknown,
            resolved_at: None,
            v4: None,
            v6: None,
            failed_v4: false,
            failed_v6: false,
            outstanding: Outstanding::default(),
            id: std::process::id() as u16,
            cookie: seed.to_be_bytes(),
            next_seq: 0,
            last_sent: None,
            wanted_since: None,
            send_failing: false,
            counters,
            timestamps: Timestamps::Trying(0),
            scratch: [0; 128],
        }
    }

    /// A reload's `household.probe`. Probes waiting for the old target are dropped (as lost).
    pub(crate) fn reconfigure(&mut self, setting: ProbeTarget) {
        if setting == self.setting {
            return;
        }
        self.setting = setting;
        self.retarget();
        self.counters.set_target(unresolved(setting));
    }

    /// How long the loop may sleep before the next probe is due (`None`: none wanted).
    pub(crate) fn until_due(&self, interval: Option<Duration>, now: Instant) -> Option<Duration> {
        let interval = interval?;
        if self.setting == ProbeTarget::Off || self.target == Resolved::None && self.resolved_at.is_some() {
            return None;
        }
        Some(self.last_sent.map_or(Duration::ZERO, |t| {
            interval.saturating_sub(now.saturating_since(t))
        }))
    }

    /// One loop turn: the replies waiting go to `sample` (sent, received, and a timestamp
    /// reply's one-way halves), probes unanswered too long are counted lost, and one probe goes
    /// out if `interval` (the engine's `probe_interval`) says one is due.
    pub(crate) fn turn(
        &mut self,
        interval: Option<Duration>,
        clock: &MonotonicClock,
        mut sample: impl FnMut(Instant, Instant, Option<OneWayDelays>),
    ) {
        if !self.outstanding.is_empty() {
            self.receive(clock, &mut sample);
            let lost = self.outstanding.expire(clock.now());
            self.counters.lost.fetch_add(lost, Ordering::Relaxed);
            if let Timestamps::Trying(n) = &mut self.timestamps {
                *n = n.saturating_add(lost as u32);
            }
        }
        let sent_so_far = self.counters.sent.load(Ordering::Relaxed);
        match (interval, self.wanted_since) {
            (Some(_), None) => self.wanted_since = Some((clock.now(), sent_so_far)),
            (None, Some((since, sent_before))) => {
                self.wanted_since = None;
                debug!(
                    "link-delay probes: wanted for {:?}, {} sent",
                    clock.now().saturating_since(since),
                    sent_so_far - sent_before
                );
            }
            _ => {}
        }
        let Some(interval) = interval else { return };
        if self.setting == ProbeTarget::Off {
            return;
        }
        let now = clock.now();
        if self.last_sent.is_some_and(|t| now.saturating_since(t) < interval) {
            return;
        }
        // The slot is used even if no probe can go (no target, no socket): else the next one
        // would be due at once, and the loop would spin.
        self.last_sent = Some(now);
        if self
            .resolved_at
            .is_none_or(|t| now.saturating_since(t) >= RESOLVE_EVERY)
        {
            self.resolved_at = Some(now);
            self.resolve();
        }
        let Resolved::To(target, _) = self.target.clone() else {
            return;
        };
        self.send(target, clock);
    }

    /// Looks the target up ("auto": the default gateway now), and says so when it changes.
    fn resolve(&mut self) {
        let found = match self.setting {
            ProbeTarget::Off => Resolved::None,
            ProbeTarget::Address(ip) => Resolved::To(SocketAddr::new(ip, 0), ip.to_string()),
            ProbeTarget::Auto => match gateway::read_default_gateway() {
                Some(gateway) => {
                    let how = format!("{} (gateway via {})", gateway.address, gateway.interface);
                    Resolved::To(socket_address(&gateway), how)
                }
                None => Resolved::None,
            },
        };
        if found == self.target {
            return;
        }
        let first = self.target == Resolved::Unknown;
        self.retarget();
        match &found {
            Resolved::To(_, how) => {
                info!(
                    "link-delay probes: ICMP probes to {how}{}",
                    if first { "" } else { " (the target changed)" }
                );
                self.counters.set_target(how.clone());
            }
            _ => {
                warn!(
                    "link-delay probes: household.probe = \"auto\" but the router has no default route \
                     with a gateway (a point-to-point link such as PPPoE has none): no probes; flows \
                     nothing else times are held by the link's other measurements only. Set \
                     household.probe to a reflector's address beyond the access link"
                );
                self.counters.set_target("none: no default gateway".to_owned());
            }
        }
        self.target = found;
    }

    /// Forgets the target, its waiting probes (lost) and the socket failures.
    fn retarget(&mut self) {
        let dropped = self.outstanding.clear();
        self.counters.lost.fetch_add(dropped, Ordering::Relaxed);
        self.target = Resolved::Unknown;
        self.resolved_at = None;
        self.failed_v4 = false;
        self.failed_v6 = false;
        self.timestamps = Timestamps::Trying(0);
    }

    fn send(&mut self, target: SocketAddr, clock: &MonotonicClock) {
        let v6 = target.is_ipv6();
        let (socket, failed) = if v6 {
            (&mut self.v6, &mut self.failed_v6)
        } else {
            (&mut self.v4, &mut self.failed_v4)
        };
        if socket.is_none() && !*failed {
            match EchoSocket::open(v6) {
                Ok(s) => {
                    info!("link-delay probes: sending on an {}", s.kind());
                    *socket = Some(s);
                }
                Err(e) => {
                    *failed = true;
                    warn!(
                        "link-delay probes: cannot open an ICMP socket ({e}; an unprivileged one needs \
                         net.ipv4.ping_group_range to hold the daemon's group, a raw one CAP_NET_RAW): no probes to {target}"
                    );
                }
            }
        }
        let Some(socket) = socket.as_ref() else { return };
        let seq = self.next_seq;
        self.next_seq = seq.wrapping_add(1);
        // A timestamp request where the socket can send one and the target has not refused.
        if let Timestamps::Trying(n) = self.timestamps {
            if n >= TIMESTAMP_TRIES {
                self.timestamps = Timestamps::Refused;
                info!("link-delay probes: {target} answered none of {n} ICMP timestamp requests: echoes, round trips only");
            }
        }
        let of_day = (socket.sends_timestamps() && self.timestamps != Timestamps::Refused)
            .then(|| timestamp::micros_of_day(SystemTime::now()));
        let echo;
        let stamp;
        let message: &[u8] = match of_day {
            Some(of_day) => {
                stamp = timestamp::request(self.id, seq, of_day);
                &stamp
            }
            None => {
                echo = echo::request(target.ip(), self.id, seq, self.cookie);
                &echo
            }
        };
        let sent = clock.now();
        self.counters.sent.fetch_add(1, Ordering::Relaxed);
        match socket.send(target, message) {
            Ok(()) => {
                self.send_failing = false;
                let pushed_out = self.outstanding.sent(seq, sent, of_day);
                self.counters.lost.fetch_add(pushed_out, Ordering::Relaxed);
            }
            Err(e) => {
                self.counters.lost.fetch_add(1, Ordering::Relaxed);
                if !std::mem::replace(&mut self.send_failing, true) {
                    warn!("link-delay probes: sending to {target} failed ({e}); counted as lost, said again after one goes out");
                }
            }
        }
    }

    /// Reads the replies waiting (at most [`MAX_REPLIES_PER_TURN`]) and gives each of ours to
    /// `sample`.
    fn receive(
        &mut self,
        clock: &MonotonicClock,
        sample: &mut impl FnMut(Instant, Instant, Option<OneWayDelays>),
    ) {
        for socket in [self.v4.as_ref(), self.v6.as_ref()].into_iter().flatten() {
            for _ in 0..MAX_REPLIES_PER_TURN {
                let (len, stamp) = match socket.receive(&mut self.scratch) {
                    Ok(Some(received)) => received,
                    Ok(None) => break,
                    Err(e) => {
                        warn!("link-delay probes: receiving failed: {e}");
                        break;
                    }
                };
                let message = &self.scratch[..len];
                let answer = if let Some(reply) = socket
                    .sends_timestamps()
                    .then(|| timestamp::parse_reply(message, socket.framing, self.id))
                    .flatten()
                {
                    self.outstanding
                        .answered(reply.seq, |of_day| of_day.is_some_and(|d| reply.answers(d)))
                        .map(|(sent, of_day)| (sent, of_day.map(|d| (reply, d))))
                } else {
                    let id = (!socket.kernel_matches_id).then_some(self.id);
                    our_reply(message, socket.framing, socket.v6, id, self.cookie)
                        .and_then(|seq| self.outstanding.answered(seq, |of_day| of_day.is_none()))
                        .map(|(sent, _)| (sent, None))
                };
                let Some((sent, timestamp)) = answer else {
                    continue;
                };
                let wall = SystemTime::now();
                let now = clock.now();
                let received = stamp
                    .and_then(|stamp| kernel_time::arrival(stamp, wall, now))
                    .unwrap_or(now)
                    .max(sent);
                self.counters.answered.fetch_add(1, Ordering::Relaxed);
                let rtt = received.saturating_since(sent).as_micros() as u64;
                self.counters.last_rtt_us.store(rtt.max(1), Ordering::Relaxed);
                let halves = timestamp.and_then(|(reply, sent_of_day)| {
                    if self.timestamps != Timestamps::Answered {
                        self.timestamps = Timestamps::Answered;
                        info!("link-delay probes: ICMP timestamps answered: each link's one-way delay");
                    }
                    reply.halves(sent_of_day, timestamp::micros_of_day(stamp.unwrap_or(wall)))
                });
                sample(sent, received, halves);
            }
        }
    }
}

/// What `status` says of the target before the first probe looks it up.
fn unresolved(setting: ProbeTarget) -> String {
    match setting {
        ProbeTarget::Off => "off".to_owned(),
        ProbeTarget::Auto => "auto (the default gateway, looked up at the first probe)".to_owned(),
        ProbeTarget::Address(ip) => format!("{ip} (no probe yet)"),
    }
}

/// Where a gateway is sent to: a link-local IPv6 gateway with its interface as scope.
fn socket_address(gateway: &Gateway) -> SocketAddr {
    match gateway.address {
        IpAddr::V6(ip) if ip.is_unicast_link_local() => {
            let index = std::fs::read_to_string(format!("/sys/class/net/{}/ifindex", gateway.interface))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            SocketAddr::V6(SocketAddrV6::new(ip, 0, 0, index))
        }
        ip => SocketAddr::new(ip, 0),
    }
}
