//! The blocking client the CLI uses.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::{Request, Response};

/// Why a query failed.
#[derive(Debug)]
pub enum QueryError {
    /// No daemon at the socket (or no permission).
    Connect {
        /// The socket path tried.
        socket: String,
        /// What connect(2) said.
        source: std::io::Error,
    },
    /// The exchange broke off.
    Io(std::io::Error),
    /// The answer is not a response.
    BadResponse(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Connect { socket, source } => write!(
                f,
                "cannot connect to {socket}: {source} (is slipstreamd running? see [control] socket in its config, or pass --socket)"
            ),
            QueryError::Io(e) => write!(f, "talking to slipstreamd: {e}"),
            QueryError::BadResponse(s) => write!(f, "unexpected answer from slipstreamd: {s}"),
        }
    }
}

impl std::error::Error for QueryError {}

/// Sends `request` to the daemon at `socket` and returns its response (5 s timeout).
pub fn query(socket: &Path, request: &Request) -> Result<Response, QueryError> {
    let stream = UnixStream::connect(socket).map_err(|source| QueryError::Connect {
        socket: socket.display().to_string(),
        source,
    })?;
    let timeout = Some(Duration::from_secs(5));
    stream.set_read_timeout(timeout).map_err(QueryError::Io)?;
    stream.set_write_timeout(timeout).map_err(QueryError::Io)?;
    (&stream)
        .write_all(request.to_line().as_bytes())
        .map_err(QueryError::Io)?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .map_err(QueryError::Io)?;
    Response::parse_line(&line).map_err(|e| QueryError::BadResponse(format!("{e}: {:?}", line.trim())))
}
