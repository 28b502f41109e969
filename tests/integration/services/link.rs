//! A TCP link the fault harness can cut: a forwarder on a loopback address of its own in
//! front of one upstream (a cluster's way to its zone's back end), which while cut behaves
//! as a partition does: connections open at the cut stop carrying anything and close, new
//! ones are accepted and then hear nothing (the client waits out its own timeout, as it
//! would for packets dropped on the way), until the cut heals.

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::harness::loopback_ip;

/// A running link.
pub struct Link {
    /// Where clients connect.
    pub addr: SocketAddr,
    cut: watch::Sender<bool>,
}

impl Link {
    /// Forwards connections to `upstream` until dropped.
    pub async fn start(upstream: SocketAddr) -> Link {
        let listener = TcpListener::bind(SocketAddr::new(IpAddr::V4(loopback_ip()), 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, watching) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut cut = watching.clone();
                tokio::spawn(async move {
                    if *cut.borrow() {
                        // Heard nothing; closed once the cut heals (or the client leaves).
                        let _ = cut.wait_for(|c| !*c).await;
                        drop(client);
                        return;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Link { addr, cut }
    }

    /// Cuts the link (`true`) or heals it.
    pub fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}
