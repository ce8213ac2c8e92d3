//! The dashboard's JSON: panels, queries, variables, and the structural checks.

use super::*;

pub(crate) fn dashboard_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards/slipstream.json")
}

/// The shipped config (household control) plus a rule putting [`BACKGROUND_PORT`] under Vulture:
/// the PIV, mode and cwnd series exist only for Vulture flows. Written to `dir`; returns its path.
pub(crate) fn test_config(dir: &Path) -> PathBuf {
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

pub(crate) fn dashboard() -> Value {
    let path = dashboard_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every panel, rows included, with the panels nested in collapsed rows.
pub(crate) fn all_panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        out.push(p);
        if let Some(nested) = p["panels"].as_array() {
            out.extend(nested);
        }
    }
    out
}

pub(crate) fn is_row(p: &Value) -> bool {
    p["type"] == "row"
}

pub(crate) fn variables(d: &Value) -> Vec<&Value> {
    d["templating"]["list"]
        .as_array()
        .map(|l| l.iter().collect())
        .unwrap_or_default()
}

/// One query of the dashboard: where it is and its PromQL.
pub(crate) struct Query {
    pub(crate) panel: String,
    pub(crate) ref_id: String,
    pub(crate) expr: String,
}

pub(crate) fn panel_queries(d: &Value) -> Vec<Query> {
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
pub(crate) fn variable_refs(text: &str) -> Vec<String> {
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
pub(crate) fn strings<'a>(v: &'a Value, path: &str, out: &mut Vec<(String, &'a str)>) {
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
pub(crate) const BUILTINS: [&str; 6] = [
    "__rate_interval",
    "__interval",
    "__interval_ms",
    "__range",
    "__range_s",
    "__all",
];

/// `expr` as Prometheus gets it from the test: interval variables replaced by fixed durations,
/// template variables (all of them multi-value with "All") by `.*`.
pub(crate) fn substitute(expr: &str, query_vars: &BTreeSet<String>) -> Result<String, String> {
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

pub(crate) fn query_variable_names(d: &Value) -> BTreeSet<String> {
    variables(d)
        .into_iter()
        .filter(|v| v["type"] == "query")
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect()
}

/// The structural checks: what Grafana needs to import the dashboard and what the brief asks of
/// every panel. Returns the problems found.
pub(crate) fn structural_problems(d: &Value) -> Vec<String> {
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
