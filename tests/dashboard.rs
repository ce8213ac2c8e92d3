//! The Grafana dashboard (`dashboards/slipstream.json`) against real data: the namespace testbed,
//! the real `slipstreamd` on the router with the shipped config/slipstream.toml plus one Vulture
//! rule (see [`test_config`]), a real Prometheus (Debian's `prometheus`, installed by
//! scripts/setup.sh) in the router namespace scraping the daemon every second, and real iperf3
//! downloads: a background one under Vulture (port 5202, so the PIV and mode panels have data), a
//! household one (port 6881, the shipped BitTorrent rule, household by default) and a best-effort
//! one (port 5201) beside them.
//! While they run, every query of every panel (and of every template variable) must come back
//! from Prometheus' HTTP API with status success and at least one series; afterwards the
//! background flow's per-flow series must be gone from the daemon's `/metrics` (and from
//! Prometheus).
//!
//! `dashboard_is_importable` needs nothing but the JSON; `every_panel_query_returns_data` needs
//! root, the binaries built (`cargo build --workspace --bins`) and `prometheus` in PATH.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use slipstream::daemon_binary;
use slipstream_testbed::daemon::Daemon;
use slipstream_testbed::{cmd, netns_supported, Ns, Testbed, TopologySpec};

/// What the test substitutes for Grafana's interval variables (Prometheus scrapes every second).
const RATE_INTERVAL: &str = "15s";
const INTERVAL: &str = "5s";
const RANGE: &str = "5m";
/// Prometheus inside the router namespace (its own loopback: no clash with anything on the host).
const PROMETHEUS_ADDR: &str = "127.0.0.1:19090";
/// Classed by the Vulture rule the test adds to the shipped config.
const BACKGROUND_PORT: u16 = 5202;
const BEST_EFFORT_PORT: u16 = 5201;
/// Classed by the shipped BitTorrent rule (household control, the default).
const HOUSEHOLD_PORT: u16 = 6881;
/// SIGTERM on Linux (this package does not depend on libc itself).
const SIGTERM: i32 = 15;

fn dashboard_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards/slipstream.json")
}

/// The shipped config (household control) plus a rule putting [`BACKGROUND_PORT`] under Vulture:
/// the PIV, mode and cwnd series exist only for Vulture flows. Written to `dir`; returns its path.
fn test_config(dir: &Path) -> PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/slipstream.toml");
    let mut text =
        std::fs::read_to_string(&shipped).unwrap_or_else(|e| panic!("reading {}: {e}", shipped.display()));
    text.push_str(&format!(
        "\n# Added by tests/dashboard.rs: the PIV and mode panels need Vulture flows.\n\
         [[rules]]\nname = \"vulture\"\nremote_ports = [{BACKGROUND_PORT}]\ncontroller = \"vulture\"\n"
    ));
    let path = dir.join("slipstream.toml");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

fn dashboard() -> Value {
    let path = dashboard_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every panel, rows included, with the panels nested in collapsed rows.
fn all_panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        out.push(p);
        if let Some(nested) = p["panels"].as_array() {
            out.extend(nested);
        }
    }
    out
}

fn is_row(p: &Value) -> bool {
    p["type"] == "row"
}

fn variables(d: &Value) -> Vec<&Value> {
    d["templating"]["list"]
        .as_array()
        .map(|l| l.iter().collect())
        .unwrap_or_default()
}

/// One query of the dashboard: where it is and its PromQL.
struct Query {
    panel: String,
    ref_id: String,
    expr: String,
}

fn panel_queries(d: &Value) -> Vec<Query> {
    all_panels(d)
        .into_iter()
        .filter(|p| !is_row(p))
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap_or("?").to_owned();
            p["targets"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[])
                .iter()
                .map(move |t| Query {
                    panel: title.clone(),
                    ref_id: t["refId"].as_str().unwrap_or("?").to_owned(),
                    expr: t["expr"].as_str().unwrap_or("").to_owned(),
                })
        })
        .collect()
}

/// Variable references in `text`: `$name`, `${name}`, `${name:format}` and `[[name]]`.
fn variable_refs(text: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut refs = Vec::new();
    for (i, _) in text.match_indices('$') {
        let rest = &text[i + 1..];
        let name = ident(rest.strip_prefix('{').unwrap_or(rest));
        if !name.is_empty() {
            refs.push(name);
        }
    }
    for (i, _) in text.match_indices("[[") {
        let name = ident(&text[i + 2..]);
        if !name.is_empty() {
            refs.push(name);
        }
    }
    refs
}

/// Every string in the dashboard, with its JSON path, except the variables' saved `current`
/// values (`$__all`) and the `__inputs` declarations themselves.
fn strings<'a>(v: &'a Value, path: &str, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::String(s) => out.push((path.to_owned(), s)),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                strings(x, &format!("{path}[{i}]"), out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                if k != "current" && k != "__inputs" {
                    strings(x, &format!("{path}.{k}"), out);
                }
            }
        }
        _ => {}
    }
}

/// Grafana's own variables the dashboard may use.
const BUILTINS: [&str; 6] = [
    "__rate_interval",
    "__interval",
    "__interval_ms",
    "__range",
    "__range_s",
    "__all",
];

/// `expr` as Prometheus gets it from the test: interval variables replaced by fixed durations,
/// template variables (all of them multi-value with "All") by `.*`.
fn substitute(expr: &str, query_vars: &BTreeSet<String>) -> Result<String, String> {
    let mut out = String::with_capacity(expr.len());
    let mut rest = expr;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (braced, body) = match after.strip_prefix('{') {
            Some(b) => (true, b),
            None => (false, after),
        };
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let mut consumed = name.len();
        if braced {
            let close = body
                .find('}')
                .ok_or_else(|| format!("unclosed ${{ in {expr:?}"))?;
            consumed = close + 1;
        }
        let value = match name.as_str() {
            "__rate_interval" => RATE_INTERVAL,
            "__interval" => INTERVAL,
            "__range" => RANGE,
            n if query_vars.contains(n) => ".*",
            n => return Err(format!("unknown variable ${n} in {expr:?}")),
        };
        out.push_str(value);
        rest = &body[consumed..];
    }
    out.push_str(rest);
    Ok(out)
}

fn query_variable_names(d: &Value) -> BTreeSet<String> {
    variables(d)
        .into_iter()
        .filter(|v| v["type"] == "query")
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect()
}

/// The structural checks: what Grafana needs to import the dashboard and what the brief asks of
/// every panel. Returns the problems found.
fn structural_problems(d: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut problem = |s: String| problems.push(s);
    for key in ["uid", "title"] {
        if d[key].as_str().is_none_or(str::is_empty) {
            problem(format!("no {key}"));
        }
    }
    if d["schemaVersion"].as_u64().is_none_or(|v| v < 36) {
        problem(format!("schemaVersion {} (want ~39)", d["schemaVersion"]));
    }
    let inputs = d["__inputs"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if !inputs
        .iter()
        .any(|i| i["name"] == "DS_PROMETHEUS" && i["type"] == "datasource" && i["pluginId"] == "prometheus")
    {
        problem("no __inputs entry DS_PROMETHEUS (datasource, prometheus)".into());
    }
    let vars = variables(d);
    if !vars
        .iter()
        .any(|v| v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus")
    {
        problem("no templating variable `datasource` of type datasource, query prometheus".into());
    }
    let mut defined: BTreeSet<String> = vars
        .iter()
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect();
    defined.extend(
        inputs
            .iter()
            .filter_map(|i| i["name"].as_str().map(str::to_owned)),
    );
    defined.extend(BUILTINS.map(str::to_owned));
    for v in &vars {
        if v["type"] == "query" && v["datasource"]["uid"] != "${datasource}" {
            problem(format!("variable {} does not use ${{datasource}}", v["name"]));
        }
    }

    let panels = all_panels(d);
    if panels.iter().filter(|p| !is_row(p)).count() < 10 {
        problem(format!("only {} panels", panels.len()));
    }
    let mut ids = BTreeSet::new();
    let mut cells: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for p in &panels {
        let title = p["title"].as_str().unwrap_or("");
        if title.is_empty() {
            problem(format!("panel {} has no title", p["id"]));
        }
        match p["id"].as_u64() {
            Some(id) if ids.insert(id) => {}
            _ => problem(format!("panel {title:?}: missing or duplicate id {}", p["id"])),
        }
        if p["type"].as_str().is_none_or(str::is_empty) {
            problem(format!("panel {title:?} has no type"));
        }
        let g = &p["gridPos"];
        let dims: Vec<Option<u64>> = ["x", "y", "w", "h"].iter().map(|k| g[*k].as_u64()).collect();
        let [Some(x), Some(y), Some(w), Some(h)] = dims[..] else {
            problem(format!("panel {title:?}: gridPos incomplete: {g}"));
            continue;
        };
        if w == 0 || h == 0 || x + w > 24 {
            problem(format!("panel {title:?}: gridPos out of the 24-column grid: {g}"));
        }
        for cx in x..x + w {
            for cy in y..y + h {
                if let Some(other) = cells.insert((cx, cy), title.to_owned()) {
                    problem(format!("panels {other:?} and {title:?} overlap"));
                }
            }
        }
        if is_row(p) {
            continue;
        }
        if p["datasource"]["uid"] != "${datasource}" {
            problem(format!(
                "panel {title:?}: datasource is not ${{datasource}}: {}",
                p["datasource"]
            ));
        }
        if p["fieldConfig"]["defaults"]["unit"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            problem(format!("panel {title:?}: no unit"));
        }
        let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if targets.is_empty() {
            problem(format!("panel {title:?}: no targets"));
        }
        for t in targets {
            if t["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                problem(format!("panel {title:?} target {}: no expr", t["refId"]));
            }
            if t["datasource"]["uid"] != "${datasource}" {
                problem(format!(
                    "panel {title:?} target {}: datasource is not ${{datasource}}",
                    t["refId"]
                ));
            }
        }
    }
    // No dangling variable references anywhere (queries, datasources, titles, links).
    let mut all = Vec::new();
    strings(d, "", &mut all);
    for (path, s) in all {
        for name in variable_refs(s) {
            if !defined.contains(&name) {
                problem(format!("{path}: ${name} is not defined"));
            }
        }
    }
    // Every panel query goes through the test's substitution (which knows the same variables).
    let query_vars = query_variable_names(d);
    for q in panel_queries(d) {
        if let Err(e) = substitute(&q.expr, &query_vars) {
            problem(format!("panel {:?} {}: {e}", q.panel, q.ref_id));
        }
    }
    problems
}

#[test]
fn dashboard_is_importable() {
    let d = dashboard();
    let problems = structural_problems(&d);
    assert!(
        problems.is_empty(),
        "{} is not importable as is:\n  {}",
        dashboard_path().display(),
        problems.join("\n  ")
    );
}

#[test]
fn structural_check_catches_problems() {
    let mut d = dashboard();
    d["panels"][1]["targets"][0]["expr"] = "rate(x{rule=~\"$nope\"}[$__rate_interval])".into();
    d["panels"][1]["datasource"]["uid"] = "prom".into();
    d["templating"]["list"] = Value::Array(Vec::new());
    let problems = structural_problems(&d).join("\n");
    for needle in [
        "$nope is not defined",
        "datasource is not ${datasource}",
        "no templating variable",
    ] {
        assert!(problems.contains(needle), "{needle:?} not reported:\n{problems}");
    }
    assert_eq!(
        substitute(
            "sum(rate(a{rule=~\"$rule\",b=~\"${flow}\"}[$__rate_interval]))",
            &["rule".to_owned(), "flow".to_owned()].into()
        )
        .unwrap(),
        "sum(rate(a{rule=~\".*\",b=~\".*\"}[15s]))"
    );
}

/// A Prometheus server in the router namespace; killed (and its directory removed) on drop.
struct Prometheus {
    child: Option<Child>,
    dir: PathBuf,
}

impl Prometheus {
    fn binary() -> PathBuf {
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
    fn start(tb: &Testbed, target: &str) -> Result<Prometheus, String> {
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

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// An HTTP API call (GET `path` with url-encoded `params`) from inside the router namespace;
    /// returns `data` of a `status: success` answer.
    fn api(&self, tb: &Testbed, path: &str, params: &[(&str, String)]) -> Result<Value, String> {
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
    fn query(&self, tb: &Testbed, expr: &str, time: Option<f64>) -> Result<Vec<Value>, String> {
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

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Per-flow sample lines of the daemon's metrics text that mention `endpoint` in a label.
fn per_flow_lines<'a>(metrics: &'a str, endpoint: &str) -> Vec<&'a str> {
    let needle = format!("\"{endpoint}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("slipstream_flow_") && l.contains(&needle))
        .collect()
}

/// Runs every panel's queries (and the variables' `label_values`) once, at `time`; returns the
/// failures as "panel / refId: why" lines, and the number of queries run.
fn check_queries(tb: &Testbed, prometheus: &Prometheus, d: &Value, time: f64) -> (Vec<String>, usize) {
    let query_vars = query_variable_names(d);
    let mut failures = Vec::new();
    let mut count = 0;
    for q in panel_queries(d) {
        count += 1;
        let expr = match substitute(&q.expr, &query_vars) {
            Ok(e) => e,
            Err(e) => {
                failures.push(format!("{:?} / {}: {e}", q.panel, q.ref_id));
                continue;
            }
        };
        match prometheus.query(tb, &expr, Some(time)) {
            Ok(r) if r.is_empty() => {
                failures.push(format!("{:?} / {}: empty result for {expr}", q.panel, q.ref_id))
            }
            Ok(_) => {}
            Err(e) => failures.push(format!("{:?} / {}: {e} for {expr}", q.panel, q.ref_id)),
        }
    }
    // Template variables: `label_values(selector, label)` through the label values API.
    for v in variables(d).into_iter().filter(|v| v["type"] == "query") {
        count += 1;
        let name = v["name"].as_str().unwrap_or("?");
        let def = v["definition"].as_str().unwrap_or("");
        let parsed = def
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|r| r.rsplit_once(','))
            .map(|(sel, label)| (sel.trim().to_owned(), label.trim().to_owned()));
        let Some((selector, label)) = parsed else {
            failures.push(format!("variable {name}: cannot run {def:?}"));
            continue;
        };
        let selector = match substitute(&selector, &query_vars) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("variable {name}: {e}"));
                continue;
            }
        };
        let params = [
            ("match[]", selector.clone()),
            ("start", format!("{:.3}", time - 60.0)),
            ("end", format!("{time:.3}")),
        ];
        match prometheus.api(tb, &format!("/api/v1/label/{label}/values"), &params) {
            Ok(Value::Array(values)) if !values.is_empty() => {}
            Ok(other) => failures.push(format!("variable {name}: no values for {selector} ({other})")),
            Err(e) => failures.push(format!("variable {name}: {e}")),
        }
    }
    (failures, count)
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn every_panel_query_returns_data() {
    if let Err(why) = netns_supported() {
        panic!("cannot run here: {why}");
    }
    let started = Instant::now();
    let d = dashboard();
    let config_dir = std::env::temp_dir().join(format!("slipstream-dashboard-config-{}", std::process::id()));
    std::fs::create_dir_all(&config_dir).expect("config directory");
    let config_path = test_config(&config_dir);
    let config = slipstream_config::load(&config_path).expect("the test config is valid");
    let metrics_addr = config.metrics.listen.to_string();

    let tb = Testbed::build(TopologySpec::with_prefix(slipstream_testbed::unique_prefix(
        "ssdash",
    )))
    .expect("testbed");
    let log = std::env::temp_dir().join(format!("slipstreamd-dashboard-{}.log", std::process::id()));
    let daemon =
        Daemon::start(&tb, &daemon_binary(), &config_path, &metrics_addr, &log).expect("slipstreamd starts");
    let prometheus = Prometheus::start(&tb, &metrics_addr).unwrap_or_else(|e| panic!("{e}"));
    tb.start_iperf_server(BACKGROUND_PORT).expect("iperf3 server");
    tb.start_iperf_server(BEST_EFFORT_PORT).expect("iperf3 server");
    tb.start_iperf_server(HOUSEHOLD_PORT).expect("iperf3 server");
    eprintln!("set up in {:.1} s", started.elapsed().as_secs_f64());

    // Background and household downloads for 24 s; a best-effort one joins after 4 s for 14 s.
    // The queries run at 17 s, with all three flowing and 15 s of scrapes behind every rate().
    let traffic = Instant::now();
    let background = tb
        .run_download(BACKGROUND_PORT, 24, "cubic", &[])
        .expect("background download");
    let household = tb
        .run_download(HOUSEHOLD_PORT, 24, "cubic", &[])
        .expect("household download");
    std::thread::sleep(Duration::from_secs(4));
    let best_effort = tb
        .run_download(BEST_EFFORT_PORT, 14, "cubic", &[])
        .expect("best-effort download");
    std::thread::sleep(Duration::from_secs(17).saturating_sub(traffic.elapsed()));

    let server = format!("{}:{BACKGROUND_PORT}", tb.server_addr(false));
    let household_server = format!("{}:{HOUSEHOLD_PORT}", tb.server_addr(false));
    let during = daemon.scrape(&tb).unwrap_or_default();
    let query_time = unix_now();
    let (failures, count) = check_queries(&tb, &prometheus, &d, query_time);
    eprintln!(
        "{count} queries at {:.1} s into the traffic, {} failed",
        traffic.elapsed().as_secs_f64(),
        failures.len()
    );

    // The figures behind the headline panel, for the log and a consistency check: all traffic
    // delivered to the LAN includes the background goodput.
    let value = |expr: &str| -> Option<f64> {
        let r = prometheus.query(&tb, expr, Some(query_time)).ok()?;
        r.first()?["value"][1].as_str()?.parse().ok()
    };
    let background_bps = value("sum(rate(slipstream_rule_acked_bytes_total[15s])) * 8");
    let lan_bps = value("sum(rate(slipstream_interface_transmit_bytes_total[15s])) * 8");
    let queued_pps = value("sum(rate(slipstream_nfqueue_packets_total[15s]))");
    let handled_pps = value("rate(slipstream_packets_total[15s])");
    eprintln!(
        "background goodput {:.2} Mbit/s, delivered to the LAN {:.2} Mbit/s; NFQUEUE {:.0} packets/s, \
         engine {:.0} packets/s",
        background_bps.unwrap_or(f64::NAN) / 1e6,
        lan_bps.unwrap_or(f64::NAN) / 1e6,
        queued_pps.unwrap_or(f64::NAN),
        handled_pps.unwrap_or(f64::NAN)
    );

    let background = background.wait();
    let household = household.wait();
    let best_effort = best_effort.wait();
    let traffic_secs = traffic.elapsed().as_secs_f64();

    // The background flow's per-flow series vanish once the flow has closed (FIN, the engine's
    // 2 s linger, the next snapshot).
    let mut after = String::new();
    let gone = cmd::wait_until(Duration::from_secs(10), || {
        after = daemon.scrape(&tb).unwrap_or_default();
        !after.is_empty() && per_flow_lines(&after, &server).is_empty()
    });
    // ... and Prometheus marks them stale at the next scrape.
    std::thread::sleep(Duration::from_millis(2500));
    let stale = prometheus.query(
        &tb,
        &format!("slipstream_flow_rwnd_bytes{{sender=\"{server}\"}}"),
        None,
    );

    let status = daemon.stop();
    drop(prometheus);
    let _ = std::fs::remove_dir_all(&config_dir);
    eprintln!("total {:.1} s", started.elapsed().as_secs_f64());

    assert!(
        failures.is_empty(),
        "{} of {count} dashboard queries came back empty or failed (Prometheus at {query_time:.0}):\n  {}\n\
         daemon metrics during the traffic:\n{during}",
        failures.len(),
        failures.join("\n  ")
    );
    if let (Some(bg), Some(lan)) = (background_bps, lan_bps) {
        assert!(
            bg > 0.0 && lan >= 0.9 * bg,
            "background goodput {bg:.0} bit/s vs {lan:.0} bit/s delivered to the LAN"
        );
    }
    let background = background.expect("background download ran");
    household.expect("household download ran");
    best_effort.expect("best-effort download ran");
    assert!(traffic_secs < 40.0, "downloads took {traffic_secs:.1} s");
    assert!(
        background.goodput_mbps > 1.0,
        "background goodput {:.2} Mbit/s",
        background.goodput_mbps
    );
    assert!(
        !per_flow_lines(&during, &server).is_empty(),
        "the daemon had no per-flow series for {server} while it ran:\n{during}"
    );
    // The household flow was on the download link with an allocation of its own.
    let household_lines = per_flow_lines(&during, &household_server);
    assert!(
        household_lines
            .iter()
            .any(|l| l.starts_with("slipstream_flow_allocation_bytes{")),
        "the household flow from {household_server} had no allocation series:\n  {}",
        household_lines.join("\n  ")
    );
    let on_download = slipstream_testbed::daemon::metric_value(
        &during,
        "slipstream_household_flows",
        &[("link", "download")],
    );
    assert!(
        on_download.is_some_and(|n| n >= 1.0),
        "slipstream_household_flows{{link=\"download\"}} {on_download:?}"
    );
    assert!(
        gone,
        "per-flow series of {server} still exported 10 s after the flow ended:\n  {}",
        per_flow_lines(&after, &server).join("\n  ")
    );
    let closed = slipstream_testbed::daemon::metric_value(&after, "slipstream_flows_closed_total", &[]);
    assert!(closed.is_some_and(|c| c >= 1.0), "flows_closed_total {closed:?}");
    match stale {
        Ok(r) => assert!(r.is_empty(), "Prometheus still has the ended flow's rwnd: {r:?}"),
        Err(e) => panic!("querying Prometheus after the flow ended: {e}"),
    }
    let status = status.expect("slipstreamd stops");
    assert!(
        status.success(),
        "slipstreamd exit status {status}:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}
