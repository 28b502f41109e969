//! Gateways whose every answer the test scripts byte by byte, for the misbehaviour real
//! servers show (stalls, resets, oversized heads) that `ho_testkit::Gateway` does not offer.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Serves every connection with `answer`, after reading the request head; counts
/// connections.
pub(crate) async fn scripted<F, Fut>(addr: SocketAddr, answer: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            tokio::spawn(async move {
                if read_request_head(&mut s).await {
                    answer(s).await;
                }
            });
        }
    });
    (addr, count)
}

/// Reads one request head from `s`; false when the client closed first.
pub(crate) async fn read_request_head(s: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => return false,
        }
    }
    true
}
