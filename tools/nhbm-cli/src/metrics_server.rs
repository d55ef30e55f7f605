//! `nhbm monitor --prometheus --listen ADDR`: Prometheus's text at
//! `http://ADDR/metrics`, a fresh census per scrape, on a loopback address
//! only (the figures name other users' processes).

use std::net::SocketAddr;

use anyhow::{anyhow, bail, Result};
use tiny_http::{Header, Response, Server};

use crate::census;
use crate::prometheus;

/// The content type of the text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves scrapes at `addr` until killed; says where on stderr.
pub fn serve(addr: SocketAddr, only: Option<u32>) -> Result<()> {
    if !addr.ip().is_loopback() {
        bail!("--listen {addr}: not a loopback address; nhbm serves this host only");
    }
    let server = Server::http(addr).map_err(|e| anyhow!("--listen {addr}: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| anyhow!("--listen {addr}: not an IP socket"))?;
    eprintln!("nhbm: serving http://{bound}/metrics");
    let header =
        Header::from_bytes("Content-Type", CONTENT_TYPE).map_err(|()| anyhow!("header"))?;
    for request in server.incoming_requests() {
        let response = if request.url() == "/metrics" {
            let text = prometheus::render(&census::take().only(only));
            Response::from_string(text).with_header(header.clone())
        } else {
            Response::from_string("only /metrics is here\n").with_status_code(404)
        };
        // A scraper that went away is its own business.
        let _ = request.respond(response);
    }
    Ok(())
}
