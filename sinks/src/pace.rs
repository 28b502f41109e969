//! The request limiter of every HTTP API sink: no more requests in any one second than
//! `max_requests_per_second`, as a provider counting in a sliding second sees them.

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// At most `allowance` requests in any `window`, with no burst on top.
///
/// A token bucket of `rate` refilled at `rate` a second lets a full bucket and a second's
/// refill through in one second (twice the rate); providers that count requests in a
/// sliding second refuse the excess. This limiter remembers when each of its last
/// `allowance` requests was answered instead, and sends the next one only a full window
/// after the oldest of them. A request counts until its answer is back because the provider
/// sees it arrive somewhere between sending and answering: however the network delays each
/// request, no window of the provider's clock holds more than the allowance.
///
/// Clock-free at its core ([`Pacer::ready_at`], [`Pacer::answered`]); [`Pacer::around`]
/// is the one async step that waits and stamps.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// Requests allowed in one window.
    allowance: usize,
    /// The window: one second, or longer for a rate under one a second.
    window: Duration,
    /// When each of the last `allowance` requests was answered, oldest first.
    answered: VecDeque<Instant>,
}

impl Pacer {
    /// `rate` requests a second (validated above 0 with the config): its whole number of
    /// requests in any one second (2.5 paces as 2), or under one a second, one request per
    /// `1 / rate` seconds.
    pub fn per_second(rate: f64) -> Pacer {
        let (allowance, window) = if rate >= 1.0 {
            (rate.floor() as usize, Duration::from_secs(1))
        } else {
            (1, Duration::from_secs_f64(1.0 / rate))
        };
        Pacer {
            allowance,
            window,
            answered: VecDeque::with_capacity(allowance),
        }
    }

    /// The earliest a request may be sent, asked at `now`.
    pub fn ready_at(&self, now: Instant) -> Instant {
        match self.answered.front() {
            Some(&oldest) if self.answered.len() >= self.allowance => now.max(oldest + self.window),
            _ => now,
        }
    }

    /// A request sent when [`Pacer::ready_at`] allowed was answered (or failed) at `at`.
    pub fn answered(&mut self, at: Instant) {
        self.answered.push_back(at);
        while self.answered.len() > self.allowance {
            self.answered.pop_front();
        }
    }

    /// Sends `request` (a future that does nothing until polled) when the pace allows, and
    /// counts it until it is answered.
    pub async fn around<T>(&mut self, request: impl Future<Output = T>) -> T {
        tokio::time::sleep_until(self.ready_at(Instant::now())).await;
        let out = request.await;
        self.answered(Instant::now());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests wanted at generated times, each taking a generated time to answer, sent as
    /// the pacer allows. The provider may see a request arrive at any moment between its
    /// sending and its answer; the test counts, for every request, the earlier ones that may
    /// have arrived less than a window before it (answered after its sending minus the
    /// window): never the allowance or more.
    #[test]
    fn no_window_can_hold_more_than_the_allowance_however_requests_are_delayed() {
        for seed in 0..200u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let rate = [0.5, 1.0, 2.5, 5.0, 10.0][rng.usize(..5)];
            let (allowance, window) = if rate >= 1.0 {
                (rate as usize, 1.0)
            } else {
                (1, 1.0 / rate)
            };
            let t0 = Instant::now();
            let at = |i: Instant| i.duration_since(t0).as_secs_f64();
            let mut pacer = Pacer::per_second(rate);
            let (mut wanted, mut free) = (t0, t0);
            let mut sent: Vec<(f64, f64)> = Vec::new();
            for _ in 0..60 {
                wanted += Duration::from_millis(rng.u64(0..400));
                // One request at a time, as a sink sends them.
                let start = pacer.ready_at(wanted.max(free));
                free = start + Duration::from_millis(rng.u64(0..300));
                pacer.answered(free);
                sent.push((at(start), at(free)));
            }
            for (i, &(start, _)) in sent.iter().enumerate() {
                let close = sent[..i]
                    .iter()
                    .filter(|&&(_, answered)| answered > start - window + 1e-9)
                    .count();
                assert!(
                    close < allowance,
                    "seed {seed}, rate {rate}: request {i} {sent:?}"
                );
            }
        }
    }

    #[test]
    fn a_full_second_goes_at_once_then_waits_for_the_first_answer_a_second_on() {
        let t0 = Instant::now();
        let mut pacer = Pacer::per_second(5.0);
        for i in 0..5 {
            assert_eq!(pacer.ready_at(t0), t0);
            pacer.answered(t0 + Duration::from_millis(10 * i));
        }
        assert_eq!(pacer.ready_at(t0), t0 + Duration::from_secs(1));
        pacer.answered(t0 + Duration::from_millis(1000));
        assert_eq!(
            pacer.ready_at(t0),
            t0 + Duration::from_millis(1010),
            "the second oldest now"
        );
    }

    #[test]
    fn a_rate_under_one_spaces_single_requests() {
        let t0 = Instant::now();
        let mut pacer = Pacer::per_second(0.25);
        pacer.answered(t0);
        assert_eq!(pacer.ready_at(t0), t0 + Duration::from_secs(4));
    }
}
