//! The blast-radius brake (`[brake]`): however many endpoints fail at once, at most so many
//! addresses leave DNS per window, per tenant and in all. A failure of a few gateways goes
//! through at once; a wave (the prober's own network failing, a bad config, a dependency
//! every gateway shares) is held at the limit: the addresses past it stay published until
//! the window frees up, when the tenant is decided again, or until an operator releases
//! the brake. Additions are never held.
//!
//! The brake sits between a tenant's decision and its snapshot, so it applies whatever
//! decided the set: this cluster's verdicts or the clusters' vote.
//!
//! It also checks the prober itself (on by default): when an unusual share of all targets
//! turns from up to down at once (`impaired_share` of them within `impaired_window`, at
//! least `impaired_min_targets`), the likelier cause is this prober's own network (its
//! uplink, conntrack, a node in trouble) rather than that many unrelated gateways failing
//! together: Consul's Lifeguard discounts a member's suspicions when it is itself slow;
//! here the prober holds every withdrawal (and, voting, its view) until fewer than half
//! that share are down, or an operator releases the brake.

use std::collections::{BTreeMap, HashMap, VecDeque};

use ho_config::BrakeConfig;
use tokio::time::Instant;

use crate::snapshot::PublishedAddress;

/// What the brake lets a tenant publish.
pub struct Admission {
    /// The addresses to publish: those decided, plus the withdrawals held back.
    pub addresses: Vec<PublishedAddress>,
    /// Withdrawals held back.
    pub held: usize,
    /// When the window frees up for this tenant, if it holds withdrawals.
    pub retry_at: Option<Instant>,
}

/// The brake of one tracker.
pub struct Brake {
    config: BrakeConfig,
    /// Withdrawals let through within the window, oldest first: when, and whose.
    recent: VecDeque<(Instant, String)>,
    /// Withdrawals held back now, per tenant.
    held: BTreeMap<String, usize>,
    /// Set while an operator's release is applied: every withdrawal goes through.
    released: bool,
    /// Targets that turned from up to down within the self-check's window, oldest first:
    /// when, and which.
    downs: VecDeque<(Instant, usize)>,
    /// How many of `downs` each target has: the self-check counts targets, so one endpoint
    /// flapping many times within the window is one target, not a wave.
    down_targets: HashMap<usize, u32>,
    /// Since when this prober judges itself impaired, if it does.
    impaired_since: Option<Instant>,
    /// Since when an impaired prober has seen few enough targets failing, if it has.
    recovering_since: Option<Instant>,
}

/// Whether an impaired prober may resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Not impaired, or still too many targets failing.
    No,
    /// Few enough have failed for `impaired_window`: resume now.
    Now,
    /// Few enough fail; ask again at this time (their stale verdicts get probed meanwhile).
    At(Instant),
}

impl Brake {
    /// A brake with `config`'s limits (none: it never holds).
    pub fn new(config: BrakeConfig) -> Brake {
        Brake {
            config,
            recent: VecDeque::new(),
            held: BTreeMap::new(),
            released: false,
            downs: VecDeque::new(),
            down_targets: HashMap::new(),
            impaired_since: None,
            recovering_since: None,
        }
    }

    /// Since when this prober judges itself impaired (every withdrawal held), if it does.
    pub fn impaired_since(&self) -> Option<Instant> {
        self.impaired_since
    }

    /// `target` turned from up to down at `now`, out of `targets`; true when that makes
    /// this prober judge itself impaired.
    pub fn went_down(&mut self, now: Instant, target: usize, targets: usize) -> bool {
        let c = &self.config;
        if c.impaired_share <= 0.0 || self.impaired_since.is_some() {
            return false;
        }
        self.downs.push_back((now, target));
        *self.down_targets.entry(target).or_default() += 1;
        while let Some(&(at, old)) = self.downs.front() {
            if now.duration_since(at) < c.impaired_window {
                break;
            }
            self.downs.pop_front();
            if let Some(n) = self.down_targets.get_mut(&old) {
                *n -= 1;
                if *n == 0 {
                    self.down_targets.remove(&old);
                }
            }
        }
        let n = self.down_targets.len();
        let impaired =
            n >= c.impaired_min_targets as usize && n as f64 >= c.impaired_share * targets as f64;
        if impaired {
            self.impaired_since = Some(now);
            self.downs.clear();
            self.down_targets.clear();
        }
        impaired
    }

    /// With `failing` of `targets` down or failing at `now`: whether an impaired prober
    /// recovered, i.e. fewer than half of `impaired_share` have been failing for a whole
    /// `impaired_window` (so every target is probed again before withdrawals resume, and a
    /// verdict left from the impairment does not withdraw a gateway that is up).
    pub fn recovery(&mut self, failing: usize, targets: usize, now: Instant) -> Recovery {
        if self.impaired_since.is_none() {
            return Recovery::No;
        }
        if failing as f64 >= self.config.impaired_share / 2.0 * targets as f64 {
            self.recovering_since = None;
            return Recovery::No;
        }
        let since = *self.recovering_since.get_or_insert(now);
        let at = since + self.config.impaired_window;
        if now >= at {
            self.impaired_since = None;
            self.recovering_since = None;
            Recovery::Now
        } else {
            Recovery::At(at)
        }
    }

    /// New limits (a reload); the window's history is kept.
    pub fn set_config(&mut self, config: BrakeConfig) {
        self.config = config;
    }

    /// Withdrawals held back now, per tenant (only tenants holding some).
    pub fn held(&self) -> &BTreeMap<String, usize> {
        &self.held
    }

    /// Lets every withdrawal through while set (an operator's release: the tenants
    /// holding some are decided again in between); a release also ends a self-judged
    /// impairment.
    pub fn set_released(&mut self, released: bool) {
        self.released = released;
        if released {
            self.impaired_since = None;
            self.recovering_since = None;
        }
    }

    /// Forgets a tenant (removed by a reload).
    pub fn forget(&mut self, tenant: &str) {
        self.held.remove(tenant);
    }

    /// What `tenant`, which last published `last`, may publish of `wanted` at `now`.
    pub fn admit(
        &mut self,
        tenant: &str,
        last: &[PublishedAddress],
        mut wanted: Vec<PublishedAddress>,
        now: Instant,
    ) -> Admission {
        let mut withdrawn: Vec<&PublishedAddress> = last
            .iter()
            .filter(|a| !wanted.iter().any(|w| w.address == a.address))
            .collect();
        let impaired = self.impaired_since.is_some() && !self.released;
        if !(self.config.enabled() || impaired) || withdrawn.is_empty() {
            self.held.remove(tenant);
            return Admission {
                addresses: wanted,
                held: 0,
                retry_at: None,
            };
        }
        while self
            .recent
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) >= self.config.window)
        {
            self.recent.pop_front();
        }
        let budget = if self.released {
            usize::MAX
        } else if impaired {
            0
        } else {
            self.budget(tenant, last.len())
        };
        let allowed = withdrawn.len().min(budget);
        self.recent
            .extend(std::iter::repeat_n((now, tenant.to_owned()), allowed));
        withdrawn.sort_by_key(|a| a.address);
        let kept = &withdrawn[allowed..];
        if kept.is_empty() {
            self.held.remove(tenant);
            return Admission {
                addresses: wanted,
                held: 0,
                retry_at: None,
            };
        }
        wanted.extend(kept.iter().map(|a| (*a).clone()));
        self.held.insert(tenant.to_owned(), kept.len());
        Admission {
            addresses: wanted,
            held: kept.len(),
            // An impaired prober decides again when it recovers, not on a timer.
            retry_at: if impaired { None } else { self.frees_up() },
        }
    }

    /// Withdrawals `tenant` (with `published` addresses) may make now.
    fn budget(&self, tenant: &str, published: usize) -> usize {
        let c = &self.config;
        let share = c.per_tenant_share.map(|s| {
            let n = (s * published as f64).ceil() as usize;
            n.max(1)
        });
        let per_tenant = [c.per_tenant.map(|n| n as usize), share]
            .into_iter()
            .flatten()
            .min();
        let used_here = self.recent.iter().filter(|(_, t)| t == tenant).count();
        let left_here = per_tenant.map_or(usize::MAX, |n| n.saturating_sub(used_here));
        let left_total = c.total.map_or(usize::MAX, |n| {
            (n as usize).saturating_sub(self.recent.len())
        });
        left_here.min(left_total)
    }

    /// When the oldest withdrawal in the window leaves it (the soonest any budget can
    /// grow; a tenant whose own budget is still spent then is given the next time).
    fn frees_up(&self) -> Option<Instant> {
        self.recent.front().map(|(at, _)| *at + self.config.window)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn addresses(n: u8) -> Vec<PublishedAddress> {
        (1..=n)
            .map(|i| {
                let ip = format!("10.0.0.{i}");
                PublishedAddress::of(&ip, ip.parse().unwrap(), 1, Default::default())
            })
            .collect()
    }

    fn config(per_tenant: Option<u32>, share: Option<f64>, total: Option<u32>) -> BrakeConfig {
        BrakeConfig {
            window: Duration::from_secs(60),
            per_tenant,
            per_tenant_share: share,
            total,
            ..BrakeConfig::default()
        }
    }

    #[test]
    fn withdrawals_past_the_tenant_limit_wait_for_the_window() {
        let mut b = Brake::new(config(Some(2), None, None));
        let t0 = Instant::now();
        let all = addresses(10);
        let a = b.admit("t", &all, all[..4].to_vec(), t0);
        assert_eq!((a.addresses.len(), a.held), (8, 4), "2 of 6 withdrawn");
        assert_eq!(a.retry_at, Some(t0 + Duration::from_secs(60)));
        assert_eq!(b.held().get("t"), Some(&4));
        let a = b.admit(
            "t",
            &a.addresses,
            all[..4].to_vec(),
            t0 + Duration::from_secs(30),
        );
        assert_eq!(a.held, 4, "the window is still full");
        let later = t0 + Duration::from_secs(60);
        let a = b.admit("t", &a.addresses, all[..4].to_vec(), later);
        assert_eq!(
            (a.addresses.len(), a.held),
            (6, 2),
            "two more after the window"
        );
        let a = b.admit("other", &all, all[..9].to_vec(), later);
        assert_eq!(a.held, 0, "each tenant has its own budget");
    }

    #[test]
    fn a_share_and_a_total_limit_and_additions_go_through() {
        let mut b = Brake::new(config(None, Some(0.25), Some(3)));
        let now = Instant::now();
        let all = addresses(10);
        let a = b.admit("a", &all, all[..5].to_vec(), now);
        assert_eq!(a.held, 2, "a quarter of 10, rounded up: 3 of 5");
        let a = b.admit("b", &all, all[..9].to_vec(), now);
        assert_eq!(a.held, 1, "the total of 3 is spent");
        let a = b.admit("c", &all[..2], all.clone(), now);
        assert_eq!(
            (a.addresses.len(), a.held),
            (10, 0),
            "additions are never held"
        );
    }

    #[test]
    fn a_release_lets_every_held_withdrawal_through_once() {
        let mut b = Brake::new(config(Some(1), None, None));
        let now = Instant::now();
        let all = addresses(5);
        let held = b.admit("t", &all, all[..1].to_vec(), now);
        assert_eq!(held.held, 3);
        b.set_released(true);
        let released = b.admit("t", &held.addresses, all[..1].to_vec(), now);
        b.set_released(false);
        assert_eq!((released.addresses.len(), released.held), (1, 0));
        assert!(b.held().is_empty());
        let next = b.admit("t", &all, all[..3].to_vec(), now);
        assert_eq!(next.held, 2, "the limit holds again after the release");
    }

    #[test]
    fn a_wave_of_failures_makes_the_prober_judge_itself_impaired() {
        let mut b = Brake::new(BrakeConfig::default());
        let t0 = Instant::now();
        for i in 0..19 {
            assert!(
                !b.went_down(t0 + Duration::from_millis(i), i as usize, 30),
                "{i}: fewer than 20"
            );
        }
        assert!(
            b.went_down(t0 + Duration::from_millis(19), 19, 30),
            "20 of 30 within 10 s"
        );
        let all = addresses(4);
        let a = b.admit("t", &all, all[..1].to_vec(), t0);
        assert_eq!(
            a.held, 3,
            "every withdrawal held, without any limit configured"
        );
        assert_eq!(a.retry_at, None);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(
            b.recovery(8, 30, t1),
            Recovery::No,
            "8 of 30: more than a quarter"
        );
        let back = t1 + Duration::from_secs(10);
        assert_eq!(
            b.recovery(7, 30, t1),
            Recovery::At(back),
            "a window to settle"
        );
        assert_eq!(
            b.recovery(9, 30, t1),
            Recovery::No,
            "worse again: start over"
        );
        assert_eq!(b.recovery(2, 30, t1), Recovery::At(back));
        let a = b.admit("t", &all, all[..1].to_vec(), t1);
        assert_eq!(a.held, 3, "still held while it settles");
        assert_eq!(b.recovery(2, 30, back), Recovery::Now);
        let a = b.admit("t", &all, all[..1].to_vec(), t0);
        assert_eq!(a.held, 0);
        let mut spread = Brake::new(BrakeConfig::default());
        for i in 0..40 {
            assert!(
                !spread.went_down(t0 + Duration::from_secs(i), i as usize, 40),
                "one a second"
            );
        }
        let mut big = Brake::new(BrakeConfig::default());
        for i in 0..20 {
            assert!(!big.went_down(t0, i, 1000), "{i}: 20 of 1,000 is no wave");
        }
    }

    /// The self-check counts targets, not their downs: endpoints flapping many times within
    /// the window (fast re-checks of a noisy gateway) are no wave, however often they flap;
    /// the same downs spread over as many targets are one. Seeded: the expected verdict is
    /// the number of distinct targets the script used, against the default 20 and half.
    #[test]
    fn flapping_targets_count_once_each_in_the_self_check() {
        let mut rng = fastrand::Rng::with_seed(0xb7a4e);
        let t0 = Instant::now();
        for _ in 0..200 {
            let mut b = Brake::new(BrakeConfig::default());
            let targets = rng.usize(2..60);
            let flappers = rng.usize(1..targets.min(25));
            let mut seen = std::collections::HashSet::new();
            let mut impaired = false;
            for k in 0..400u64 {
                let target = rng.usize(0..flappers);
                seen.insert(target);
                let distinct = seen.len();
                let expect = distinct >= 20 && distinct * 2 >= targets;
                let got = b.went_down(t0 + Duration::from_millis(k * 20), target, targets);
                assert_eq!(got, expect && !impaired, "{distinct} of {targets} targets");
                impaired |= got;
            }
        }
    }

    #[test]
    fn without_limits_nothing_is_held() {
        let mut b = Brake::new(BrakeConfig::default());
        let all = addresses(10);
        let a = b.admit("t", &all, all[..1].to_vec(), Instant::now());
        assert_eq!((a.addresses.len(), a.held), (1, 0));
    }
}
