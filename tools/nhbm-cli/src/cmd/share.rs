//! `export` and `import` in a session: a loaded plan handed to other
//! processes as a dma-buf, served over a Unix socket, and a plan served so
//! imported read-only.

use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};

use anyhow::{anyhow, Result};
use nhbm::share::{recv_fd, send_fd};
use serde_json::json;

use crate::device::{Served, Session};

/// `export ID SOCKET`: exports plan `id` and hands its dma-buf to every
/// process that connects to the Unix socket `socket` while the session
/// lasts (an existing file there is refused).
pub fn export(s: &mut Session, id: u32, socket: &str) -> Result<()> {
    let buf = s.io(&format!("PLAN_EXPORT {id}"), s.dev.plan_export(id))?;
    let listener = UnixListener::bind(socket).map_err(|e| anyhow!("{socket}: {e}"))?;
    s.served.push(Served {
        path: socket.into(),
    });
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            // A client that left early is its own loss.
            let _ = send_fd(&client, buf.as_fd());
        }
    });
    if s.json {
        println!("{}", json!({"exported": id, "socket": socket}));
    } else {
        println!("plan {id} exported: served read-only on {socket} while this session lasts");
    }
    Ok(())
}

/// `import SOCKET`: imports the plan served on the Unix socket `socket`;
/// it becomes `last`.
pub fn import(s: &mut Session, socket: &str) -> Result<()> {
    let sock = UnixStream::connect(socket).map_err(|e| anyhow!("{socket}: {e}"))?;
    let buf = recv_fd(&sock).map_err(|e| anyhow!("{socket}: no plan received: {e}"))?;
    let got = s.io("PLAN_IMPORT", s.dev.plan_import(buf.as_fd()))?;
    s.last = Some(got.plan_id);
    if s.json {
        println!(
            "{}",
            json!({"imported": got.plan_id, "nr_vars": got.nr_vars, "bytes": got.bytes})
        );
    } else {
        println!(
            "imported plan {} read-only: {} variables, {} bytes of the exporter's",
            got.plan_id, got.nr_vars, got.bytes
        );
    }
    Ok(())
}
