//! A real Prometheus in the router namespace, and its HTTP API.

use super::*;

/// A Prometheus server in the router namespace; killed (and its directory removed) on drop.
pub(crate) struct Prometheus {
    pub(crate) child: Option<Child>,
    pub(crate) dir: PathBuf,
}

impl Prometheus {
    pub(crate) fn binary() -> PathBuf {
        if let Some(p) = std::env::var_os("PROMETHEUS_BIN") {
            return PathBuf::from(p);
        }
        std::env::var_os("PATH")
            .and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join("prometheus"))
                    .find(|b| b.is_file())
            })
            .unwrap_or_else(|| PathBuf::from("/usr/bin/prometheus"))
    }

    /// Starts Prometheus scraping `target` every second; waits until it has scraped it once.
    pub(crate) fn start(tb: &Testbed, target: &str) -> Result<Prometheus, String> {
        let bin = Prometheus::binary();
        if !bin.is_file() {
            return Err(format!(
                "{} not found: install Debian's prometheus package (scripts/setup.sh does)",
                bin.display()
            ));
        }
        let dir = std::env::temp_dir().join(format!("slipstream-dashboard-prom-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: slipstream\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .map_err(|e| format!("writing {}: {e}", config.display()))?;
        let log = std::fs::File::create(dir.join("prometheus.log")).map_err(|e| e.to_string())?;
        let mut command = tb.exec(
            Ns::Router,
            &[
                bin.as_os_str(),
                format!("--config.file={}", config.display()).as_ref(),
                format!("--storage.tsdb.path={}", dir.join("data").display()).as_ref(),
                format!("--web.listen-address={PROMETHEUS_ADDR}").as_ref(),
                "--log.level=warn".as_ref(),
            ],
        );
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log);
        let child = command.spawn().map_err(|e| format!("starting prometheus: {e}"))?;
        let mut prometheus = Prometheus {
            child: Some(child),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let up = prometheus
                .query(tb, "up{job=\"slipstream\"} == 1", None)
                .is_ok_and(|r| !r.is_empty());
            if up {
                return Ok(prometheus);
            }
            if let Some(status) = prometheus
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!("prometheus exited ({status}):\n{}", prometheus.log()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "prometheus did not scrape {target} within 20 s:\n{}",
                    prometheus.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// An HTTP API call (GET `path` with url-encoded `params`) from inside the router namespace;
    /// returns `data` of a `status: success` answer.
    pub(crate) fn api(&self, tb: &Testbed, path: &str, params: &[(&str, String)]) -> Result<Value, String> {
        let mut args = vec![
            "curl".to_owned(),
            "-sS".into(),
            "--max-time".into(),
            "5".into(),
            "-G".into(),
        ];
        for (k, v) in params {
            args.push("--data-urlencode".into());
            args.push(format!("{k}={v}"));
        }
        args.push(format!("http://{PROMETHEUS_ADDR}{path}"));
        let out = tb.run_in(Ns::Router, &args).map_err(|e| format!("{e:#}"))?;
        let v: Value = serde_json::from_str(&out).map_err(|e| format!("answer is not JSON ({e}): {out}"))?;
        if v["status"] != "success" {
            return Err(format!(
                "status {}: {} {}",
                v["status"], v["errorType"], v["error"]
            ));
        }
        Ok(v["data"].clone())
    }

    /// An instant query (at `time`, Unix seconds, or now); returns the result vector.
    pub(crate) fn query(&self, tb: &Testbed, expr: &str, time: Option<f64>) -> Result<Vec<Value>, String> {
        let mut params = vec![("query", expr.to_owned())];
        if let Some(t) = time {
            params.push(("time", format!("{t:.3}")));
        }
        let data = self.api(tb, "/api/v1/query", &params)?;
        match data["result"].as_array() {
            Some(r) => Ok(r.clone()),
            None => Err(format!("no result vector: {data}")),
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // `ip netns exec` execs prometheus, so the child's pid is prometheus'.
            cmd::signal(child.id(), SIGTERM);
            let exited = cmd::wait_until(Duration::from_secs(3), || !matches!(child.try_wait(), Ok(None)));
            if !exited {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
