//! Counting a finished round: the zone operations' metrics, each tenant's vote over the
//! reports read (a report that stops parsing counts as it last parsed), and the addresses
//! other clusters contribute.

use super::*;
use crate::multi_cluster::report::is_relayed;
use crate::sink::reports::Rrset;

impl RoundsCore {
    /// Counts the zone operations, what this cluster wrote and, when the round read the
    /// zone and the read succeeded, every tenant's vote.
    pub(super) fn count_round(
        &mut self,
        round: Round,
        Answers { written, read }: Answers,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        if self.count_write(written.as_ref()) {
            self.remember_written(&round);
        }
        let Some(read) = read else {
            return; // a heartbeat out of this cluster's turn to read
        };
        let rounds = self.rounds.entry(round.sink.clone()).or_default();
        let rrsets = match read {
            Ok(rrsets) => rrsets,
            Err(e) => {
                rounds.blind = true;
                self.count_op("read", "error");
                if REPORT_WARNINGS.ready(WARN_EVERY) {
                    warn!(error = %e, "could not read the clusters' reports; the published sets stay");
                }
                return;
            }
        };
        // Time this reader could not watch the zone beyond one round's interval: it says
        // nothing of whether the writers lived (in a zone outage nobody could write), so
        // reports do not age through it.
        let blind_for = match (std::mem::take(&mut rounds.blind), rounds.last_read) {
            (true, Some(last)) => now
                .clock
                .mono
                .saturating_duration_since(last)
                .saturating_sub(self.plan.multi_cluster.report_interval),
            _ => Duration::ZERO,
        };
        rounds.last_read = Some(now.clock.mono);
        self.count_op("read", "ok");
        for e in round.exchanges {
            if !self.tenants.contains_key(&e.tenant) {
                continue;
            }
            let suffix = report_suffix(&e.domain);
            let read: Vec<&Rrset> = rrsets
                .iter()
                .filter(|Rrset { name, .. }| name.ends_with(&suffix))
                .collect();
            let tally = self.count_votes(&e.tenant, e.own, round.leads, &read, now, blind_for);
            fx.push(Effect::Voted {
                tenant: e.tenant,
                tally: Arc::new(tally),
            });
        }
        self.announce_discovered(fx);
    }

    /// Keeps what this round wrote of each tenant's report, so the next heartbeat can tell
    /// whether the report changed since.
    fn remember_written(&mut self, round: &Round) {
        for e in round.exchanges.iter().filter(|e| e.write) {
            if let Some(state) = self.tenants.get_mut(&e.tenant) {
                state.written = Some(Written {
                    owned: e.own.owned.clone(),
                    down: e.own.down.clone(),
                    at_ms: e.own.at_ms,
                });
            }
        }
    }

    /// Counts this round's write of this cluster's reports, if it made one; whether it
    /// succeeded.
    fn count_write<E: std::fmt::Display>(&self, written: Option<&Result<(), E>>) -> bool {
        match written {
            Some(Ok(())) => {
                self.count_op("write", "ok");
                true
            }
            Some(Err(e)) => {
                self.count_op("write", "error");
                if REPORT_WARNINGS.ready(WARN_EVERY) {
                    warn!(error = %e, "could not write this cluster's reports");
                }
                false
            }
            None => false,
        }
    }

    fn count_op(&self, op: &'static str, result: &'static str) {
        self.metrics
            .cluster_reports
            .get_or_create(&ReportOpLabels { op, result })
            .inc();
    }

    /// Counts one tenant's vote from the report rrsets read (a report that stops parsing
    /// keeps counting as it last parsed).
    ///
    /// A report's age is judged on this reader's monotonic clock, as a Lease is: the time
    /// since its stamp last changed here. A live writer rewrites its report every third of
    /// `report_ttl`, so its stamp keeps changing whatever its clock says; a dead one's stops,
    /// and it ages out `report_ttl` after this reader last saw it change. A writer's clock
    /// ahead or behind (by any amount) therefore neither keeps a dead cluster voting nor
    /// drops a live one; the writer's stamp is compared only with itself. A report first
    /// read counts as just written (a reader that starts lets a dead cluster's last report
    /// vote for at most one `report_ttl`, as any cluster's does after its last write).
    /// Reports do not age while this reader could not read the zone (`blind_for`, beyond
    /// one round): after a zone outage longer than `report_ttl`, when no writer could
    /// write, every report would otherwise look dead at once and each cluster would vote
    /// alone in its first round after it.
    fn count_votes(
        &mut self,
        tenant: &str,
        own: Report,
        leads: bool,
        rrsets: &[&Rrset],
        now: Now,
        blind_for: Duration,
    ) -> Tally {
        let owner = self.plan.owner_id.clone();
        let settings = self.plan.multi_cluster.clone();
        let state = self.tenants.entry(tenant.to_owned()).or_default();
        let (relayed, rrsets): (Vec<_>, Vec<_>) = rrsets
            .iter()
            .copied()
            .partition(|Rrset { name, .. }| is_relayed(name));
        state.known = parse_reports(tenant, &rrsets, std::mem::take(&mut state.known));
        // The leader counts what it just reported; a standby counts what its leader wrote,
        // as the other clusters do.
        let mut reports: Vec<Report> = state
            .known
            .values()
            .filter(|r| r.owner == owner && !(leads && r.cluster == own.cluster))
            .cloned()
            .collect();
        let own_cluster = own.cluster.clone();
        if leads {
            reports.push(own);
        }
        let now_ms = unix_ms(now.clock.wall);
        state.stamps = restamp(&mut reports, &state.stamps, now, blind_for);
        reports.extend(only_owned(&relayed, &reports, &owner, &own_cluster));
        let tally = Tally::count(
            &reports,
            now_ms,
            settings.report_ttl,
            settings.failure_threshold,
        );
        let withdrawn: Vec<IpAddr> = tally.withdrawn().collect();
        let new = withdrawn
            .iter()
            .filter(|a| !state.withdrawn.contains(a))
            .count();
        state.withdrawn = withdrawn;
        state.live = tally.live.clone();
        state.discovered = contributed(tenant, &tally, &own_cluster);
        self.count_tally(tenant, &tally, new);
        tally
    }

    /// The tenant's live voters, and the addresses a quorum `newly` withdrew.
    fn count_tally(&self, tenant: &str, tally: &Tally, newly: usize) {
        let label = TenantLabel {
            tenant: tenant.to_owned(),
        };
        self.metrics
            .cluster_live_voters
            .get_or_create(&label)
            .set(tally.live.len() as i64);
        if newly > 0 {
            self.metrics
                .cluster_quorum_withdrawals
                .get_or_create(&label)
                .inc_by(newly as u64);
        }
    }

    /// Announces the addresses other clusters contribute, when they changed.
    pub(super) fn announce_discovered(&mut self, fx: &mut Vec<Effect>) {
        let mut all: Vec<Discovered> = Vec::new();
        let mut names: Vec<&String> = self.tenants.keys().collect();
        names.sort();
        for name in names {
            all.extend(self.tenants[name].discovered.iter().cloned());
        }
        if all != self.discovered {
            info!(
                addresses = all.len(),
                "addresses other clusters contribute changed"
            );
            self.discovered = all.clone();
            fx.push(Effect::Discovered(all));
        }
    }
}

/// Every address other clusters contribute to `tenant`, probed already or not: the engine
/// adds those its tenant lacks, and a stable list keeps it from adding and removing them in
/// turn.
fn contributed(tenant: &str, tally: &Tally, own_cluster: &str) -> Vec<Discovered> {
    tally
        .candidates()
        .filter(|(cluster, _)| cluster.as_str() != own_cluster)
        .map(|(cluster, o)| Discovered {
            tenant: tenant.to_owned(),
            cluster: cluster.clone(),
            address: o.address,
            name: o.name.clone(),
        })
        .collect()
}

/// From the reports peers relayed (`rrsets`, when each cluster's server holds its own), the
/// newest of each cluster this reader has no report of itself (`direct`, nor its own), as
/// reports that aged out: the addresses their cluster owns stay known (a cluster that
/// restarts while a peer is down learns that peer's gateways from any other), their down
/// votes never count (a dead cluster does not vote through a relay, and what a peer last
/// heard is no sign its writer lives).
fn only_owned(rrsets: &[&Rrset], direct: &[Report], owner: &str, own_cluster: &str) -> Vec<Report> {
    let mut newest: BTreeMap<String, Report> = BTreeMap::new();
    let relayed = rrsets
        .iter()
        .filter_map(|Rrset { texts, .. }| Report::decode(texts).ok());
    for r in relayed.filter(|r| r.owner == owner && r.cluster != own_cluster) {
        if direct.iter().any(|d| d.cluster == r.cluster) {
            continue;
        }
        if newest.get(&r.cluster).is_none_or(|n| n.at_ms < r.at_ms) {
            newest.insert(r.cluster.clone(), r);
        }
    }
    // The newest relay of a cluster that left holds no address (see the dns_server's
    // reports): it counts for nothing, but no older relay of that cluster counts either.
    newest
        .into_values()
        .filter(|r| !r.owned.is_empty())
        .map(|r| Report { at_ms: 0, ..r })
        .collect()
}

/// The reports that parse among `rrsets`; one that does not parse keeps its last good
/// content from `last`.
fn parse_reports(
    tenant: &str,
    rrsets: &[&Rrset],
    mut last: BTreeMap<String, Report>,
) -> BTreeMap<String, Report> {
    let mut known = BTreeMap::new();
    for Rrset { name, texts } in rrsets {
        match Report::decode(texts) {
            Ok(report) => {
                known.insert(name.clone(), report);
            }
            Err(e) => {
                if REPORT_WARNINGS.ready(WARN_EVERY) {
                    warn!(tenant, rrset = %name, error = %e, "a cluster's report does not parse; its last good content still counts");
                }
                if let Some(report) = last.remove(name) {
                    known.insert(name.clone(), report);
                }
            }
        }
    }
    known
}

/// The vote of the clusters other than `leaving` among `rrsets` (`cluster leave`: what the
/// remaining clusters agree on once this one's report is gone).
pub fn tally_without(plan: &Plan, leaving: &str, rrsets: Vec<Rrset>, now: SystemTime) -> Tally {
    let remaining: Vec<Report> = rrsets
        .into_iter()
        .filter(|Rrset { name, .. }| !is_relayed(name))
        .filter_map(|Rrset { texts, .. }| Report::decode(&texts).ok())
        .filter(|r| r.owner == plan.owner_id && r.cluster != leaving)
        .collect();
    Tally::count(
        &remaining,
        unix_ms(now),
        plan.multi_cluster.report_ttl,
        plan.multi_cluster.failure_threshold,
    )
}

/// Each report's age as this reader has watched it (since its stamp last changed here, by
/// `seen`: cluster -> (stamp, since when)), handed to the vote as a stamp on this reader's
/// wall clock; what was seen, for the next round.
fn restamp(
    reports: &mut [Report],
    seen: &BTreeMap<String, (u64, tokio::time::Instant)>,
    now: Now,
    blind_for: Duration,
) -> BTreeMap<String, (u64, tokio::time::Instant)> {
    let now_ms = unix_ms(now.clock.wall);
    let mut stamps = BTreeMap::new();
    for r in reports {
        let (stamp, since) = match seen.get(&r.cluster) {
            Some(&(stamp, since)) if stamp == r.at_ms => {
                (stamp, (since + blind_for).min(now.clock.mono))
            }
            _ => (r.at_ms, now.clock.mono),
        };
        stamps.insert(r.cluster.clone(), (stamp, since));
        let age = now.clock.mono.saturating_duration_since(since);
        r.at_ms = now_ms.saturating_sub(age.as_millis() as u64);
    }
    stamps
}
