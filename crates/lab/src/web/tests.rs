//! Tests of the web load generator.

use super::*;

#[test]
fn clamped_mean_formula() {
    // Unclamped limit: a·xm/(a−1).
    let m = clamped_pareto_mean(2000.0, 1.2, 1e30);
    assert!((m - 12_000.0).abs() < 0.1, "{m}");
    // Clamping at the scale gives the scale.
    assert_eq!(clamped_pareto_mean(2000.0, 1.2, 2000.0), 2000.0);
    let scale = size_scale();
    assert!((clamped_pareto_mean(scale, SIZE_SHAPE, SIZE_CAP) - SIZE_MEAN).abs() < 1e-6);
    assert!(scale > 2000.0 && scale < 4000.0, "{scale}");
}

#[test]
fn size_think_and_gap_means_match() {
    let mut plan = SessionPlan::new(42, 0, 1.0);
    let pages: Vec<PlannedPage> = (0..40_000).map(|_| plan.next_page()).collect();
    let sizes: Vec<u64> = pages.iter().flat_map(|p| p.objects.iter().map(|o| o.1)).collect();
    let n = sizes.len() as f64;
    // sd of the clamped distribution is ~45 kB: the standard error of 400k samples is ~70 B (0.6%).
    let mean = sizes.iter().sum::<u64>() as f64 / n;
    assert!((mean / SIZE_MEAN - 1.0).abs() < 0.03, "sample mean {mean}");
    let scale = size_scale();
    assert!(sizes.iter().all(|&s| s as f64 >= scale.floor() && s as f64 <= SIZE_CAP));
    // Tail: P(X > 10·scale) = 10^-1.2 ≈ 6.3%.
    let tail = sizes.iter().filter(|&&s| s as f64 > 10.0 * scale).count() as f64 / n;
    assert!((tail - 0.063).abs() < 0.005, "{tail}");
    let think = pages.iter().map(|p| p.think_s).sum::<f64>() / pages.len() as f64;
    assert!((think - 1.0).abs() < 0.03, "{think}");
    let gaps: Vec<f64> = pages.iter().flat_map(|p| p.objects.windows(2).map(|w| w[1].0 - w[0].0)).collect();
    let gap = gaps.iter().sum::<f64>() / gaps.len() as f64;
    assert!((gap - 0.001).abs() < 0.00003, "{gap}");
    assert!(pages.iter().all(|p| p.objects.len() == OBJECTS && p.objects[0].0 == 0.0));
}

#[test]
fn plans_are_deterministic_per_seed_and_session() {
    let pages = |seed, session| -> Vec<PlannedPage> {
        let mut p = SessionPlan::new(seed, session, 1.0);
        (0..5).map(|_| p.next_page()).collect()
    };
    assert_eq!(pages(1, 0), pages(1, 0));
    assert_ne!(pages(1, 0), pages(1, 1));
    assert_ne!(pages(1, 0), pages(2, 0));
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
    // Several requests on one connection, then a too large one closes it.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&[10u64.to_be_bytes(), 5u64.to_be_bytes()].concat()).unwrap();
    let mut buf = [0u8; 15];
    s.read_exact(&mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0x5a));
    s.write_all(&(MAX_OBJECT_BYTES + 1).to_be_bytes()).unwrap();
    let mut rest = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0);
    // A fetch past its deadline fails.
    assert!(fetch_object(addr, 10, Instant::now()).is_err());
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap().unwrap();
}

#[test]
fn client_runs_pages_over_loopback() {
    let (addr, stop, h) = loopback_server();
    let cfg = ClientConfig {
        server: addr,
        seed: 9,
        sessions: 1,
        duration: Duration::from_millis(800),
        think_mean_s: 0.05,
    };
    let recs = run_client(&cfg);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap().unwrap();
    assert!(recs.len() >= 20, "only {} objects", recs.len());
    assert!(recs.iter().all(|r| r.response_s.is_some()), "{recs:?}");
    // Whole pages, with the planned sizes.
    assert_eq!(recs.len() % OBJECTS, 0);
    let mut plan = SessionPlan::new(9, 0, 0.05);
    plan.think_s();
    let mut want: Vec<u64> =
        (0..recs.len() / OBJECTS).flat_map(|_| plan.next_page().objects).map(|o| o.1).collect();
    let mut got: Vec<u64> = recs.iter().map(|r| r.size).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn unreachable_server_is_recorded_as_error() {
    // A port nobody listens on (bound, then closed).
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    assert!(fetch_object(addr, 10, Instant::now() + Duration::from_secs(2)).is_err());
}
