//! The `http` and `https` kinds: one HTTP/1.1 request over a fresh connection, or over the
//! connection the target's previous probe kept (`reuse_connection`), TLS in between for
//! https.

mod body;
mod conditions;
mod head;
mod redirect;
mod request;
mod resolve;
mod settings;

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::connect::{self, SocketSetup};
use super::tls::TlsTarget;
use super::weight::ReportedWeight;
use super::{Attempt, Dial, Failure, KeptConnection, Link, ProbeKind, Progress, Stream};
use head::HeadParts;
use request::{Answer, HttpRequest};
pub use settings::{HttpCheck, HttpSettings, HttpsCheck, HttpsSettings};

/// An HTTP check: the request prepared once for every target of the check, and its TLS
/// for https.
pub(super) struct HttpProbe {
    req: HttpRequest,
    tls: Option<TlsTarget>,
    /// Probes one connection carries (1: a fresh connection every probe).
    per_connection: u32,
    /// A healthy answer slower than this fails (`slow`).
    max_latency: Option<Duration>,
}

impl HttpProbe {
    /// The check `check` against `port`, over `tls` when it is https.
    pub(super) fn new(check: &HttpCheck, port: u16, tls: Option<TlsTarget>) -> HttpProbe {
        HttpProbe {
            req: HttpRequest::new(check, port, tls.is_some()),
            tls,
            per_connection: check.probes_per_connection,
            max_latency: check.max_latency,
        }
    }

    /// One attempt, recording in `progress` how far it got.
    ///
    /// A kept connection closed while idle is no verdict (`Progress::kept_verdict`); any
    /// other failure ends the connection and is the verdict.
    ///
    /// The TLS handshake is boxed: its state (~8 KB) would otherwise size every plain
    /// probe in flight too (a heap profile of 2,000 hanging probes: 15.7 MB).
    async fn run(
        &self,
        dial: &Dial,
        progress: &Progress,
        kept: &mut Option<KeptConnection>,
    ) -> Result<(), Failure> {
        // The clock is read only for checks that judge latency.
        let start = self.max_latency.map(|_| Instant::now());
        self.answer(dial, progress, kept).await?;
        let took = start.map_or(Duration::ZERO, |s| s.elapsed());
        let timely = conditions::judge_latency(took, self.max_latency);
        if timely.is_err() {
            // A failure opens a fresh connection next time, whatever its kind.
            *kept = None;
        }
        timely
    }

    /// One request and its judged answer.
    async fn answer(
        &self,
        dial: &Dial,
        progress: &Progress,
        kept: &mut Option<KeptConnection>,
    ) -> Result<(), Failure> {
        if let Some(KeptConnection {
            link: Link::Stream(stream),
            carried,
        }) = kept.take()
        {
            progress.reusing();
            let verdict = self.exchange(stream, dial, carried, kept).await;
            if let Some(verdict) = progress.kept_verdict(verdict) {
                return self.judged(verdict, dial, progress).await;
            }
        }
        let stream = self.open(dial, progress).await?;
        let verdict = self.exchange(stream, dial, 0, kept).await;
        self.judged(verdict, dial, progress).await
    }

    /// The verdict of an exchange, after following the redirect it was answered with.
    async fn judged(
        &self,
        verdict: Result<Answer, Failure>,
        dial: &Dial,
        progress: &Progress,
    ) -> Result<(), Failure> {
        match verdict? {
            Answer::Healthy { weight, .. } => {
                self.report(weight, progress);
                Ok(())
            }
            // Boxed: redirects are rare, and their state need not size every probe.
            Answer::Redirect { code, location } => {
                Box::pin(self.follow(dial, progress, code, location)).await
            }
        }
    }

    /// Reports the weight a healthy answer gave (the probe damps it).
    fn report(&self, weight: Option<f64>, progress: &Progress) {
        if let Some(raw) = weight {
            progress.report_weight(raw);
        }
    }

    /// A fresh connection, through TLS for https.
    async fn open(&self, dial: &Dial, progress: &Progress) -> Result<Stream, Failure> {
        let setup = SocketSetup {
            nodelay: self.tls.is_some() || !self.req.fits_one_segment(dial.addr.ip()),
            ack_with_first_write: true,
        };
        let tcp = connect::connect(dial.addr, dial.source, setup).await?;
        progress.connected.store(true, Ordering::Relaxed);
        Ok(match &self.tls {
            None => Stream::Plain(tcp),
            Some(tls) => {
                let handshake = tls.handshake(tcp, dial.addr.ip(), progress);
                Stream::Tls(Box::new(Box::pin(handshake).await?))
            }
        })
    }

    /// Follows the redirect (`code`, `location`) the check's request was answered with,
    /// each hop over a fresh connection to the same address, until an answer is judged or
    /// `follow_redirects` hops are spent.
    async fn follow(
        &self,
        dial: &Dial,
        progress: &Progress,
        mut code: u16,
        mut location: String,
    ) -> Result<(), Failure> {
        let mut previous = None;
        for _ in 0..self.req.redirect_limit() {
            let ip = dial.addr.ip();
            let (hop, head) = self.req.follow(ip, previous.as_ref(), code, &location)?;
            let head = HeadParts::whole(&head);
            let answer = match &mut self.open(dial, progress).await? {
                Stream::Plain(tcp) => self.req.send(tcp, head, false).await?,
                Stream::Tls(tls) => self.req.send(tls.as_mut(), head, false).await?,
            };
            match answer {
                Answer::Healthy { weight, .. } => {
                    self.report(weight, progress);
                    return Ok(());
                }
                Answer::Redirect {
                    code: next,
                    location: to,
                } => (code, location) = (next, to),
            }
            previous = Some(hop);
        }
        Err(Failure::Answer {
            label: "redirect",
            detail: format!(
                "more than {} redirects (follow_redirects); the last to {location:?}",
                self.req.redirect_limit()
            ),
        })
    }

    /// One request to `dial` on `stream`, which has carried `carried` probes before; a
    /// connection that can carry more goes into `kept`, any other is dropped (closed with
    /// an RST).
    async fn exchange(
        &self,
        mut stream: Stream,
        dial: &Dial,
        carried: u32,
        kept: &mut Option<KeptConnection>,
    ) -> Result<Answer, Failure> {
        let carried = carried + 1;
        let keep = carried < self.per_connection;
        let ip = dial.addr.ip();
        let answer = match &mut stream {
            Stream::Plain(tcp) => self.req.exchange(tcp, ip, keep).await?,
            Stream::Tls(tls) => Box::pin(self.req.exchange(tls.as_mut(), ip, keep)).await?,
        };
        if let Answer::Healthy { reusable: true, .. } = answer {
            *kept = Some(KeptConnection {
                link: Link::Stream(stream),
                carried,
            });
        }
        Ok(answer)
    }
}

impl ProbeKind for HttpProbe {
    fn attempt<'a>(
        &'a self,
        dial: &'a Dial,
        progress: &'a Progress,
        kept: &'a mut Option<KeptConnection>,
    ) -> Attempt<'a> {
        Box::pin(self.run(dial, progress, kept))
    }

    fn reported_weight(&self) -> Option<&ReportedWeight> {
        self.req.reported_weight()
    }
}
