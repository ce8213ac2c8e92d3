//! `slipstream-quic`: a QUIC bulk transfer between two testbed hosts (issue 24).
//!
//! Why it exists: background QUIC flows (game launchers, OS updates over HTTP/3) are UDP with
//! their own congestion control; the lab must see what a real QUIC stack does beside TCP and
//! under Slipstream's per-flow policer. quinn is the QUIC implementation: pure Rust on tokio
//! (which the daemon already uses), RFC 9000/9002 loss recovery, NewReno / CUBIC / BBR
//! selectable per connection, and its path statistics (lost and sent packets, congestion events,
//! RTT) are public API. TLS is rustls with ring only; the server makes a self-signed certificate
//! at start (rcgen), which the client accepts without checking: a test tool on a testbed.
//!
//! The protocol: the client opens one bidirectional stream and writes one request line,
//! `download <seconds>\n` or `upload <cc>\n`. A download: the server writes zeros as fast as
//! flow and congestion control allow for `<seconds>`, resets the stream, and sends its path
//! statistics as JSON on a unidirectional stream. An upload: the client writes for `--seconds`
//! and resets the stream; the server counts what arrives and answers with its receiver series as
//! JSON on a unidirectional stream. A reset (not a finish) drops what the sender still buffers,
//! up to its 16 MiB window, instead of draining it after the transfer's length. (A first version
//! ended downloads with the client's STOP_SENDING: the server's writer never saw it, at 10 Mbit/s
//! in the testbed as on loopback, so each side now ends what it sends itself.) The receiver
//! counts bytes in 0.1 s intervals from the request (download) or the first byte (upload). The
//! congestion control is the sender's: the server's `--cc` for downloads, the client's for uploads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use serde_json::Value;
use slipstream_testbed::quic::{IntervalCounter, PathStats, QuicResult, INTERVAL_S};

/// ALPN of the bulk protocol above.
const ALPN: &[u8] = b"slipstream-bulk";
/// The name in the self-signed certificate (the client does not check it).
const SERVER_NAME: &str = "slipstream-quic";
/// Bytes per write of the sender.
const CHUNK: usize = 64 * 1024;
/// Flow-control windows, bytes: far above the largest BDP plus queue the lab uses (50 Mbit/s ×
/// 20 ms + 5 BDP = 750 kB), so congestion control, not flow control, limits the sender (as
/// TCP's 8 MiB buffers in the testbed).
const WINDOW: u32 = 16 * 1024 * 1024;
/// Most a summary JSON may be.
const SUMMARY_MAX: usize = 1 << 20;

#[derive(Parser, Debug)]
#[command(
    name = "slipstream-quic",
    about = "QUIC bulk transfer for the testbed (quinn)"
)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Serve transfers until killed.
    Server {
        /// UDP address to listen on.
        #[arg(long)]
        listen: SocketAddr,
        /// Congestion control of the server's sending (downloads).
        #[arg(long, value_enum, default_value_t = Cc::Cubic)]
        cc: Cc,
    },
    /// One transfer.
    Client {
        /// The server's UDP address.
        #[arg(long)]
        connect: SocketAddr,
        /// Length of the transfer, s.
        #[arg(long)]
        seconds: f64,
        /// The server sends (default).
        #[arg(long, conflicts_with = "upload")]
        download: bool,
        /// The client sends.
        #[arg(long)]
        upload: bool,
        /// Congestion control of the client's sending (uploads). For a download the server's
        /// `--cc` applies: asking for another one is an error.
        #[arg(long, value_enum)]
        cc: Option<Cc>,
        /// Print the result as JSON (else one line of text).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Cc {
    Cubic,
    Newreno,
    Bbr,
}

impl Cc {
    fn name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Newreno => "newreno",
            Cc::Bbr => "bbr",
        }
    }
}

fn transport(cc: Cc) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(WINDOW.into())
        .receive_window(WINDOW.into())
        .send_window(u64::from(WINDOW))
        .max_idle_timeout(Some(Duration::from_secs(30).try_into().expect("30 s fits")))
        .keep_alive_interval(Some(Duration::from_secs(5)))
        // One datagram per packet on the wire, as the testbed's veths (no GSO batches).
        .enable_segmentation_offload(false);
    match cc {
        Cc::Cubic => t.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default())),
        Cc::Newreno => t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default())),
        Cc::Bbr => t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default())),
    };
    Arc::new(t)
}

fn path_stats(conn: &quinn::Connection) -> PathStats {
    let p = conn.stats().path;
    PathStats {
        rtt_ms: p.rtt.as_secs_f64() * 1e3,
        min_rtt_ms: p.min_rtt.as_secs_f64() * 1e3,
        cwnd: p.cwnd,
        congestion_events: p.congestion_events,
        lost_packets: p.lost_packets,
        lost_bytes: p.lost_bytes,
        sent_packets: p.sent_packets,
        current_mtu: u64::from(p.current_mtu),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_config(cc: Cc) -> Result<quinn::ServerConfig> {
    let cert =
        rcgen::generate_simple_self_signed(vec![SERVER_NAME.into()]).context("making a certificate")?;
    let key = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key.into())?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls)?));
    cfg.transport_config(transport(cc));
    Ok(cfg)
}

/// Accepts the server's self-signed certificate (signatures are still checked).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn client_config(cc: Cc) -> Result<quinn::ClientConfig> {
    let p = provider();
    let mut tls = rustls::ClientConfig::builder_with_provider(p.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(p)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let mut cfg = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls)?));
    cfg.transport_config(transport(cc));
    Ok(cfg)
}

/// Writes zeros to `send` until `deadline` (`None`: until the peer stops the stream).
async fn send_bulk(send: &mut quinn::SendStream, deadline: Option<tokio::time::Instant>) -> Result<()> {
    let buf = vec![0u8; CHUNK];
    loop {
        // (A timeout only fires when its future is pending; a fast path never is.)
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            return Ok(());
        }
        let write = send.write_all(&buf);
        let done = match deadline {
            Some(d) => match tokio::time::timeout_at(d, write).await {
                Ok(r) => r,
                Err(_) => return Ok(()),
            },
            None => write.await,
        };
        match done {
            // Let the connection's driver (same thread) take the peer's frames in while the
            // send buffer still has room.
            Ok(()) => tokio::task::yield_now().await,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reads `recv` into `counter` (clock from `start`) until the stream ends or `deadline`.
async fn count_bulk(
    recv: &mut quinn::RecvStream,
    counter: &mut IntervalCounter,
    start: Instant,
    deadline: Option<tokio::time::Instant>,
) -> Result<()> {
    loop {
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            return Ok(());
        }
        let read = recv.read_chunk(usize::MAX, true);
        let chunk = match deadline {
            Some(d) => match tokio::time::timeout_at(d, read).await {
                Ok(r) => r?,
                Err(_) => return Ok(()),
            },
            None => read.await?,
        };
        match chunk {
            Some(c) => counter.add(start.elapsed().as_secs_f64(), c.bytes.len() as u64),
            None => return Ok(()),
        }
    }
}

/// Whether `e` is the peer's reset of the stream: how a transfer ends at its length.
fn is_reset(e: &anyhow::Error) -> bool {
    e.downcast_ref::<quinn::ReadError>()
        .is_some_and(|r| matches!(r, quinn::ReadError::Reset(_)))
}

async fn serve(conn: quinn::Connection, cc: Cc) -> Result<()> {
    let (mut send, mut recv) = conn.accept_bi().await?;
    // The request line; what follows it in the same chunk is already upload data.
    let (start, mut counter) = (Instant::now(), IntervalCounter::new(INTERVAL_S));
    let mut line = Vec::new();
    let newline = loop {
        if let Some(i) = line.iter().position(|&b| b == b'\n') {
            break i;
        }
        if line.len() > 256 {
            bail!("request line too long");
        }
        match recv.read_chunk(usize::MAX, true).await? {
            Some(c) => line.extend_from_slice(&c.bytes),
            None => bail!("request ended early"),
        }
    };
    counter.add(0.0, (line.len() - newline - 1) as u64);
    line.truncate(newline);
    let request = String::from_utf8_lossy(&line).trim().to_string();
    let summary = match request.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["download", seconds] => {
            let seconds: f64 = seconds
                .parse()
                .with_context(|| format!("bad length in {request:?}"))?;
            let deadline =
                tokio::time::Instant::now() + Duration::from_secs_f64(seconds.clamp(0.0, 86_400.0));
            send_bulk(&mut send, Some(deadline)).await?;
            // What is still buffered is dropped: the transfer ends at its length.
            let _ = send.reset(0u32.into());
            serde_json::json!({"cc": cc.name(), "path": path_stats(&conn).to_json()})
        }
        ["upload", their_cc] => {
            // The client resets the stream at its length (dropping what it still buffered).
            match count_bulk(&mut recv, &mut counter, start, None).await {
                Ok(()) => {}
                Err(e) if is_reset(&e) => {}
                Err(e) => return Err(e),
            }
            let end = start.elapsed().as_secs_f64();
            // Count from the first byte: trim the empty intervals before it.
            let ivs = counter.intervals(end);
            let first = ivs.iter().position(|iv| iv.bytes > 0).unwrap_or(0);
            let shift = ivs.get(first).map_or(0.0, |iv| iv.start);
            let ivs: Vec<_> = ivs[first..]
                .iter()
                .map(|iv| slipstream_testbed::Interval {
                    start: iv.start - shift,
                    end: iv.end - shift,
                    ..iv.clone()
                })
                .collect();
            QuicResult::to_json("upload", their_cc, end - shift, &ivs, &PathStats::default())
        }
        _ => bail!("unknown request {request:?}"),
    };
    let mut uni = conn.open_uni().await?;
    uni.write_all(summary.to_string().as_bytes()).await?;
    uni.finish()?;
    // The client closes the connection once it has read the summary.
    let _ = tokio::time::timeout(Duration::from_secs(10), conn.closed()).await;
    Ok(())
}

async fn server(listen: SocketAddr, cc: Cc) -> Result<()> {
    let endpoint = quinn::Endpoint::server(server_config(cc)?, listen)
        .with_context(|| format!("binding UDP {listen}"))?;
    println!("ready");
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(async move {
            let peer = incoming.remote_address();
            let result = async { serve(incoming.await?, cc).await }.await;
            if let Err(e) = result {
                eprintln!("slipstream-quic server: {peer}: {e:#}");
            }
        });
    }
    Ok(())
}

async fn client(connect: SocketAddr, seconds: f64, download: bool, cc: Option<Cc>) -> Result<Value> {
    let bind: SocketAddr = if connect.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse()?;
    let mut endpoint = quinn::Endpoint::client(bind).context("binding the client socket")?;
    endpoint.set_default_client_config(client_config(cc.unwrap_or(Cc::Cubic))?);
    let conn = endpoint
        .connect(connect, SERVER_NAME)?
        .await
        .with_context(|| format!("connecting to {connect}"))?;
    let (mut send, mut recv) = conn.open_bi().await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(seconds);
    let result = if download {
        send.write_all(format!("download {seconds}\n").as_bytes()).await?;
        let (start, mut counter) = (Instant::now(), IntervalCounter::new(INTERVAL_S));
        // The server ends the stream after `seconds` (a reset drops what it still buffered);
        // the grace bounds a server that never does.
        let grace = deadline + Duration::from_secs(10);
        match count_bulk(&mut recv, &mut counter, start, Some(grace)).await {
            Ok(()) => {}
            Err(e)
                if e.downcast_ref::<quinn::ReadError>()
                    .is_some_and(|r| matches!(r, quinn::ReadError::Reset(_))) => {}
            Err(e) => return Err(e),
        }
        let end = start.elapsed().as_secs_f64();
        if tokio::time::Instant::now() >= grace {
            bail!("the server did not end the download within 10 s of its length");
        }
        let summary = read_summary(&conn).await?;
        let server_cc = summary
            .get("cc")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        if let Some(asked) = cc.filter(|c| c.name() != server_cc) {
            bail!(
                "asked for {} but the server sends with {server_cc} (its --cc)",
                asked.name()
            );
        }
        let path = PathStats::from_json(
            summary
                .get("path")
                .ok_or_else(|| anyhow!("summary without path"))?,
        )?;
        QuicResult::to_json("download", &server_cc, end, &counter.intervals(end), &path)
    } else {
        let cc = cc.unwrap_or(Cc::Cubic);
        send.write_all(format!("upload {}\n", cc.name()).as_bytes())
            .await?;
        send_bulk(&mut send, Some(deadline)).await?;
        // Up to a send window of data may still be buffered: dropped, not drained (at
        // 10 Mbit/s 16 MiB would take 13 s more).
        let _ = send.reset(0u32.into());
        let mut summary = read_summary(&conn).await?;
        summary["path"] = path_stats(&conn).to_json();
        summary["loss_rate"] = path_stats(&conn).loss_rate().into();
        summary
    };
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    Ok(result)
}

async fn read_summary(conn: &quinn::Connection) -> Result<Value> {
    let mut uni = tokio::time::timeout(Duration::from_secs(30), conn.accept_uni())
        .await
        .context("no summary from the server within 30 s")??;
    let text = uni.read_to_end(SUMMARY_MAX).await?;
    serde_json::from_slice(&text).context("the server's summary is not JSON")
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match args.cmd {
        Cmd::Server { listen, cc } => rt.block_on(server(listen, cc)),
        Cmd::Client {
            connect,
            seconds,
            download: _,
            upload,
            cc,
            json,
        } => {
            if !(seconds.is_finite() && seconds > 0.0) {
                bail!("--seconds must be positive, got {seconds}");
            }
            let v = match rt.block_on(client(connect, seconds, !upload, cc)) {
                Ok(v) => v,
                Err(e) if json => serde_json::json!({"error": format!("{e:#}")}),
                Err(e) => return Err(e),
            };
            if json {
                println!("{v}");
            } else {
                let r = QuicResult::parse(&v.to_string())?;
                println!(
                    "{} {:.2} Mbit/s, {} bytes in {:.2} s; sender ({}): {} of {} packets lost ({:.3}%), {} congestion events, RTT {:.1} ms",
                    r.mode,
                    r.goodput_bps() / 1e6,
                    r.bytes,
                    r.seconds,
                    r.cc,
                    r.path.lost_packets,
                    r.path.sent_packets,
                    r.path.loss_rate().unwrap_or(0.0) * 100.0,
                    r.path.congestion_events,
                    r.path.rtt_ms
                );
            }
            if v.get("error").is_some() {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}
