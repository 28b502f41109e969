//! What the tracker keeps per target: its verdict (hysteresis, flap damping, and under
//! `[ring]` the other members' verdicts), and the counts `/status` shows.

use std::num::NonZeroU64;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::damping::FlapDamping;
use crate::hysteresis::{Health, Hysteresis, Transition};
use crate::probe::{Failure, ProbeResult};
use crate::ring::combine::Vantage;

use super::wall::{CertExpiry, Wall};

/// What the tracker knows about one target: 104 bytes (times kept as [`Wall`]s, what
/// few targets have boxed), one for each of up to millions of targets.
pub(in crate::tracker) struct TargetState {
    pub(in crate::tracker) hysteresis: Hysteresis,
    /// Flap damping, when the target's check turns it on (boxed: most checks do not, and
    /// inline it was a third of every target's state).
    pub(in crate::tracker) damping: Option<Box<FlapDamping>>,
    /// The latest result and when it arrived.
    pub(in crate::tracker) last: Option<Latest>,
    /// When the verdict last changed.
    since: Option<Wall>,
    pub(in crate::tracker) probes: u64,
    pub(in crate::tracker) failures: u64,
    /// Probes failed in a row up to the latest, whatever the verdict (the hysteresis
    /// counts only those that disagree with it).
    pub(in crate::tracker) failing: u32,
    /// Verdict changes since start.
    pub(in crate::tracker) transitions: u64,
    /// What a target has only once it failed or reported a weight; `None` while it holds
    /// nothing (8 bytes for a target that never failed, where inline it was 24).
    rare: Option<Box<Rare>>,
    /// With `[ring]`: the verdicts of every replica probing it, combined.
    pub(in crate::tracker) shared: Option<Box<Shared>>,
}

/// What few targets have: a failure, a down spell or a reported weight.
#[derive(Debug, Default)]
struct Rare {
    /// When the first of the failures in a row up to the latest arrived: where a down
    /// verdict's harm began (the availability ledger counts a dead address served from
    /// here, not from the verdict).
    failing_since: Option<Wall>,
    /// Time spent down before the current verdict (the current down spell is added when
    /// shown), in nanoseconds (584 years; 8 bytes where a `Duration` takes 16).
    downtime_ns: u64,
    /// The weight its last healthy answer reported (`reported_weight`); `None`: the
    /// configured weight.
    weight: Option<u32>,
}

impl Rare {
    /// Whether it holds nothing a target without it would not.
    fn is_empty(&self) -> bool {
        self.failing_since.is_none() && self.downtime_ns == 0 && self.weight.is_none()
    }
}

/// A target's verdicts with `[ring]`: this replica's own (its hysteresis, while it probes
/// the target) and the other probing members', combined by [`crate::ring::combine`].
#[derive(Debug)]
pub(in crate::tracker) struct Shared {
    /// Whether this replica probes it (its gate is open).
    pub(in crate::tracker) local: bool,
    /// Other members' verdicts, by member (the index of its identity in
    /// [`super::Verdicts`]' table of members: 4 bytes a verdict, where the identity's
    /// pointer took 16 and made the entry 24). A slice of exactly the owners, not a `Vec`:
    /// it changes only when ownership does.
    peers: Box<[PeerVantage]>,
    /// The combined verdict: what decides publication.
    pub(in crate::tracker) combined: Health,
    /// Since when no member probes it (its owners all left) while its last verdict stands,
    /// in milliseconds since the Unix epoch (8 bytes, where a `SystemTime` takes 16).
    unowned_since: Option<NonZeroU64>,
}

/// One other member's verdict on a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::tracker) struct PeerVantage {
    /// The member: its place in the table of members' identities.
    pub(in crate::tracker) member: u16,
    pub(in crate::tracker) vantage: Vantage,
}

/// What is kept of a target's latest result: what `/status` and the logs show of it, in 32
/// bytes. A [`ProbeResult`] kept whole was 120 bytes a target, most of them for a failure's
/// text that only a failing target has.
#[derive(Debug)]
pub(in crate::tracker) struct Latest {
    /// Why it failed; `None`: it passed. Boxed, since a failing target is the exception.
    failure: Option<Box<Failure>>,
    /// How long it took, in microseconds (saturating: a probe's deadline is seconds).
    latency_us: u32,
    /// When it arrived.
    at: Wall,
    /// When the certificate it was shown stops being valid (TLS kinds): the gauge of it is
    /// set only when this changes.
    cert_not_after: CertExpiry,
}

impl Latest {
    /// What is kept of `result`, arrived at `at`.
    pub(in crate::tracker) fn of(result: ProbeResult, at: SystemTime) -> Latest {
        Latest {
            failure: result.outcome.err().map(Box::new),
            latency_us: u32::try_from(result.latency.as_micros()).unwrap_or(u32::MAX),
            at: Wall::of(at),
            cert_not_after: CertExpiry::of(result.cert_not_after),
        }
    }

    /// When it arrived.
    pub(in crate::tracker) fn at(&self) -> SystemTime {
        self.at.time()
    }

    /// When the certificate it was shown stops being valid, if it was shown one.
    pub(in crate::tracker) fn cert_not_after(&self) -> Option<SystemTime> {
        self.cert_not_after.time()
    }

    /// Whether it passed.
    pub(in crate::tracker) fn ok(&self) -> bool {
        self.failure.is_none()
    }

    /// `ok` or the failure's text, as [`ProbeResult::reason`] says it.
    pub(in crate::tracker) fn reason(&self) -> String {
        self.failure
            .as_ref()
            .map_or_else(|| "ok".into(), |f| f.to_string())
    }

    /// How long it took.
    pub(in crate::tracker) fn latency(&self) -> Duration {
        Duration::from_micros(self.latency_us.into())
    }
}

impl Shared {
    pub(in crate::tracker) fn new() -> Box<Shared> {
        Box::new(Shared {
            local: false,
            peers: Box::new([]),
            combined: Health::Unknown,
            unowned_since: None,
        })
    }

    /// The other members' verdicts.
    pub(in crate::tracker) fn peers(&self) -> impl Iterator<Item = Vantage> + '_ {
        self.peers.iter().map(|p| p.vantage)
    }

    /// Whether another member has a verdict of the target.
    pub(in crate::tracker) fn has_peers(&self) -> bool {
        !self.peers.is_empty()
    }

    /// Member `member`'s verdict is `vantage` (`Unknown`: it has none).
    pub(in crate::tracker) fn set_peer(&mut self, member: u16, vantage: Vantage) {
        let at = self.peers.iter().position(|p| p.member == member);
        match (at, vantage.health) {
            (Some(_), Health::Unknown) => {
                self.drop_peer(member);
            }
            (Some(i), _) => self.peers[i].vantage = vantage,
            (None, Health::Unknown) => {}
            (None, _) => {
                let mut peers = std::mem::take(&mut self.peers).into_vec();
                peers.push(PeerVantage { member, vantage });
                self.peers = peers.into_boxed_slice();
            }
        }
    }

    /// Forgets member `member`'s verdict; whether it had one.
    pub(in crate::tracker) fn drop_peer(&mut self, member: u16) -> bool {
        if !self.peers.iter().any(|p| p.member == member) {
            return false;
        }
        let peers = std::mem::take(&mut self.peers).into_vec();
        self.peers = peers.into_iter().filter(|p| p.member != member).collect();
        true
    }

    /// Since when no member probes the target, if none does.
    pub(in crate::tracker) fn unowned_since(&self) -> Option<SystemTime> {
        let ms = self.unowned_since?.get();
        Some(crate::clock::after_epoch(Duration::from_millis(ms)))
    }

    /// No member probes the target since `since` (`None`: one does).
    pub(in crate::tracker) fn set_unowned_since(&mut self, since: Option<SystemTime>) {
        self.unowned_since = since.map(|t| {
            let ms = crate::clock::since_epoch(t).as_millis();
            NonZeroU64::new(u64::try_from(ms).unwrap_or(u64::MAX)).unwrap_or(NonZeroU64::MIN)
        });
    }
}

impl TargetState {
    pub(in crate::tracker) fn new(
        damping: Option<ho_config::Damping>,
        now: Instant,
    ) -> TargetState {
        TargetState {
            hysteresis: Hysteresis::new(),
            damping: damping.map(|d| Box::new(FlapDamping::new(d, now))),
            last: None,
            since: None,
            probes: 0,
            failures: 0,
            failing: 0,
            transitions: 0,
            rare: None,
            shared: None,
        }
    }

    /// Whether the target has a verdict to answer with: this replica's own, or under
    /// `[ring]` the owners' combined. A replica joining a running ring answers every name
    /// from its peers' stream long before it probes anything, so it is ready then.
    pub(in crate::tracker) fn known(&self) -> bool {
        self.hysteresis.state() != Health::Unknown
            || self
                .shared
                .as_ref()
                .is_some_and(|s| s.combined != Health::Unknown)
    }

    /// The health that decides publication: the verdict, or down while flap damping holds
    /// the target out.
    pub(in crate::tracker) fn effective(&self) -> Health {
        if self.damped() {
            Health::Down
        } else if let Some(shared) = &self.shared {
            shared.combined
        } else {
            self.hysteresis.state()
        }
    }

    /// Counts a judged `result` that arrived at `wall`; whether it changed the weight in
    /// effect (a healthy answer says its damper's, or none: the configured one).
    pub(in crate::tracker) fn count(&mut self, result: &ProbeResult, wall: SystemTime) -> bool {
        self.probes += 1;
        if result.ok() {
            self.failing = 0;
            if let Some(rare) = &mut self.rare {
                rare.failing_since = None;
            }
        } else {
            self.failures += 1;
            if self.failing == 0 {
                self.rare().failing_since = Some(Wall::of(wall));
            }
            self.failing = self.failing.saturating_add(1);
        }
        let reweighed = result.ok() && self.weight() != result.weight;
        if reweighed {
            self.rare().weight = result.weight;
        }
        self.tidy();
        reweighed
    }

    /// The weight its last healthy answer reported; `None`: the configured weight.
    pub(in crate::tracker) fn weight(&self) -> Option<u32> {
        self.rare.as_ref().and_then(|r| r.weight)
    }

    /// The rare part, made if the target had none.
    fn rare(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Drops the rare part once it holds nothing again (a failure that passed).
    fn tidy(&mut self) {
        if self.rare.as_deref().is_some_and(Rare::is_empty) {
            self.rare = None;
        }
    }

    /// When the verdict last changed.
    pub(in crate::tracker) fn since(&self) -> Option<SystemTime> {
        self.since.map(Wall::time)
    }

    /// Time spent down before the current verdict.
    pub(in crate::tracker) fn downtime(&self) -> Duration {
        Duration::from_nanos(self.rare.as_ref().map_or(0, |r| r.downtime_ns))
    }

    /// Counts the verdict change `t` at `wall`; when it went down, since when the target
    /// has been failing.
    pub(in crate::tracker) fn record(
        &mut self,
        t: Transition,
        wall: SystemTime,
    ) -> Option<SystemTime> {
        self.transitions += 1;
        if let (Health::Down, Some(since)) = (t.from, self.since()) {
            let spell = wall.duration_since(since).unwrap_or_default();
            let spell = u64::try_from(spell.as_nanos()).unwrap_or(u64::MAX);
            let rare = self.rare();
            rare.downtime_ns = rare.downtime_ns.saturating_add(spell);
            self.tidy();
        }
        self.since = Some(Wall::of(wall));
        let failing_since = self.rare.as_ref().and_then(|r| r.failing_since);
        (t.to == Health::Down)
            .then_some(failing_since)
            .flatten()
            .map(Wall::time)
    }

    /// Whether flap damping holds the target out of DNS now.
    pub(in crate::tracker) fn damped(&self) -> bool {
        self.damping.as_ref().is_some_and(|d| d.suppressed())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Latest, TargetState};
    use crate::probe::{Failure, ProbeResult};

    /// Seeded results of every failure shape: what is kept says what the result said.
    #[test]
    fn the_latest_keeps_what_status_shows_of_a_result() {
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        let mut next = |below: u64| rng.u64(..below);
        for _ in 0..500 {
            let text = format!("detail {}", next(1_000_000));
            let outcome = match next(6) {
                0 => Ok(()),
                1 => Err(Failure::Timeout),
                2 => Err(Failure::Status(200 + next(400) as u16)),
                3 => Err(Failure::Io(text)),
                4 => Err(Failure::Tls(text)),
                _ => Err(Failure::Answer {
                    label: "rcode",
                    detail: text,
                }),
            };
            let nanos = next(20_000_000_000);
            let result = ProbeResult {
                outcome,
                latency: Duration::from_nanos(nanos),
                reused: next(2) == 0,
                cert_not_after: (next(2) == 0)
                    .then(|| crate::clock::after_epoch(Duration::from_secs(next(1 << 33)))),
                weight: None,
            };
            let at = crate::clock::after_epoch(Duration::from_nanos(next(1 << 62)));
            let latest = Latest::of(result.clone(), at);
            assert_eq!(latest.ok(), result.ok());
            assert_eq!(latest.reason(), result.reason());
            assert_eq!(latest.latency(), Duration::from_micros(nanos / 1000));
            assert_eq!(latest.at(), at);
            assert_eq!(latest.cert_not_after(), result.cert_not_after);
        }
    }

    /// Seeded results and verdict changes: the failures' start, the downtime and the weight
    /// kept out of line read as the inline fields kept before did, and a target whose
    /// failure passed holds nothing out of line again.
    #[test]
    fn what_few_targets_have_reads_as_kept_inline() {
        use crate::hysteresis::{Health, Transition};
        let mut rng = fastrand::Rng::with_seed(0xd1b5_4a32_d192_ed03);
        let mut next = |below: u64| rng.u64(..below);
        let start = crate::clock::after_epoch(Duration::from_secs(1_700_000_000));
        let now = tokio::time::Instant::now();
        let mut state = TargetState::new(None, now);
        // The old representation: plain fields.
        let (mut failing_since, mut since, mut downtime, mut weight) =
            (None, None, Duration::ZERO, None);
        let mut failing = 0;
        for step in 0..20_000u64 {
            // A new target now and then, or a first down spell would keep the rare part.
            if step % 200 == 0 {
                state = TargetState::new(None, now);
                (failing_since, since, downtime, weight) = (None, None, Duration::ZERO, None);
                failing = 0;
            }
            let wall = start + Duration::from_nanos(step * 1_000_000_007 + next(1_000));
            if next(4) == 0 {
                let [from, to] =
                    [0, 1].map(|_| [Health::Up, Health::Down, Health::Unknown][next(3) as usize]);
                let t = Transition { from, to };
                if let (Health::Down, Some(s)) = (from, since) {
                    downtime += wall.duration_since(s).unwrap_or_default();
                }
                since = Some(wall);
                let want = (to == Health::Down).then_some(failing_since).flatten();
                assert_eq!(state.record(t, wall), want, "step {step}");
            } else {
                let ok = next(3) != 0;
                let result = ProbeResult {
                    outcome: if ok { Ok(()) } else { Err(Failure::Timeout) },
                    latency: Duration::ZERO,
                    reused: false,
                    cert_not_after: None,
                    weight: (next(4) == 0).then(|| next(3) as u32),
                };
                if ok {
                    failing = 0;
                    failing_since = None;
                } else {
                    if failing == 0 {
                        failing_since = Some(wall);
                    }
                    failing += 1;
                }
                let reweighed = ok && weight != result.weight;
                if reweighed {
                    weight = result.weight;
                }
                assert_eq!(state.count(&result, wall), reweighed, "step {step}");
            }
            assert_eq!(state.weight(), weight, "step {step}");
            assert_eq!(state.downtime(), downtime, "step {step}");
            assert_eq!(state.since(), since, "step {step}");
            let empty = failing_since.is_none() && downtime.is_zero() && weight.is_none();
            assert_eq!(state.rare.is_none(), empty, "step {step}");
        }
    }

    /// A target's state is what the tracker holds for each of up to millions of targets.
    #[test]
    fn a_targets_state_stays_compact() {
        assert!(
            std::mem::size_of::<TargetState>() <= 104,
            "{} bytes",
            std::mem::size_of::<TargetState>()
        );
    }

    /// Seeded verdicts of a few members, set and dropped, against a map of them.
    #[test]
    fn a_targets_peers_are_each_members_last_verdict() {
        use super::Shared;
        use crate::hysteresis::Health;
        use crate::ring::combine::Vantage;
        let mut rng = fastrand::Rng::with_seed(0x5851_f42d_4c95_7f2d);
        let mut next = |below: u64| rng.u64(..below);
        let mut shared = Shared::new();
        let mut oracle = std::collections::BTreeMap::new();
        for step in 0..5_000 {
            let member = next(5) as u16;
            if next(4) == 0 {
                assert_eq!(shared.drop_peer(member), oracle.remove(&member).is_some());
            } else {
                let health = [Health::Up, Health::Down, Health::Unknown][next(3) as usize];
                let vantage = Vantage {
                    health,
                    impaired: next(2) == 0,
                };
                shared.set_peer(member, vantage);
                if health == Health::Unknown {
                    oracle.remove(&member);
                } else {
                    oracle.insert(member, vantage);
                }
            }
            let mut got: Vec<(u16, Vantage)> =
                shared.peers.iter().map(|p| (p.member, p.vantage)).collect();
            got.sort_by_key(|(m, _)| *m);
            let want: Vec<(u16, Vantage)> = oracle.iter().map(|(m, v)| (*m, *v)).collect();
            assert_eq!(got, want, "step {step}");
            assert_eq!(shared.has_peers(), !oracle.is_empty());
        }
    }

    /// `[ring]`: every replica holds a [`Shared`] for each target, and for a target it does
    /// not probe that and the owners' verdicts in it are all it adds.
    #[test]
    fn a_targets_shared_verdicts_stay_compact() {
        use super::{PeerVantage, Shared};
        assert!(std::mem::size_of::<PeerVantage>() <= 4);
        assert!(
            std::mem::size_of::<Shared>() <= 32,
            "{} bytes",
            std::mem::size_of::<Shared>()
        );
    }
}
