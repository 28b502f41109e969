//! One accept loop for the test servers (the Kubernetes API, webhook receivers).

/// Serves HTTP/1.1 on `listener` with `handler` until the runtime ends.
pub fn serve_http<H, F, B>(listener: tokio::net::TcpListener, handler: H)
where
    H: Fn(hyper::Request<hyper::body::Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = hyper::Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::spawn(async move {
        loop {
            let stream = accept(&listener).await;
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let answer = handler(req);
                    async move { Ok::<_, std::convert::Infallible>(answer.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

/// The next connection on `listener`. An accept error (EMFILE while a load test's farm holds
/// every descriptor) is passing: it backs off 10 ms instead of spinning, and the server stays
/// up to take the next connection.
pub(crate) async fn accept(listener: &tokio::net::TcpListener) -> tokio::net::TcpStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => return stream,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}
