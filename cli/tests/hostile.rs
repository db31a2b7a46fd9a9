//! The hostile-guest catalogue, on a real cluster: a coordinator and two
//! worker processes on loopback run a well-behaved word count while jobs
//! whose operators sleep, spin, allocate without end, fill the log, emit
//! ten million records per input, grow their state without bound and
//! register ten million timers run beside it, and a component importing
//! what the host does not provide is refused at upload. Each hostile job fails with an error naming what it did (the
//! log filler's excess is dropped instead), the workers stay up, and the
//! word count's output is exact.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weir_coordinator::jobs::{JobInfo, JobState};

/// A worker process (2 slots) whose log goes to `log`.
fn worker(dir: &std::path::Path, name: &str, rpc: &str, log: &std::path::Path) -> common::Proc {
    let data = dir.join(name);
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "worker",
            "--coordinator",
            rpc,
            "--slots",
            "4",
            "--data-dir",
            data.to_str().unwrap(),
            "--allow-dir",
            dir.to_str().unwrap(),
            // A worker-wide cap below the default, to keep the test small.
            "--max-state-bytes",
            "268435456",
        ])
        .env(
            "WEIR_CACHE_DIR",
            std::env::temp_dir().join("weir-cli-tests-cache"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    common::Proc(child)
}

/// Wait for job `id` to end.
async fn ended(rest: &str, id: &str) -> JobInfo {
    common::job_until(rest, id, "the job ends", |j| j.state.is_terminal()).await
}

/// A bundle of the test guests: `lines` generated lines at `rate` per
/// second through the operators `operators` (manifest tables) into the
/// file `output`, at parallelism 1, never restarted.
fn bundle(
    dir: &std::path::Path,
    name: &str,
    (lines, rate): (u64, u64),
    operators: &str,
    output: &std::path::Path,
) -> std::path::PathBuf {
    common::bundle(
        dir,
        name,
        "test-guests",
        &format!(
            "[job]\nname = '{name}'\nparallelism = 1\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\ncount = {lines}\nrate = {rate}\n\
             {operators}\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n\
             [restart]\nstrategy = 'none'\n",
            output.display()
        ),
    )
}

fn submit(rest: &str, bundle: &std::path::Path) -> String {
    common::submitted(&common::weir(&[
        "submit",
        bundle.to_str().unwrap(),
        "--coordinator",
        rest,
    ]))
}

/// A hostile job.
struct Hostile {
    name: &'static str,
    /// Its operator tables.
    operators: &'static str,
    /// Its input: lines, and lines per second.
    input: (u64, u64),
    /// What its failure must say.
    says: &'static [&'static str],
}

const HOSTILE: &[Hostile] = &[
    Hostile {
        name: "sleeper",
        operators: "[[operator]]\nname = 'sleep'\nfunction = 'sleeps'\n",
        input: (10, 10),
        says: &["`sleep`", "wall-clock deadline"],
    },
    Hostile {
        name: "spinner",
        operators: "[[operator]]\nname = 'spin'\nfunction = 'endless'\n",
        input: (10, 10),
        says: &["`spin`", "call deadline of 5000 ms"],
    },
    Hostile {
        name: "memory-bomb",
        operators: "[[operator]]\nname = 'hoard'\nfunction = 'membomb'\n",
        input: (10, 10),
        says: &["`hoard`", "linear memory; the limit is 268435456"],
    },
    Hostile {
        name: "emitter",
        operators: "[[operator]]\nname = 'flood'\nfunction = 'emit-flood'\n",
        input: (10, 10),
        says: &["`flood`", "max-emit-records", "the limit is 1000000"],
    },
    Hostile {
        name: "state-grower",
        operators: "[[operator]]\nname = 'grow'\nfunction = 'state-grower'\nkey-by = 'value'\n",
        input: (1000, 20),
        says: &["`grow`", "max-state-bytes", "the limit is 268435456"],
    },
    Hostile {
        name: "timer-flood",
        operators: "[[operator]]\nname = 'timers'\nfunction = 'timer-flood'\nkey-by = 'value'\n",
        input: (1000, 20),
        says: &["`timers`", "max-timers", "the limit is 1000000"],
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_guests_fail_alone_while_a_good_job_beside_them_stays_exact() {
    let dir = tempfile::tempdir().unwrap();
    let (_coordinator, rest, rpc) = common::coordinator(
        &dir.path().join("coordinator"),
        &["--allow-dir", dir.path().to_str().unwrap()],
    );
    let logs = [dir.path().join("w1.log"), dir.path().join("w2.log")];
    let _w1 = worker(dir.path(), "w1", &rpc, &logs[0]);
    let _w2 = worker(dir.path(), "w2", &rpc, &logs[1]);
    let started = Instant::now();
    while common::worker_count(&rest).await < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "two workers register"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The good job: 40,000 lines (320,000 words) over ~10 s, counted.
    let good_out = dir.path().join("counts.jsonl");
    let good = submit(
        &rest,
        &bundle(
            dir.path(),
            "good",
            (40_000, 4_000),
            "[[operator]]\nname = 'words'\nfunction = 'words'\n\
             [[operator]]\nname = 'count'\nfunction = 'count-words'\nkey-by = 'value'\n",
            &good_out,
        ),
    );

    // The hostile ones, beside it.
    let mut hostile = Vec::new();
    for h in HOSTILE {
        let out = dir.path().join(format!("{}.jsonl", h.name));
        let b = bundle(dir.path(), h.name, h.input, h.operators, &out);
        hostile.push(submit(&rest, &b));
    }
    // The log filler: 20 records of 10 MB of stderr each; it finishes, its
    // log over 64 KiB a second dropped. Two records a second, so that one
    // call writes at most a few records' worth well within its deadline
    // while the hostile guests beside it keep both cores busy.
    let filler = submit(
        &rest,
        &bundle(
            dir.path(),
            "log-filler",
            (20, 2),
            "[[operator]]\nname = 'chatter'\nfunction = 'log-filler'\n",
            &dir.path().join("log-filler.jsonl"),
        ),
    );

    // A component importing what the host does not provide is refused at
    // upload, naming the import, while the others run.
    let importer = dir.path().join("importer");
    std::fs::create_dir_all(&importer).unwrap();
    let component =
        wat::parse_file(common::root().join("tests/guests/fixtures/unknown-import.wat")).unwrap();
    std::fs::write(importer.join("c.wasm"), component).unwrap();
    std::fs::write(
        importer.join("weir.toml"),
        "[job]\nname = 'importer'\n[component]\npath = 'c.wasm'\n\
         [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\ncount = 10\n\
         [[operator]]\nname = 'reach'\nfunction = 'connect'\n\
         [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '/dev/null'\n",
    )
    .unwrap();
    let refused = common::weir(&["submit", importer.to_str().unwrap(), "--coordinator", &rest]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("evil:net/sockets@1.0.0"), "{err}");

    for (h, id) in HOSTILE.iter().zip(&hostile) {
        let j = ended(&rest, id).await;
        assert_eq!(j.state, JobState::Failed, "{}: {j:#?}", h.name);
        let error = j.error.clone().unwrap_or_default();
        for needle in h.says {
            assert!(error.contains(needle), "{}: `{needle}` in {error}", h.name);
        }
    }
    let f = ended(&rest, &filler).await;
    assert_eq!(f.state, JobState::Finished, "{f:#?}");
    let logged: u64 = logs
        .iter()
        .map(|l| std::fs::metadata(l).unwrap().len())
        .sum();
    assert!(
        logged < 8 << 20,
        "200 MB of guest stderr became {logged} bytes of worker log"
    );

    let g = ended(&rest, &good).await;
    assert_eq!(g.state, JobState::Finished, "{g:#?}");
    // Each word's running counts 1..=n once each; 8 words a line.
    let mut counts = BTreeMap::<String, Vec<u64>>::new();
    for line in std::fs::read_to_string(&good_out).unwrap().lines() {
        let (word, n): (String, u64) = serde_json::from_str(line).unwrap();
        counts.entry(word).or_default().push(n);
    }
    let mut total = 0;
    for (word, mut seen) in counts {
        seen.sort_unstable();
        let n = seen.len() as u64;
        assert_eq!(seen, (1..=n).collect::<Vec<_>>(), "`{word}`");
        total += n;
    }
    assert_eq!(total, 40_000 * 8);
    // Both workers are still there.
    assert_eq!(common::worker_count(&rest).await, 2);
}
