//! The HTTP listener (`metrics.listen`): `GET /metrics` renders the registry; `GET /` is the
//! live page and `GET /api/...` its JSON (`page`, docs/live-page.md). Read-only: `GET` and
//! `HEAD` only, anything else is 405; unknown paths are 404.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::net::TcpListener;
use tracing::debug;

use crate::page::Page;

/// The live page: one self-contained file (inline CSS, JavaScript, SVG; no external assets).
const PAGE_HTML: &str = include_str!("page.html");

/// What the page may load and do: its own inline script and style, requests to this listener,
/// nothing else (no other origin, no frames, no forms).
const PAGE_CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                        connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
                        frame-ancestors 'none'";

/// Serves the listener until the future is dropped; the page's sampler runs beside it.
pub(crate) async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    page: Arc<Page>,
) -> std::io::Result<()> {
    let _sampler = AbortOnDrop(tokio::spawn(page.clone().run_sampler()));
    loop {
        let (stream, peer) = listener.accept().await?;
        let registry = registry.clone();
        let page = page.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let registry = registry.clone();
                let page = page.clone();
                async move { Ok::<_, Infallible>(respond(&req, &registry, &page).await) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!("metrics connection from {peer}: {e}");
            }
        });
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn respond(req: &Request<Incoming>, registry: &Registry, page: &Page) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "read-only: GET only\n".into());
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let query = req.uri().query().unwrap_or("");
    let mut response = match req.uri().path() {
        "/metrics" => {
            let mut r = text(StatusCode::OK, slipstream_metrics::render(registry));
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(slipstream_metrics::CONTENT_TYPE),
            );
            r
        }
        "/" | "/index.html" => {
            let mut r = text(StatusCode::OK, PAGE_HTML.to_owned());
            let h = r.headers_mut();
            h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
            h.insert("content-security-policy", HeaderValue::from_static(PAGE_CSP));
            h.insert("x-frame-options", HeaderValue::from_static("DENY"));
            r
        }
        "/api/status" => json(&page.status().await),
        "/api/flows" => match page.flows(param(query, "top").unwrap_or(usize::MAX)).await {
            Some(list) => json(&list),
            None => unavailable(),
        },
        "/api/hosts" => match page.hosts().await {
            Some(hosts) => json(&hosts),
            None => unavailable(),
        },
        "/api/history" => json(&page.history(param(query, "since"))),
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    };
    let h = response.headers_mut();
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    if req.method() == Method::HEAD {
        *response.body_mut() = Full::new(Bytes::new());
    }
    response
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn json<T: Serialize>(value: &T) -> Response<Full<Bytes>> {
    match serde_json::to_string(value) {
        Ok(body) => {
            let mut r = text(StatusCode::OK, body);
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode: {e}\n")),
    }
}

fn unavailable() -> Response<Full<Bytes>> {
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        "the packet thread does not answer (stopped?)\n".into(),
    )
}

/// A numeric query parameter (`top=20`, `since=1764316800000`).
fn param<T: std::str::FromStr>(query: &str, name: &str) -> Option<T> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters() {
        assert_eq!(param::<usize>("top=20", "top"), Some(20));
        assert_eq!(
            param::<u64>("a=1&since=1764316800000", "since"),
            Some(1_764_316_800_000)
        );
        assert_eq!(param::<usize>("top=x", "top"), None);
        assert_eq!(param::<usize>("", "top"), None);
    }

    #[test]
    fn the_page_is_self_contained_and_small() {
        assert!(PAGE_HTML.len() <= 100_000, "{} bytes", PAGE_HTML.len());
        for external in [
            "src=\"http",
            "href=\"http",
            "src=\"//",
            "href=\"//",
            "@import",
            "url(",
        ] {
            assert!(
                !PAGE_HTML.contains(external),
                "the page loads something: {external}"
            );
        }
    }
}
