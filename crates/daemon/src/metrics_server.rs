//! The metrics endpoint: `GET /metrics` renders the registry; anything else is 404.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tracing::debug;

pub(crate) async fn serve(listener: TcpListener, registry: Arc<Registry>) -> std::io::Result<()> {
    loop {
        let (stream, peer) = listener.accept().await?;
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let registry = registry.clone();
                async move { Ok::<_, Infallible>(respond(&req, &registry)) }
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

fn respond(req: &Request<Incoming>, registry: &Registry) -> Response<Full<Bytes>> {
    let mut response = Response::builder();
    let body = match req.uri().path() {
        "/metrics" => {
            response = response.header("content-type", slipstream_metrics::CONTENT_TYPE);
            slipstream_metrics::render(registry)
        }
        "/" => "Slipstream: metrics at /metrics\n".to_string(),
        _ => {
            response = response.status(StatusCode::NOT_FOUND);
            "not found\n".to_string()
        }
    };
    response.body(Full::new(Bytes::from(body))).unwrap_or_default()
}
