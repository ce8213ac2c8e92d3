//! A TCP forwarder from the host into a namespace: the demo's daemon listens on the router
//! namespace's loopback (its default, safe listener), which a browser on the host cannot reach;
//! this accepts on the host's loopback and connects, for each connection, from inside the
//! router namespace (a thread that entered it), then copies bytes both ways.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};

use anyhow::{Context, Result};

/// Listens on `local` (the host's namespace) and forwards every connection to `target` as seen
/// from namespace `ns`, until the process exits. Returns the address it listens on.
pub fn forward_into_netns(local: SocketAddr, ns: &str, target: SocketAddr) -> Result<SocketAddr> {
    let listener = TcpListener::bind(local)
        .or_else(|_| TcpListener::bind(SocketAddr::new(local.ip(), 0)))
        .with_context(|| format!("listening on {local} for the forward into {ns}"))?;
    let bound = listener.local_addr()?;
    let ns = ns.to_owned();
    std::thread::Builder::new()
        .name("forward".into())
        .spawn(move || {
            for client in listener.incoming().flatten() {
                let ns = ns.clone();
                let _ = std::thread::Builder::new()
                    .name("forward-conn".into())
                    .spawn(move || {
                        if crate::enter_netns(&ns).is_ok() {
                            if let Ok(server) = TcpStream::connect(target) {
                                let _ = relay(client, server);
                            }
                        }
                    });
            }
        })?;
    Ok(bound)
}

fn relay(client: TcpStream, server: TcpStream) -> io::Result<()> {
    let (mut client_read, mut server_write) = (client.try_clone()?, server.try_clone()?);
    let upstream = std::thread::spawn(move || {
        let _ = io::copy(&mut client_read, &mut server_write);
        let _ = server_write.shutdown(Shutdown::Write);
    });
    let (mut server_read, mut client_write) = (server, client);
    let _ = io::copy(&mut server_read, &mut client_write);
    let _ = client_write.shutdown(Shutdown::Write);
    let _ = upstream.join();
    Ok(())
}
