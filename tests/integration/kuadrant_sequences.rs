//! Generated edit sequences (as Acto and Sieve test operators) against the pure core of
//! Kuadrant's resources live: `ho_kube`'s [`Core`] (the import's translation, listener
//! records kept while what they depend on is refused) and admission with its last
//! accepted generations, one round per step, in virtual time. Seeded, so a failure is
//! replayed from its seed; it is shrunk to the shortest sequence that still fails and
//! printed.
//!
//! After every step an oracle written here, from the steps alone, checks that a refused
//! edit, an empty or failed list and a restart change no name's answer; that a name
//! leaves only at the deletion or accepted edit of an object it depends on; that names
//! of objects a step did not touch answer as before; that reverting a refused edit
//! restores the answers from before it; and that a cluster of valid objects publishes
//! what a fresh process would.

mod world;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ho_config::Config;
use ho_kube::tenants::admit::Admitter;
use ho_kube::tenants::discover::{FoundGateway, Lookup, Target};
use ho_kube::tenants::kuadrant::{Allowance, Core, View};
use ho_kube::tenants::resource::NodeAddressType;

use world::{any_object, broken, valid, Obj, Spec, Step, World};

/// Each name's answer: its addresses, sorted, and its TTL in seconds.
type Answers = BTreeMap<String, (Vec<String>, u64)>;

const BASE: &str = r#"
[sinks.local]
kind = "hosts_file"
dir = "/nonexistent/ho-sequences"

[kubernetes]
tenants = true
kuadrant = true

[[kubernetes.allow]]
namespace = "team-a"
domains = ["team-a.io"]
sinks = ["local"]
"#;

/// Nothing discovered: the stand-ins name addresses only (the malformed-field sequences
/// use it too).
pub(crate) struct Nothing;

impl Lookup for Nothing {
    fn gateway(&self, _: &str, _: &str) -> Option<FoundGateway> {
        None
    }
    fn ingress(&self, _: &str, _: &str) -> Option<Vec<Target>> {
        None
    }
    fn service(&self, _: &str, _: &str) -> Option<Vec<Target>> {
        None
    }
    fn nodes(
        &self,
        _: &BTreeMap<String, String>,
        _: NodeAddressType,
    ) -> Vec<(String, std::net::IpAddr)> {
        Vec::new()
    }
}

/// The orchestrator's config: one sink, and `team-a`'s allowance (loaded from a file, as
/// the process loads it).
fn base(dir: &Path) -> Config {
    let file = dir.join("base.toml");
    std::fs::write(&file, BASE).expect("the base config written");
    ho_config::load::load(&[file]).expect("the base config")
}

/// One process: the core and admission, keeping its last accepted generations in `dir`.
struct Process {
    core: Core,
    admitter: Admitter,
}

impl Process {
    fn start(dir: &Path) -> Process {
        Process {
            core: Core::new(),
            admitter: Admitter::keeping_in(Some(dir)),
        }
    }

    /// One round on `world` (`None`: a kind is not listed), as the controller runs it.
    fn round(&mut self, base: &Config, world: Option<&World>) -> Answers {
        let sinks = |_: &str| vec!["local".to_owned()];
        let domain = |_: &str, host: &str| host.ends_with(".team-a.io");
        let allowed = Allowance {
            sinks: &sinks,
            domain: &domain,
        };
        let objects = world.map(World::objects);
        let view = objects.as_ref().map(|[records, others, gateways]| View {
            records,
            others,
            gateways,
        });
        let kept = self.admitter.kept();
        self.core.refresh(view.as_ref(), &allowed, &kept);
        let input = self.core.stand_ins(&mut |_, _| false);
        let refused = self.core.refusals(&kept);
        let admission =
            self.admitter
                .admit_with(base, &input, refused, &Nothing, &ho_kinds::CATALOG);
        answers(&admission.config)
    }
}

/// What `config` publishes, name by name.
fn answers(config: &Config) -> Answers {
    let mut out = Answers::new();
    for tenant in &config.tenants {
        let ho_config::EndpointSelection::Names(names) = &tenant.endpoints else {
            continue;
        };
        let mut addresses: Vec<String> = config
            .endpoints
            .iter()
            .filter(|e| names.contains(&e.name))
            .map(|e| e.address.clone())
            .collect();
        addresses.sort();
        for domain in &tenant.domains {
            out.insert(domain.clone(), (addresses.clone(), tenant.ttl.as_secs()));
        }
    }
    out
}

/// A sequence of up to `max` steps from `seed`.
fn generate(seed: u64, max: usize) -> Vec<Step> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut world = World::default();
    let mut steps = Vec::new();
    for at in 0..rng.usize(1..=max) {
        let obj = any_object(&mut rng);
        let current = world.objects.get(&obj).map(|(s, _, _)| s.clone());
        let step = match (rng.usize(..10), current) {
            (0..=3, _) => Step::Put(obj, valid(&mut rng, obj)),
            (4..=5, Some(spec)) => Step::Put(obj, broken(&mut rng, &spec)),
            (4..=5, None) => {
                let spec = valid(&mut rng, obj);
                Step::Put(obj, broken(&mut rng, &spec))
            }
            (6, _) => Step::Delete(obj),
            (7, _) => Step::EmptyList,
            (8, _) => Step::FailedList,
            _ => Step::Restart,
        };
        // A refused edit is often reverted next, as a team would.
        let revert = match (&step, world.objects.get(&obj)) {
            (Step::Put(_, spec), Some((old, _, _))) if !spec.valid() && rng.bool() => {
                Some(Step::Put(obj, old.clone()))
            }
            _ => None,
        };
        world.apply(&step, at);
        steps.push(step);
        steps.extend(revert);
    }
    steps
}

/// A violated invariant: at which step, and what.
#[derive(Debug)]
struct Violation {
    step: usize,
    what: String,
}

/// Runs `steps` in a fresh state directory `dir`, checking the oracle after each.
fn run(steps: &[Step], base: &Config, dir: &Path) -> Result<(), Violation> {
    let _ = std::fs::remove_file(dir.join("accepted.json"));
    let mut process = Process::start(dir);
    let mut world = World::default();
    let mut seen = World::default();
    let mut before = Answers::new();
    let mut history: Vec<(World, Answers)> = Vec::new();
    for (at, step) in steps.iter().enumerate() {
        let previous = world.clone();
        world.apply(step, at);
        let after = match step {
            Step::Restart => {
                process = Process::start(dir);
                process.round(base, None)
            }
            Step::EmptyList => process.round(base, None),
            Step::FailedList => process.round(base, Some(&seen)),
            _ => {
                seen = world.clone();
                process.round(base, Some(&world))
            }
        };
        let check = Check {
            step,
            world: &world,
            previous: &previous,
            before: &before,
            after: &after,
            history: &history,
        };
        check
            .all(base, dir)
            .map_err(|what| Violation { step: at, what })?;
        history.push((previous, before));
        before = after;
    }
    Ok(())
}

/// The oracle's view of one step.
struct Check<'a> {
    step: &'a Step,
    world: &'a World,
    previous: &'a World,
    before: &'a Answers,
    after: &'a Answers,
    /// Each earlier step's world before it and the answers before it.
    history: &'a [(World, Answers)],
}

impl Check<'_> {
    fn all(&self, base: &Config, dir: &Path) -> Result<(), String> {
        self.unchanged_when_refused()?;
        self.others_untouched()?;
        self.revert_restores()?;
        self.fresh_agrees(base, dir)
    }

    /// A refused edit, an empty or failed list and a restart change no answer.
    fn unchanged_when_refused(&self) -> Result<(), String> {
        let quiet = match self.step {
            Step::Put(_, spec) => !spec.valid(),
            Step::Delete(_) => false,
            Step::EmptyList | Step::FailedList | Step::Restart => true,
        };
        // A policy created beside the namespace's only one, even a refused one, changes
        // which policy governs the written records (the documented rule: one policy governs
        // every record): their names may change.
        let (was, is) = (self.previous.policies().len(), self.world.policies().len());
        let governance_moved = was != is && (was == 1 || is == 1);
        let differs = |name: &String| {
            self.before.get(name) != self.after.get(name)
                && !(governance_moved && self.owners(name).contains(&Obj::Policy(0)))
        };
        if quiet && self.before.keys().chain(self.after.keys()).any(differs) {
            return Err(format!(
                "the answers changed on a refused edit or a missing view:\n  before {:?}\n  after  {:?}",
                self.before, self.after
            ));
        }
        Ok(())
    }

    /// The objects a name depends on, from its name: a listener's Gateway and policy, a
    /// record and a policy that governs every record (the only one there is), and the
    /// probes (one may name any address published).
    fn owners(&self, name: &str) -> Vec<Obj> {
        let index = |s: &str| s.parse::<usize>().ok();
        let mut owners = vec![Obj::Probe(0), Obj::Probe(1)];
        let labels: Vec<&str> = name.split('.').collect();
        if let Some(i) = labels
            .get(1)
            .and_then(|l| l.strip_prefix('g'))
            .and_then(index)
        {
            owners.extend([Obj::Gateway(i), Obj::Policy(i)]);
        }
        if let Some(i) = labels[0]
            .strip_prefix('r')
            .and_then(|r| r.split('-').next())
            .and_then(index)
        {
            owners.push(Obj::Record(i));
            // One policy governs every record: one more or one fewer changes which does.
            if [self.previous, self.world]
                .iter()
                .any(|w| w.policies().len() == 1)
            {
                owners.extend([Obj::Policy(0), Obj::Policy(1)]);
            }
        }
        owners
    }

    /// Names a step's object does not own answer as before, and a name leaves only at the
    /// deletion or an accepted edit of an object it depends on.
    fn others_untouched(&self) -> Result<(), String> {
        let touched = match self.step {
            Step::Put(obj, _) | Step::Delete(obj) => Some(*obj),
            _ => None,
        };
        let names = self.before.keys().chain(self.after.keys());
        for name in names {
            let owned = touched.is_some_and(|t| self.owners(name).contains(&t));
            let (was, is) = (self.before.get(name), self.after.get(name));
            if !owned && was != is {
                return Err(format!("{name} changed from {was:?} to {is:?} though no object it depends on was touched"));
            }
        }
        Ok(())
    }

    /// Reverting a refused edit (putting back the spec from before it) restores the
    /// answers from before it.
    fn revert_restores(&self) -> Result<(), String> {
        let (Step::Put(obj, spec), Some((world, answers))) = (self.step, self.history.last())
        else {
            return Ok(());
        };
        let reverted = world.objects.get(obj).map(|(s, _, _)| s);
        let refused = self
            .previous
            .objects
            .get(obj)
            .is_some_and(|(s, _, _)| !s.valid());
        if refused
            && reverted == Some(spec)
            && reverted.is_some_and(Spec::valid)
            && self.after != answers
        {
            return Err(format!(
                "reverting the refused edit of {obj:?} did not restore the answers:\n  then {answers:?}\n  now  {:?}",
                self.after
            ));
        }
        Ok(())
    }

    /// A cluster of valid objects, seen whole, publishes what a fresh process publishes.
    fn fresh_agrees(&self, base: &Config, dir: &Path) -> Result<(), String> {
        if !matches!(self.step, Step::Put(..) | Step::Delete(_)) || !self.world.all_valid() {
            return Ok(());
        }
        let fresh_dir = dir.join("fresh");
        let _ = std::fs::remove_file(fresh_dir.join("accepted.json"));
        let fresh = Process::start(&fresh_dir).round(base, Some(self.world));
        if *self.after != fresh {
            return Err(format!(
                "a valid cluster answers other than a fresh process would:\n  here  {:?}\n  fresh {fresh:?}",
                self.after
            ));
        }
        Ok(())
    }
}

/// The shortest sequence found, removing one step at a time, that still fails.
fn shrink(mut steps: Vec<Step>, base: &Config, dir: &Path) -> (Vec<Step>, Violation) {
    let mut failure = run(&steps, base, dir).expect_err("a failing sequence");
    loop {
        let shorter = (0..steps.len()).find_map(|i| {
            let mut fewer = steps.clone();
            fewer.remove(i);
            run(&fewer, base, dir).err().map(|v| (fewer, v))
        });
        match shorter {
            Some((fewer, v)) => (steps, failure) = (fewer, v),
            None => return (steps, failure),
        }
    }
}

/// A directory for the state files: in memory where there is one (the fsyncs of a file
/// per round add up over thousands of sequences).
fn state_dir() -> tempfile::TempDir {
    let shm = PathBuf::from("/dev/shm");
    match shm.is_dir() {
        true => tempfile::tempdir_in(shm),
        false => tempfile::tempdir(),
    }
    .expect("a temporary directory")
}

/// Seeded sequences of up to 50 steps, every invariant after every step: ten shards of a
/// thousand (10,000 a run, about 25 s of a debug build's CPU each, so the shards share the
/// cores), `KUADRANT_SEQUENCES=N` runs N per shard, `KUADRANT_SEQUENCE_SEED` replays one
/// seed (in the first shard).
fn sequences(shard: u64) {
    let count: u64 = std::env::var("KUADRANT_SEQUENCES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000);
    let seeds: Vec<u64> = match std::env::var("KUADRANT_SEQUENCE_SEED") {
        Ok(seed) if shard == 0 => vec![seed.parse().expect("a seed")],
        Ok(_) => Vec::new(),
        Err(_) => (0..count)
            .map(|i| 0x5eed_0000 + shard * 1_000_000 + i)
            .collect(),
    };
    let dir = state_dir();
    let base = base(dir.path());
    let started = std::time::Instant::now();
    let mut steps_run = 0;
    for seed in seeds {
        let steps = generate(seed, 50);
        steps_run += steps.len();
        if run(&steps, &base, dir.path()).is_err() {
            let (short, violation) = shrink(steps, &base, dir.path());
            let listed: Vec<String> = short.iter().map(|s| format!("    {s:?},")).collect();
            panic!(
                "seed {seed} (KUADRANT_SEQUENCE_SEED={seed}): step {} of the shrunk sequence:\n{}\n  steps: [\n{}\n  ]",
                violation.step,
                violation.what,
                listed.join("\n")
            );
        }
    }
    eprintln!(
        "{steps_run} steps in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

macro_rules! shards {
    ($($name:ident = $shard:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            sequences($shard);
        }
    )*};
}

shards!(
    kuadrant_generated_sequences_keep_every_name_0 = 0,
    kuadrant_generated_sequences_keep_every_name_1 = 1,
    kuadrant_generated_sequences_keep_every_name_2 = 2,
    kuadrant_generated_sequences_keep_every_name_3 = 3,
    kuadrant_generated_sequences_keep_every_name_4 = 4,
    kuadrant_generated_sequences_keep_every_name_5 = 5,
    kuadrant_generated_sequences_keep_every_name_6 = 6,
    kuadrant_generated_sequences_keep_every_name_7 = 7,
    kuadrant_generated_sequences_keep_every_name_8 = 8,
    kuadrant_generated_sequences_keep_every_name_9 = 9,
);
