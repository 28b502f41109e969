//! Test servers of cloud DNS APIs, each written from the provider's published API reference
//! (no emulator of these services can be installed here): [`cloudflare`], [`google`] (Cloud
//! DNS and its token endpoints), [`azure`] (Azure DNS through Resource Manager, and Entra's
//! token endpoints), [`external_dns`] (a provider of external-dns's webhook protocol). Each module's doc lists what it implements. The integration tests run
//! them in process; the rehearsals run them as the `ho-cloud-fake` program, with the
//! provider's published request limit ([`Limit`]) so a rehearsal meets the throttling a
//! real zone would.

pub mod azure;
pub mod cloudflare;
pub mod external_dns;
pub mod google;

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A provider's request limit: admits a request, or says how long until one would be.
pub trait Admit: Send + Sync {
    /// Admits one request now; when none is allowed, how long until one is.
    fn admit(&self) -> Result<(), Duration>;
}

/// A provider's request limit: a bucket of `burst` requests refilled at `per_second`.
pub struct Limit {
    per_second: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl Limit {
    /// A full bucket.
    pub fn new(per_second: f64, burst: f64) -> Limit {
        Limit {
            per_second,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }
}

impl Admit for Limit {
    /// Takes one request's token; when none is left, how long until one is.
    fn admit(&self) -> Result<(), Duration> {
        let mut state = self.state.lock().expect("not poisoned");
        let (tokens, at) = *state;
        let now = Instant::now();
        let tokens =
            (tokens + now.duration_since(at).as_secs_f64() * self.per_second).min(self.burst);
        if tokens >= 1.0 {
            *state = (tokens - 1.0, now);
            Ok(())
        } else {
            *state = (tokens, now);
            Err(Duration::from_secs_f64((1.0 - tokens) / self.per_second))
        }
    }
}

/// A provider's request limit as DNS APIs that count in a sliding second have it: at most
/// `allowance` requests admitted in any one second, none more however long it was quiet.
pub struct Window {
    allowance: usize,
    /// When the requests of the last second were admitted, oldest first.
    admitted: Mutex<VecDeque<Instant>>,
}

impl Window {
    /// `allowance` requests in any one second.
    pub fn new(allowance: usize) -> Window {
        Window {
            allowance,
            admitted: Mutex::default(),
        }
    }
}

impl Admit for Window {
    fn admit(&self) -> Result<(), Duration> {
        let second = Duration::from_secs(1);
        let now = Instant::now();
        let mut admitted = self.admitted.lock().expect("not poisoned");
        while admitted
            .front()
            .is_some_and(|&at| now.duration_since(at) >= second)
        {
            admitted.pop_front();
        }
        if admitted.len() < self.allowance {
            admitted.push_back(now);
            return Ok(());
        }
        Err(admitted[0] + second - now)
    }
}

/// Seconds for a `Retry-After` header: at least one.
pub(crate) fn retry_after(wait: Duration) -> String {
    wait.as_secs_f64().ceil().max(1.0).to_string()
}
