//! Fault injection, Jepsen-style, on real processes: a coordinator and
//! three workers (one in a network namespace of its own) run a checkpointed
//! job — a followed JSON-lines file that keeps growing, a count per key on
//! RocksDB, the exactly-once part-file sink — while a seeded schedule
//! injects faults one after another: a worker SIGKILLed (and replaced), a
//! worker paused with SIGSTOP (briefly, or past the heartbeat timeout) and
//! resumed, the namespaced worker cut off and healed, the coordinator
//! SIGKILLed and started again on its data directory, and a checkpoint
//! storage write that fails or tears. Between two faults the job must run
//! again and complete a checkpoint. Then the input stops growing, and the
//! committed output is checked against the input: every key's counts
//! 1..n exactly once, n its number of input lines.
//!
//! The same job also reads a Kafka topic (a tansu broker on loopback)
//! through a worker kill and a coordinator restart.
//!
//! The seed is printed and replays the same schedule (`WEIR_FAULT_SEED`);
//! `WEIR_FAULTS` sets how many faults (the suite's run: 12). The long run:
//! `bench/faults/run.sh`.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{NetNs, Proc, free_port};
use weir_coordinator::checkpoint::CheckpointStats;
use weir_coordinator::jobs::{JobInfo, JobState};
use weir_model::faults::{self, Fault};

/// The faults a schedule draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    KillWorker,
    PauseWorker,
    CutOff,
    KillCoordinator,
    FailWrite,
    TearWrite,
}

const KINDS: [Kind; 6] = [
    Kind::KillWorker,
    Kind::PauseWorker,
    Kind::CutOff,
    Kind::KillCoordinator,
    Kind::FailWrite,
    Kind::TearWrite,
];

/// xorshift64*: the schedule's (and the input's) randomness, from a seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// The faults to inject, in order: every kind once first (in a seeded
/// order), then kinds drawn at random; each with a wait (ms) before it.
fn schedule(seed: u64, n: usize) -> Vec<(Kind, u64)> {
    let mut rng = Rng::new(seed);
    let mut kinds = KINDS.to_vec();
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.below(i as u64 + 1) as usize);
    }
    while kinds.len() < n {
        kinds.push(KINDS[rng.below(KINDS.len() as u64) as usize]);
    }
    kinds.truncate(n.max(KINDS.len()));
    kinds
        .into_iter()
        .map(|k| (k, 200 + rng.below(1300)))
        .collect()
}

/// One cluster at a time: each test's network namespace is named after
/// the process, and two clusters would share two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long every wait for the cluster may take.
const PATIENCE: Duration = Duration::from_secs(120);

/// The coordinator's heartbeat timeout: a worker silent this long is lost.
const HEARTBEAT_TIMEOUT_MS: u64 = 1500;

/// The keys of the input.
const KEYS: u64 = 40;

/// The cluster under test: a coordinator on fixed ports (it is killed and
/// started again) and its workers.
struct Cluster {
    coordinator: Option<Proc>,
    /// Worker processes: the namespaced one first.
    workers: Vec<Proc>,
    dir: PathBuf,
    rest: String,
    listen: String,
    rpc_listen: String,
    faults: PathBuf,
    /// Where the namespaced worker's log goes, if not to the test's.
    ns_log: Option<PathBuf>,
    started: u32,
    /// Removed last, when its worker has stopped; `None` when every
    /// worker runs here (a job reading a broker on loopback).
    net: Option<NetNs>,
}

impl Cluster {
    /// The cluster, the namespaced worker's log in `ns_log` if given.
    fn new(dir: &Path, ns_log: Option<PathBuf>) -> Cluster {
        Cluster::start(dir, ns_log, Some(NetNs::new()))
    }

    /// The cluster with every worker here, on loopback (no cut-offs).
    fn on_loopback(dir: &Path) -> Cluster {
        Cluster::start(dir, None, None)
    }

    fn start(dir: &Path, ns_log: Option<PathBuf>, net: Option<NetNs>) -> Cluster {
        let here = net.as_ref().map_or("127.0.0.1".to_owned(), |n| n.here());
        let namespaced = net.is_some();
        let mut c = Cluster {
            dir: dir.to_owned(),
            rest: String::new(),
            listen: format!("127.0.0.1:{}", free_port()),
            // Its service for workers is on the namespace's link too.
            rpc_listen: format!("{here}:{}", free_port()),
            faults: dir.join("storage-faults"),
            net,
            coordinator: None,
            workers: Vec::new(),
            ns_log,
            started: 0,
        };
        c.rest = format!("http://{}", c.listen);
        c.start_coordinator();
        for first in [true, false, false] {
            let w = c.worker(first && namespaced);
            c.workers.push(w);
        }
        c
    }

    fn env(&self) -> [(&str, &str); 1] {
        [(faults::ENV, self.faults.to_str().unwrap())]
    }

    fn start_coordinator(&mut self) {
        let data = self.dir.join("coordinator");
        let timeout = HEARTBEAT_TIMEOUT_MS.to_string();
        let (p, _) = common::start_with(
            None,
            &self.env(),
            &[
                "coordinator",
                "--listen",
                &self.listen,
                "--rpc-listen",
                &self.rpc_listen,
                "--heartbeat-interval-ms",
                "100",
                "--heartbeat-timeout-ms",
                &timeout,
                "--data-dir",
                data.to_str().unwrap(),
                "--allow-dir",
                self.dir.to_str().unwrap(),
                "--insecure",
            ],
        );
        self.coordinator = Some(p);
    }

    /// A new worker (one slot), in the namespace or here.
    fn worker(&mut self, namespaced: bool) -> Proc {
        self.started += 1;
        let data = self.dir.join(format!("w{}", self.started));
        let at = match &self.net {
            Some(net) if namespaced => net.there(),
            Some(net) => net.here(),
            None => "127.0.0.1".to_owned(),
        };
        let rpc = format!("http://{}", self.rpc_listen);
        let args = common::one_slot_worker(&rpc, &at, &data, &self.dir);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let log = self.ns_log.as_deref().filter(|_| namespaced);
        common::start_logged(
            self.net
                .as_ref()
                .filter(|_| namespaced)
                .map(|n| n.name.as_str()),
            &self.env(),
            &args,
            log,
        )
        .0
    }

    /// The index in `workers` of the worker a subtask of `job` runs on,
    /// picked at random.
    fn busy_worker(&self, job: &JobInfo, rng: &mut Rng) -> usize {
        let busy: Vec<usize> = self
            .workers
            .iter()
            .enumerate()
            .filter(|(_, w)| {
                job.subtasks.iter().any(|t| {
                    t.worker
                        .as_deref()
                        .is_some_and(|id| id.ends_with(&format!("-{}", w.0.id())))
                })
            })
            .map(|(i, _)| i)
            .collect();
        if busy.is_empty() {
            rng.below(self.workers.len() as u64) as usize
        } else {
            busy[rng.below(busy.len() as u64) as usize]
        }
    }

    /// Inject `kind`; returns what was done, for the log.
    async fn inject(&mut self, kind: Kind, job: &JobInfo, rng: &mut Rng) -> String {
        match kind {
            Kind::KillWorker => {
                let i = self.busy_worker(job, rng);
                let mut killed = self.workers.remove(i);
                let pid = killed.0.id();
                killed.0.kill().unwrap();
                killed.0.wait().unwrap();
                let replacement = self.worker(i == 0);
                self.workers.insert(i, replacement);
                format!("SIGKILL worker {pid}, a new one in its place")
            }
            Kind::PauseWorker => {
                let i = self.busy_worker(job, rng);
                let pid = self.workers[i].0.id().to_string();
                // Briefly (it stays registered) or past the heartbeat
                // timeout (it is lost, and registers again when resumed).
                let ms = if rng.below(2) == 0 {
                    300
                } else {
                    HEARTBEAT_TIMEOUT_MS + 1000
                };
                signal("STOP", &pid);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                signal("CONT", &pid);
                format!("SIGSTOP worker {pid} for {ms} ms")
            }
            Kind::CutOff => {
                let ms = HEARTBEAT_TIMEOUT_MS + 1000;
                let net = self.net.as_ref().expect("a cluster with a namespace");
                net.link(false);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                net.link(true);
                format!("cut off worker {} for {ms} ms", self.workers[0].0.id())
            }
            Kind::KillCoordinator => {
                let mut old = self.coordinator.take().unwrap();
                old.0.kill().unwrap();
                old.0.wait().unwrap();
                self.start_coordinator();
                "SIGKILL the coordinator, started again".to_owned()
            }
            Kind::FailWrite | Kind::TearWrite => {
                let fault = if kind == Kind::FailWrite {
                    Fault::Fail
                } else {
                    Fault::Tear
                };
                // Taken before the next fault is armed: one armed at a
                // time, each failing a write of its own.
                let before = faults::taken(&self.faults);
                faults::arm(&self.faults, fault).unwrap();
                let started = Instant::now();
                while faults::taken(&self.faults) == before {
                    assert!(
                        started.elapsed() < PATIENCE,
                        "no storage write took the armed fault"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                format!("the next storage write: {}", fault.name())
            }
        }
    }
}

/// `kill -<sig> <pid>`.
fn signal(sig: &str, pid: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{sig}"), pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig} {pid}");
}

/// GET `url` as JSON; `None` while the coordinator does not answer (it may
/// be starting again).
async fn get<T: serde::de::DeserializeOwned>(url: &str) -> Option<T> {
    let response = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json().await.ok()
}

/// The input: JSON lines `{"k": "k<n>", "i": <line>}` appended to a file
/// (or produced to a Kafka topic) in batches while `writing` holds; the
/// number of lines per key.
struct Input {
    /// The file's source table (or the topic's).
    source: String,
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
    writing: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<()>>,
}

/// Where the input's lines go.
enum Target {
    File(std::fs::File),
    Kafka(rdkafka::producer::BaseProducer, String),
}

impl Target {
    fn write(&mut self, text: &str) {
        match self {
            Target::File(file) => {
                // Whole lines only: the follower reads up to the last newline.
                file.write_all(text.as_bytes()).unwrap();
                file.flush().unwrap();
            }
            Target::Kafka(producer, topic) => {
                for line in text.lines() {
                    let key = line.split('"').nth(3).unwrap_or_default();
                    let r = rdkafka::producer::BaseRecord::to(topic.as_str())
                        .key(key)
                        .payload(line.as_bytes());
                    weir_tests::kafka::send(producer, r);
                }
                weir_tests::kafka::stored(producer);
            }
        }
    }
}

impl Input {
    /// Lines appended to the file at `path`, followed by the job.
    fn start(path: PathBuf, seed: u64) -> Input {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        let source = format!(
            "type = 'json-lines-file'\npath = '{}'\nfollow = true\n",
            path.display()
        );
        Input::into(Target::File(file), source, seed)
    }

    /// Messages produced to `topic` of `broker`, keyed by their key.
    fn kafka(broker: &weir_tests::kafka::Broker, topic: &str, seed: u64) -> Input {
        let source = format!(
            "type = 'kafka'\nbrokers = '{}'\ntopics = ['{topic}']\n",
            broker.address
        );
        Input::into(
            Target::Kafka(broker.producer(), topic.to_owned()),
            source,
            seed,
        )
    }

    fn into(mut target: Target, source: String, seed: u64) -> Input {
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let writing = Arc::new(AtomicBool::new(true));
        let mut rng = Rng::new(seed ^ 0x5EED);
        let mut line = 0u64;
        let mut batch =
            move |target: &mut Target, n: u64, counts: &Mutex<BTreeMap<String, u64>>| {
                let mut text = String::new();
                let mut counts = counts.lock().unwrap();
                for _ in 0..n {
                    let key = format!("k{}", rng.below(KEYS));
                    text.push_str(&format!("{{\"k\":\"{key}\",\"i\":{line}}}\n"));
                    *counts.entry(key).or_default() += 1;
                    line += 1;
                }
                target.write(&text);
            };
        batch(&mut target, 400, &counts);
        let (c, w) = (counts.clone(), writing.clone());
        let writer = std::thread::spawn(move || {
            while w.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                batch(&mut target, 20, &c);
            }
        });
        Input {
            source,
            counts,
            writing,
            writer: Some(writer),
        }
    }

    /// Stop appending; the lines per key.
    fn stop(&mut self) -> BTreeMap<String, u64> {
        self.writing.store(false, Ordering::Relaxed);
        if let Some(w) = self.writer.take() {
            w.join().unwrap();
        }
        self.counts.lock().unwrap().clone()
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Wait until `want` workers are registered.
async fn registered(rest: &str, want: usize) {
    let started = Instant::now();
    loop {
        let c: Option<weir_coordinator::slot_manager::ClusterInfo> =
            get(&format!("{rest}/v1/cluster")).await;
        if c.as_ref().is_some_and(|c| c.workers.len() >= want) {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{want} workers register: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The job under test, submitted: the input (a followed JSON-lines file,
/// or a Kafka topic), a count per key on RocksDB, the exactly-once
/// part-file sink into `output`, checkpoints every 200 ms, restarts
/// without end. Returns its REST URL.
fn submit_job(rest: &str, dir: &Path, input: &Input, output: &Path, checkpoint: &str) -> String {
    let bundle = common::bundle(
        dir,
        "faults",
        "wordcount",
        &format!(
            "[job]\nname = 'faults'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'events'\n{}\
             [[operator]]\nname = 'count'\nbuiltin = 'count'\nkey-by = '/k'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [state]\nbackend = 'rocksdb'\n\
             [checkpoint]\ninterval-ms = 200\n{checkpoint}\
             [restart]\nstrategy = 'fixed-delay'\nattempts = 100000\ndelay-ms = 200\n",
            input.source,
            output.display()
        ),
    );
    format!("{rest}/v1/jobs/{}", common::submit(rest, &bundle))
}

/// Wait until the job at `job_url` has restarted more than `before` times
/// (a checkpoint may complete between a fault and its detection).
async fn restarted(job_url: &str, before: u32, what: &str) {
    let started = Instant::now();
    loop {
        let job: Option<JobInfo> = get(job_url).await;
        if job.as_ref().is_some_and(|j| j.restarts > before) {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the job restarts after: {what}: {job:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait until the job at `job_url` runs and has completed a checkpoint
/// newer than `after`; returns the job and that checkpoint's id. The job
/// must not end.
async fn running_past(job_url: &str, after: u64, what: &str) -> (JobInfo, u64) {
    let checkpoints_url = format!("{job_url}/checkpoints");
    let started = Instant::now();
    loop {
        let job: Option<JobInfo> = get(job_url).await;
        if let Some(j) = &job {
            assert!(!j.state.is_terminal(), "the job ended ({what}): {j:#?}");
        }
        let c: Option<CheckpointStats> = get(&checkpoints_url).await;
        let latest = c
            .as_ref()
            .and_then(|c| c.latest_completed.as_ref())
            .map_or(0, |l| l.id);
        if let Some(j) = &job
            && j.state == JobState::Running
            && latest > after
        {
            return (j.clone(), latest);
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the job runs again and completes a checkpoint ({what}): {job:#?} {c:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stop the input and wait until the committed output in `output` holds,
/// for every key, each count 1..n exactly once (n its input lines); never
/// a count twice or more counts than lines meanwhile. Returns how many
/// records were checked.
async fn exactly_once(input: &mut Input, output: &Path, what: &str) -> u64 {
    let want = input.stop();
    common::counted_exactly(output, &want, what).await;
    want.values().sum()
}

/// Run the harness: `n` faults from `seed`, the job's `[checkpoint]`
/// table extended by `checkpoint`.
async fn run(seed: u64, n: usize, checkpoint: &str) {
    let _alone = ONE_AT_A_TIME.lock().await;
    eprintln!("fault injection: seed {seed} ({n} faults; WEIR_FAULT_SEED={seed} replays it)");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let mut cluster = Cluster::new(&dir, None);
    let rest = cluster.rest.clone();
    registered(&rest, 3).await;

    let mut input = Input::start(dir.join("input.jsonl"), seed);
    let output = dir.join("out");
    let job_url = submit_job(&rest, &dir, &input, &output, checkpoint);

    let mut rng = Rng::new(seed ^ 0xFA17);
    let (mut job, mut latest) = running_past(&job_url, 0, "at the start").await;
    let mut armed = 0;
    let plan = schedule(seed, n);
    for (i, (kind, wait_ms)) in plan.iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(*wait_ms)).await;
        let done = cluster.inject(*kind, &job, &mut rng).await;
        eprintln!("fault {}/{}: {done}", i + 1, plan.len());
        armed += usize::from(matches!(kind, Kind::FailWrite | Kind::TearWrite));
        if *kind == Kind::KillCoordinator {
            registered(&rest, 3).await;
        }
        let what = format!("seed {seed}, after fault {}: {done}", i + 1);
        (job, latest) = running_past(&job_url, latest, &what).await;
    }
    assert_eq!(
        faults::taken(&cluster.faults),
        armed,
        "every armed storage fault failed a write"
    );

    // The input stops growing; the committed output catches up with it.
    let total = exactly_once(&mut input, &output, &format!("seed {seed}")).await;
    let job: JobInfo = get(&job_url).await.unwrap();
    eprintln!(
        "fault injection: seed {seed}: {} faults injected and survived ({} restarts), {total} records checked, lost 0, duplicated 0",
        plan.len(),
        job.restarts
    );
    assert!(job.restarts > 0, "{job:#?}");
    common::weir(&["cancel", &job.id, "--coordinator", &rest]);
    drop(cluster);
}

fn seed() -> u64 {
    std::env::var("WEIR_FAULT_SEED")
        .ok()
        .map(|s| s.parse().expect("WEIR_FAULT_SEED is a number"))
        .unwrap_or(20261203)
}

/// The suite's run: a dozen faults, every kind among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_output_stays_exact_through_a_seeded_schedule_of_faults() {
    let n = std::env::var("WEIR_FAULTS")
        .ok()
        .map(|s| s.parse().expect("WEIR_FAULTS is a number"))
        .unwrap_or(12);
    run(seed(), n, "").await;
}

/// The same with unaligned checkpoints (Flink's FLIP-76): every fault kind
/// once, the committed output exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_output_stays_exact_with_unaligned_checkpoints() {
    run(seed() ^ 0x0A11, KINDS.len(), "unaligned = true\n").await;
}

/// A zombie reaches a commit, and the fence refuses it. The namespaced
/// worker is held inside a commit (of a checkpoint that completed), then
/// cut off: the coordinator gives it up, and the job's next attempt runs
/// on the other two workers, restores that checkpoint and commits its
/// parts itself. Then the zombie is let go: still running, it goes on with
/// its late commit, which the sink's fence refuses (the part directory's
/// `.fence` names the newer attempt) — the zombie fails saying so, and the
/// committed output stays exact.
///
/// Checked once with the fence's check removed (`PartFileSink::fenced`
/// never refusing): the zombie's commit then goes through (it finds the
/// parts committed already), nothing refuses it, and this test fails
/// waiting for the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_zombies_late_commit_is_refused_by_the_fence() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let zombie_log = dir.join("zombie.log");
    let cluster = Cluster::new(&dir, Some(zombie_log.clone()));
    let rest = cluster.rest.clone();
    registered(&rest, 3).await;
    let mut input = Input::start(dir.join("input.jsonl"), 7);
    let output = dir.join("out");
    let job_url = submit_job(&rest, &dir, &input, &output, "");
    let (job, _) = running_past(&job_url, 0, "at the start").await;
    let zombie = cluster.workers[0].0.id();
    assert!(
        job.subtasks.iter().any(|t| t
            .worker
            .as_deref()
            .is_some_and(|w| w.ends_with(&format!("-{zombie}")))),
        "a subtask runs on the worker to cut off: {job:#?}"
    );

    // Held inside its next commit: the checkpoint it commits completed.
    faults::arm_hold(&cluster.faults, "commit", Some(zombie)).unwrap();
    let started = Instant::now();
    while !faults::held(&cluster.faults, "commit", Some(zombie)) {
        assert!(started.elapsed() < PATIENCE, "the zombie reaches a commit");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, held_at) = running_past(&job_url, 0, "held").await;
    eprintln!("zombie held in a commit after checkpoint {held_at}; cutting it off");
    cluster.net.as_ref().unwrap().link(false);

    // The next attempt runs without it and completes a newer checkpoint.
    let (job, _) = running_past(&job_url, held_at, "without the zombie").await;
    assert!(job.restarts > 0, "{job:#?}");
    eprintln!("the next attempt runs without the zombie; letting it go");

    // The zombie's late commit is refused.
    faults::release(&cluster.faults, "commit").unwrap();
    let started = Instant::now();
    loop {
        let log = std::fs::read_to_string(&zombie_log).unwrap_or_default();
        if log.contains("is fenced off") {
            assert!(log.contains("commit of checkpoint"), "{log}");
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the zombie's late commit is refused: {log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("the zombie's commit was refused");
    cluster.net.as_ref().unwrap().link(true);
    exactly_once(&mut input, &output, "after a zombie's late commit").await;
    common::weir(&["cancel", &job.id, "--coordinator", &rest]);
    drop(cluster);
}

/// A checkpoint's `_metadata` torn as it is written, and the coordinator
/// killed before a newer checkpoint completes: the coordinator started
/// again resumes the job from the checkpoint before, and the committed
/// output stays exact. `_metadata` is written aside and renamed, so a torn
/// write never looks like a completed checkpoint.
///
/// Checked once with the rename removed (`_metadata` written in place):
/// the restarted coordinator then finds the torn `_metadata` of a
/// checkpoint newer than every readable one, whose output may have been
/// committed, and the job fails (`lost_commit`) — this test fails there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_metadata_write_is_not_taken_for_a_completed_checkpoint() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let mut cluster = Cluster::new(&dir, None);
    let rest = cluster.rest.clone();
    registered(&rest, 3).await;
    let mut input = Input::start(dir.join("input.jsonl"), 11);
    let output = dir.join("out");
    let job_url = submit_job(&rest, &dir, &input, &output, "");
    let (_, latest) = running_past(&job_url, 0, "at the start").await;

    // Every `_metadata` of the next checkpoints is torn: none completes
    // until the coordinator is killed, right after the first tear.
    for id in latest + 2..latest + 60 {
        faults::arm_for(&cluster.faults, Fault::Tear, &format!("chk-{id}/_metadata")).unwrap();
    }
    let started = Instant::now();
    while faults::taken(&cluster.faults) == 0 {
        assert!(started.elapsed() < PATIENCE, "a `_metadata` write is torn");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut old = cluster.coordinator.take().unwrap();
    old.0.kill().unwrap();
    old.0.wait().unwrap();
    for e in std::fs::read_dir(&cluster.faults).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with("next-for-") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let taken = faults::taken(&cluster.faults);
    eprintln!("{taken} `_metadata` write(s) torn; the coordinator killed and started again");
    cluster.start_coordinator();
    registered(&rest, 3).await;
    let (job, _) = running_past(&job_url, latest, "resumed after a torn `_metadata`").await;
    exactly_once(&mut input, &output, "after a torn `_metadata`").await;
    common::weir(&["cancel", &job.id, "--coordinator", &rest]);
    drop(cluster);
}

/// The job reading a Kafka topic of four partitions (a broker on
/// loopback, every worker here) instead of the file, while messages keep
/// coming: a worker SIGKILLed and replaced, then the coordinator SIGKILLed
/// and started again; the committed output is exact — every key's counts
/// 1..n once, n its messages — restored from the checkpointed offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_input_stays_exact_through_a_worker_kill_and_a_coordinator_restart() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let broker = weir_tests::kafka::Broker::start();
    broker.create_topic("events", 4);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let mut cluster = Cluster::on_loopback(&dir);
    let rest = cluster.rest.clone();
    registered(&rest, 3).await;
    let mut input = Input::kafka(&broker, "events", 5);
    let output = dir.join("out");
    let job_url = submit_job(&rest, &dir, &input, &output, "");
    let (mut job, mut latest) = running_past(&job_url, 0, "at the start").await;
    let mut rng = Rng::new(5);
    for kind in [Kind::KillWorker, Kind::KillCoordinator] {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = job.restarts;
        let done = cluster.inject(kind, &job, &mut rng).await;
        eprintln!("kafka: {done}");
        if kind == Kind::KillCoordinator {
            registered(&rest, 3).await;
        }
        restarted(&job_url, before, &done).await;
        (job, latest) = running_past(&job_url, latest, &format!("kafka, after: {done}")).await;
    }
    let total = exactly_once(&mut input, &output, "kafka").await;
    // Completed checkpoints' offsets reach the group, the last ones at the
    // topic's end (all of it is counted).
    let ends: BTreeMap<i32, Option<i64>> = broker
        .sizes("events", 4)
        .into_iter()
        .map(|(p, n)| (p, Some(n)))
        .collect();
    let started = Instant::now();
    while broker.committed("weir-events", "events", 4) != ends {
        assert!(
            started.elapsed() < PATIENCE,
            "the group's offsets reach the end: {:?} of {ends:?}",
            broker.committed("weir-events", "events", 4)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let job: JobInfo = get(&job_url).await.unwrap();
    eprintln!(
        "kafka: {total} records checked through {} restarts",
        job.restarts
    );
    assert!(job.restarts > 0, "{job:#?}");
    common::weir(&["cancel", &job.id, "--coordinator", &rest]);
    drop(cluster);
}

/// Kafka to Kafka (at-least-once) on the cluster while messages keep
/// coming: a worker running the job SIGKILLed and replaced; every input
/// message reaches the output topic, none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_to_kafka_loses_nothing_through_a_worker_kill() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let broker = weir_tests::kafka::Broker::start();
    broker.create_topic("events", 4);
    broker.create_topic("copies", 4);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let mut cluster = Cluster::on_loopback(&dir);
    let rest = cluster.rest.clone();
    registered(&rest, 3).await;
    let mut input = Input::kafka(&broker, "events", 9);
    let bundle = dir.join("copy");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(
        bundle.join("weir.toml"),
        format!(
            "[job]\nname = 'copy'\nparallelism = 2\n\
             [[source]]\nname = 'events'\n{}\
             [[sink]]\nname = 'copies'\ntype = 'kafka'\nbrokers = '{}'\ntopic = 'copies'\nkey-field = '/k'\n\
             [checkpoint]\ninterval-ms = 200\n\
             [restart]\nstrategy = 'fixed-delay'\nattempts = 100000\ndelay-ms = 200\n",
            input.source, broker.address
        ),
    )
    .unwrap();
    let job_url = format!("{rest}/v1/jobs/{}", common::submit(&rest, &bundle));
    let (job, latest) = running_past(&job_url, 0, "at the start").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let done = cluster
        .inject(Kind::KillWorker, &job, &mut Rng::new(9))
        .await;
    restarted(&job_url, job.restarts, &done).await;
    let (after, _) =
        running_past(&job_url, latest, &format!("kafka to kafka, after: {done}")).await;
    let total: u64 = input.stop().values().sum();
    let started = Instant::now();
    loop {
        let copies = broker.read("copies", 4, total as usize);
        let lines: std::collections::BTreeSet<u64> = copies
            .iter()
            .map(|(_, _, v)| {
                let v: serde_json::Value = serde_json::from_str(v).unwrap();
                v["i"].as_u64().unwrap()
            })
            .collect();
        if lines.len() as u64 == total {
            eprintln!(
                "kafka to kafka: {total} messages, {} copies through: {done}",
                copies.len()
            );
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{} of {total} messages copied",
            lines.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    common::weir(&["cancel", &after.id, "--coordinator", &rest]);
    drop(cluster);
}

/// A job whose stage `slow` takes 0.5 ms per record, fed (over channels: it
/// runs at parallelism 1) by a generator of `count` records (unbounded when
/// 0) at parallelism 2, as fast as it can go, into the exactly-once
/// part-file sink under `dir/out-NAME`; checkpoints every 500 ms that expire
/// after 3 s, the `[checkpoint]` table extended by `checkpoint`. Returns its
/// REST URL and the output directory.
fn submit_slow(
    rest: &str,
    dir: &Path,
    name: &str,
    count: u64,
    checkpoint: &str,
) -> (String, PathBuf) {
    let output = dir.join(format!("out-{name}"));
    let count = if count == 0 {
        String::new()
    } else {
        format!("count = '{count}'\n")
    };
    let bundle = common::bundle(
        dir,
        name,
        "test-guests",
        &format!(
            "[job]\nname = '{name}'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'gen'\ntype = 'generator'\n{count}\
             [[operator]]\nname = 'slow'\nfunction = 'slow'\nparallelism = 1\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n\
             [checkpoint]\ninterval-ms = 500\ntimeout-ms = 3000\n{checkpoint}\
             [restart]\nstrategy = 'fixed-delay'\nattempts = 100\ndelay-ms = 200\n",
            output.display()
        ),
    );
    let id = common::submit(rest, &bundle);
    (format!("{rest}/v1/jobs/{id}"), output)
}

/// Cancel the job at `url` and wait until it has ended.
async fn cancel_and_wait(rest: &str, url: &str) {
    let job: JobInfo = get(url).await.unwrap();
    common::weir(&["cancel", &job.id, "--coordinator", rest]);
    let started = Instant::now();
    while !get::<JobInfo>(url)
        .await
        .is_some_and(|j| j.state.is_terminal())
    {
        assert!(started.elapsed() < PATIENCE, "job {} is canceled", job.id);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Unaligned checkpoints under heavy backpressure. The slow stage's queue
/// holds 16 batches of 1,024 records (8 s of its work) ahead of any
/// barrier. Aligned, a checkpoint waits behind that queue and expires;
/// aligned with a timeout, it turns unaligned and completes; unaligned,
/// the barriers overtake the queue: checkpoints complete, storing the
/// records they overtook. Then the worker of the slow stage is killed:
/// the job restores an unaligned checkpoint, processes the records it
/// stored first, and its committed output holds every generated record
/// exactly once.
///
/// Checked once with the stored records left out of the restore (the
/// replay skipped): records are lost, and the exactness check fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unaligned_checkpoints_complete_under_backpressure_where_aligned_ones_expire() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let mut cluster = Cluster::on_loopback(&dir);
    let rest = cluster.rest.clone();
    registered(&rest, 3).await;

    // Aligned: every checkpoint expires behind the queue.
    let (aligned, _) = submit_slow(&rest, &dir, "aligned", 0, "");
    let started = Instant::now();
    let stats = loop {
        let c: Option<CheckpointStats> = get(&format!("{aligned}/checkpoints")).await;
        if let Some(c) = c.filter(|c| c.counts.failed >= 2) {
            break c;
        }
        assert!(started.elapsed() < PATIENCE, "aligned checkpoints expire");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(stats.counts.completed, 0, "{stats:#?}");
    assert!(
        stats
            .history
            .iter()
            .filter_map(|h| h.failure.as_deref())
            .any(|f| f.contains("timed out")),
        "{stats:#?}"
    );
    cancel_and_wait(&rest, &aligned).await;

    // Aligned until the alignment took 300 ms, then unaligned (Flink's
    // aligned checkpoint timeout): they complete, switched.
    let (timed, _) = submit_slow(
        &rest,
        &dir,
        "timed",
        0,
        "unaligned = true\naligned-timeout-ms = 300\n",
    );
    let started = Instant::now();
    let switched = loop {
        let c: Option<CheckpointStats> = get(&format!("{timed}/checkpoints")).await;
        if let Some(l) = c.as_ref().and_then(|c| c.latest_completed.clone()) {
            break l;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "checkpoints switched to unaligned complete under backpressure: {c:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // (Aligned, none completes: above. Whether it was aligned for its
    // first 300 ms is not visible here: its barrier may still have been
    // queued when it switched.)
    assert!(switched.unaligned, "{switched:#?}");
    cancel_and_wait(&rest, &timed).await;

    // Unaligned: the checkpoints complete, with records in flight.
    let count = 40_000;
    let (unaligned, output) = submit_slow(&rest, &dir, "unaligned", count, "unaligned = true\n");
    let started = Instant::now();
    let stats = loop {
        let c: Option<CheckpointStats> = get(&format!("{unaligned}/checkpoints")).await;
        if let Some(c) = c.as_ref().filter(|c| {
            c.latest_completed
                .as_ref()
                .is_some_and(|l| l.unaligned && l.inflight_bytes > 0)
        }) {
            break c.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "unaligned checkpoints complete under backpressure: {c:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let latest = stats.latest_completed.unwrap();
    eprintln!(
        "unaligned checkpoint {} completed in {:?} ms, {} bytes in flight stored",
        latest.id, latest.duration_ms, latest.inflight_bytes
    );
    // A failure: the slow stage's worker goes.
    let job: JobInfo = get(&unaligned).await.unwrap();
    let worker = job
        .subtasks
        .iter()
        .find(|t| t.vertex == "slow")
        .and_then(|t| t.worker.clone())
        .unwrap();
    let i = cluster
        .workers
        .iter()
        .position(|w| worker.ends_with(&format!("-{}", w.0.id())))
        .unwrap();
    let mut killed = cluster.workers.remove(i);
    killed.0.kill().unwrap();
    killed.0.wait().unwrap();
    let replacement = cluster.worker(false);
    cluster.workers.push(replacement);
    restarted(&unaligned, 0, "the slow stage's worker killed").await;
    let started = Instant::now();
    let restored = loop {
        let c: Option<CheckpointStats> = get(&format!("{unaligned}/checkpoints")).await;
        if let Some(r) = c.as_ref().and_then(|c| c.restored.as_ref()) {
            break r.id;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "restored from a checkpoint: {c:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(restored >= latest.id, "restored {restored}");
    eprintln!("restored checkpoint {restored}");
    let started = Instant::now();
    loop {
        let job: JobInfo = get(&unaligned).await.unwrap();
        if job.state.is_terminal() {
            assert_eq!(job.state, JobState::Finished, "{job:#?}");
            break;
        }
        assert!(started.elapsed() < PATIENCE, "the job finishes: {job:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut seen = vec![0u32; count as usize];
    for v in common::committed(&output).0 {
        let n = v["seq"].as_u64().unwrap_or_else(|| panic!("{v}")) as usize;
        seen[n] += 1;
    }
    let lost = seen.iter().filter(|&&n| n == 0).count();
    let twice = seen.iter().filter(|&&n| n > 1).count();
    assert_eq!((lost, twice), (0, 0), "records lost, records twice");
    drop(cluster);
}
