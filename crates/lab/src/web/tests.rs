//! Tests of the web load generator.

use super::*;

#[test]
fn clamped_mean_formula() {
    // Unclamped limit: a·xm/(a−1).
    let m = clamped_pareto_mean(2000.0, 1.2, 1e30);
    assert!((m - 12_000.0).abs() < 0.1, "{m}");
    // Clamping at the scale gives the scale.
    assert_eq!(clamped_pareto_mean(2000.0, 1.2, 2000.0), 2000.0);
    let d = SizeDist::with_mean(1.2, 12_000.0, 1e6).unwrap();
    assert!((clamped_pareto_mean(d.scale, d.shape, d.cap) - 12_000.0).abs() < 1e-6);
    assert!(d.scale > 2000.0 && d.scale < 4000.0, "{}", d.scale);
    assert!(SizeDist::with_mean(1.0, 12_000.0, 1e6).is_err());
    assert!(SizeDist::with_mean(1.2, 2e6, 1e6).is_err());
}

#[test]
fn size_sample_mean_matches() {
    let d = WebModel::key2004().sizes;
    let mut rng = StdRng::seed_from_u64(7);
    let n = 400_000;
    let samples: Vec<u64> = (0..n).map(|_| d.sample(&mut rng)).collect();
    let mean = samples.iter().sum::<u64>() as f64 / n as f64;
    // sd of the clamped distribution is ~45 kB: the standard error is ~70 B (0.6%).
    assert!(
        (mean / clamped_pareto_mean(d.scale, d.shape, d.cap) - 1.0).abs() < 0.03,
        "sample mean {mean}, want {}",
        clamped_pareto_mean(d.scale, d.shape, d.cap)
    );
    assert!(samples.iter().all(|&s| s as f64 >= d.scale.floor() && s as f64 <= d.cap));
    // Tail: P(X > 10·scale) = 10^-1.2 ≈ 6.3%.
    let tail = samples.iter().filter(|&&s| s as f64 > 10.0 * d.scale).count() as f64 / n as f64;
    assert!((tail - 0.063).abs() < 0.005, "{tail}");
}

#[test]
fn think_and_gap_means_match() {
    let model = WebModel::key2004();
    let mut plan = SessionPlan::new(model, 42, 0);
    let pages: Vec<PlannedPage> = (0..20_000).map(|_| plan.next_page()).collect();
    let think = pages.iter().map(|p| p.think_s).sum::<f64>() / pages.len() as f64;
    assert!((think - 1.0).abs() < 0.03, "{think}");
    let gaps: Vec<f64> =
        pages.iter().flat_map(|p| p.objects.windows(2).map(|w| w[1].offset_s - w[0].offset_s)).collect();
    let gap = gaps.iter().sum::<f64>() / gaps.len() as f64;
    assert!((gap - 0.001).abs() < 0.00003, "{gap}");
    assert!(pages.iter().all(|p| p.objects.len() == 10 && p.objects[0].offset_s == 0.0));
}

#[test]
fn plans_are_deterministic_per_seed_and_session() {
    let m = WebModel::key2004();
    let a: Vec<_> = {
        let mut p = SessionPlan::new(m, 1, 0);
        (0..5).map(|_| p.next_page()).collect()
    };
    let b: Vec<_> = {
        let mut p = SessionPlan::new(m, 1, 0);
        (0..5).map(|_| p.next_page()).collect()
    };
    let c: Vec<_> = {
        let mut p = SessionPlan::new(m, 1, 1);
        (0..5).map(|_| p.next_page()).collect()
    };
    let d: Vec<_> = {
        let mut p = SessionPlan::new(m, 2, 0);
        (0..5).map(|_| p.next_page()).collect()
    };
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(a, d);
}

#[test]
fn request_parsing() {
    assert_eq!(parse_request("GET 123\n").unwrap(), 123);
    assert_eq!(parse_request("GET 0\r\n").unwrap(), 0);
    assert_eq!(parse_request(&request_line(4567)).unwrap(), 4567);
    assert!(parse_request("PUT 1\n").is_err());
    assert!(parse_request("GET x\n").is_err());
    assert!(parse_request("GET -1\n").is_err());
    assert!(parse_request(&format!("GET {}\n", MAX_OBJECT_BYTES + 1)).is_err());
}

fn loopback_server() -> (SocketAddr, Arc<AtomicBool>, std::thread::JoinHandle<Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let h = std::thread::spawn(move || serve(listener, s2));
    (addr, stop, h)
}

#[test]
fn protocol_over_loopback() {
    let (addr, stop, h) = loopback_server();
    let deadline = Instant::now() + Duration::from_secs(10);
    for size in [1u64, 1000, 65_536, 65_537, 300_000] {
        // Succeeds only with all `size` bytes.
        let rt = fetch_object(addr, size, deadline).unwrap();
        assert!(rt > 0.0 && rt < 5.0);
    }
    // Several requests on one connection, then a bad one closes it.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET 10\nGET 5\n").unwrap();
    let mut buf = [0u8; 15];
    s.read_exact(&mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0x5a));
    s.write_all(b"HELLO\n").unwrap();
    let mut rest = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap().unwrap();
}

#[test]
fn client_runs_pages_over_loopback() {
    let (addr, stop, h) = loopback_server();
    let model = WebModel { think_mean_s: 0.05, ..WebModel::key2004() };
    let cfg = ClientConfig {
        server: addr,
        model,
        seed: 9,
        sessions: 2,
        duration: Duration::from_millis(800),
        grace: Duration::from_secs(10),
    };
    let recs = run_client(&cfg);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap().unwrap();
    let n = recs.len() as u64;
    assert!(n >= 20, "only {n} objects");
    assert!(recs.iter().all(ObjectRecord::ok), "{recs:?}");
    // The sizes are the planned ones, page by page, for each session.
    for session in 0..2 {
        let mut plan = SessionPlan::new(model, 9, session);
        let pages = recs.iter().filter(|r| r.session == session).map(|r| r.page).max().unwrap();
        for page in 0..=pages {
            let planned = plan.next_page();
            let mut got: Vec<_> = recs
                .iter()
                .filter(|r| r.session == session && r.page == page)
                .map(|r| (r.object, r.size))
                .collect();
            got.sort();
            let want: Vec<_> = planned.objects.iter().enumerate().map(|(i, o)| (i as u32, o.size)).collect();
            assert_eq!(got, want, "session {session} page {page}");
        }
    }
    let buckets = bucket_stats(&recs, &log2_edges(2048, 1 << 20));
    assert_eq!(buckets.iter().map(|b| b.count).sum::<u64>(), n);
}

#[test]
fn unreachable_server_is_recorded_as_error() {
    // A port nobody listens on (bound, then closed).
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    assert!(fetch_object(addr, 10, Instant::now() + Duration::from_secs(2)).is_err());
}

#[test]
fn buckets() {
    let rec = |size: u64, rt: f64| ObjectRecord {
        session: 0,
        page: 0,
        object: 0,
        size,
        start_s: 0.0,
        response_s: Some(rt),
    };
    let edges = log2_edges(1000, 4000);
    assert_eq!(edges, vec![0, 1000, 2000, 4000]);
    let mut failed = rec(1500, 9.0);
    failed.response_s = None;
    let recs = [rec(10, 0.1), rec(1000, 0.2), rec(1999, 0.4), rec(5000, 1.0), failed];
    let b = bucket_stats(&recs, &edges);
    assert_eq!(b.len(), 4);
    assert_eq!((b[0].count, b[0].mean_s), (1, 0.1));
    assert_eq!(b[1].count, 2);
    assert!((b[1].mean_s - 0.3).abs() < 1e-12);
    assert!(b[2].count == 0 && b[2].mean_s.is_nan());
    assert_eq!((b[3].lo, b[3].hi, b[3].count), (4000, u64::MAX, 1));
    assert!((mean_response(&recs) - 0.425).abs() < 1e-12);
}
