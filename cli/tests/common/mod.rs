//! Helpers shared by the CLI's process tests (each test binary uses some).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A child process, killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `weir args…` and return it with the first line it prints (servers
/// announce their addresses there).
pub fn start(args: &[&str]) -> (Proc, String) {
    start_in(None, args)
}

/// As [`start`], in the network namespace `netns` if given (`ip netns
/// exec` runs the process itself there: its pid is the worker's).
pub fn start_in(netns: Option<&str>, args: &[&str]) -> (Proc, String) {
    start_with(netns, &[], args)
}

/// The arguments of a clear-text worker of one slot that registers with
/// the coordinator at `rpc`, listens on `at`, keeps its data in `data` and
/// lets jobs reach `allow`.
pub fn one_slot_worker(rpc: &str, at: &str, data: &Path, allow: &Path) -> Vec<String> {
    let listen = format!("{at}:0");
    [
        "worker",
        "--coordinator",
        rpc,
        "--rpc-listen",
        &listen,
        "--data-listen",
        &listen,
        "--slots",
        "1",
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-dir",
        allow.to_str().unwrap(),
        "--insecure",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// As [`start_in`], with the variables `env` set in its environment.
pub fn start_with(netns: Option<&str>, env: &[(&str, &str)], args: &[&str]) -> (Proc, String) {
    start_logged(netns, env, args, None)
}

/// As [`start_with`], its standard error written to `log` if given.
pub fn start_logged(
    netns: Option<&str>,
    env: &[(&str, &str)],
    args: &[&str],
    log: Option<&Path>,
) -> (Proc, String) {
    let stderr = match log {
        Some(log) => Stdio::from(std::fs::File::create(log).unwrap()),
        None => Stdio::inherit(),
    };
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_weir")]);
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_weir")),
    };
    let mut child = command
        .args(args)
        .envs(env.iter().copied())
        .env(
            "WEIR_CACHE_DIR",
            std::env::temp_dir().join("weir-cli-tests-cache"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the process announces itself");
    (Proc(child), line)
}

/// Start a worker process of two slots for the coordinator at `rpc`, its
/// data in `data`, letting jobs reach `allow`.
pub fn worker(rpc: &str, data: &Path, allow: &Path) -> Proc {
    start(&[
        "worker",
        "--coordinator",
        rpc,
        "--slots",
        "2",
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-dir",
        allow.to_str().unwrap(),
    ])
    .0
}

/// How many workers the coordinator at `rest` has.
pub async fn worker_count(rest: &str) -> usize {
    let c: serde_json::Value = reqwest::get(format!("{rest}/v1/cluster"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    c["workers"].as_array().map_or(0, Vec::len)
}

/// Start `weir local` on free loopback ports with its data in `data`,
/// granting jobs the directory beside it; returns it with its REST API's
/// address.
pub fn local(data: &std::path::Path) -> (Proc, String) {
    let (process, line) = start(&[
        "local",
        "--listen",
        "127.0.0.1:0",
        "--rpc-listen",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-dir",
        data.parent().unwrap().to_str().unwrap(),
    ]);
    let url = urls(&line)
        .into_iter()
        .next()
        .expect("weir local announces its address");
    (process, url)
}

/// Start `weir coordinator` on free loopback ports with its data in
/// `data` and `extra` arguments; returns it with its REST API's and its
/// workers' service's addresses.
pub fn coordinator(data: &std::path::Path, extra: &[&str]) -> (Proc, String, String) {
    let mut args = vec![
        "coordinator",
        "--listen",
        "127.0.0.1:0",
        "--rpc-listen",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (process, line) = start(&args);
    let urls = urls(&line);
    (process, urls[0].clone(), urls[1].clone())
}

/// The workspace's root.
pub fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `weir` binary as the tests run it: their component cache, no stdin.
pub fn command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env(
        "WEIR_CACHE_DIR",
        std::env::temp_dir().join("weir-cli-tests-cache"),
    )
    .stdin(Stdio::null());
    c
}

/// Run `weir args…` to its end in the workspace's root.
pub fn weir(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(root())
        .env(
            "WEIR_CACHE_DIR",
            std::env::temp_dir().join("weir-cli-tests-cache"),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The job id `weir submit` printed alone on its last line; the submission
/// must have succeeded.
pub fn submitted(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .expect("a job id")
        .trim()
        .to_owned()
}

/// A bundle directory `dir/name`: the component of the guest crate `guest`
/// as `c.wasm`, and `manifest` (which names `c.wasm` as its component).
pub fn bundle(
    dir: &std::path::Path,
    name: &str,
    guest: &str,
    manifest: &str,
) -> std::path::PathBuf {
    let bundle = dir.join(name);
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::copy(weir_tests::guest(guest), bundle.join("c.wasm")).unwrap();
    std::fs::write(bundle.join("weir.toml"), manifest).unwrap();
    bundle
}

/// The `http://` addresses in a line, in order.
pub fn urls(line: &str) -> Vec<String> {
    line.split_whitespace()
        .filter(|w| w.starts_with("http://") || w.starts_with("https://"))
        .map(|w| w.trim_end_matches(',').to_owned())
        .collect()
}

/// A bundle directory under `dir` whose job never ends: words from a
/// generator (1,000 lines/s per subtask) into the word count, to /dev/null.
pub fn endless_bundle(dir: &std::path::Path) -> std::path::PathBuf {
    endless_named(dir, "endless", None)
}

/// [`endless_bundle`] with another name, and a parallelism for its job.
pub fn endless_named(
    dir: &std::path::Path,
    name: &str,
    parallelism: Option<u32>,
) -> std::path::PathBuf {
    let parallelism = parallelism.map_or(String::new(), |p| format!("parallelism = {p}\n"));
    bundle(
        dir,
        name,
        "wordcount",
        &format!(
            "[job]\nname = '{name}'\n{parallelism}[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\nrate = '1000'\nparallelism = 1\n\
             [[operator]]\nname = 'split'\nfunction = 'split-words'\nparallelism = 1\n\
             [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = 'value'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '/dev/null'\n"
        ),
    )
}

/// Wait for `child` to end and return its output; after `limit` it is
/// killed and the test fails, naming `what` it was.
pub fn finish_within(mut child: Child, limit: Duration, what: &str) -> Output {
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            panic!("{what} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The job at `rest` with id `id`.
pub async fn job_info(rest: &str, id: &str) -> weir_coordinator::jobs::JobInfo {
    reqwest::get(format!("{rest}/v1/jobs/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Poll job `id` until `ok` holds (two minutes at most).
pub async fn job_until(
    rest: &str,
    id: &str,
    what: &str,
    ok: impl Fn(&weir_coordinator::jobs::JobInfo) -> bool,
) -> weir_coordinator::jobs::JobInfo {
    let started = std::time::Instant::now();
    loop {
        let j = job_info(rest, id).await;
        if ok(&j) {
            return j;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{what}: {j:#?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The lines an exactly-once file sink committed: those of the part files
/// in view in the directory `output` (hidden in-progress files aside), and
/// how many part files there were.
pub fn committed(output: &std::path::Path) -> (Vec<serde_json::Value>, usize) {
    let mut lines = Vec::new();
    let mut parts = 0;
    for entry in std::fs::read_dir(output).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.starts_with('.') {
            continue;
        }
        assert!(
            name.starts_with("part-") && name.ends_with(".jsonl"),
            "{name}"
        );
        parts += 1;
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            lines.push(serde_json::from_str(line).unwrap());
        }
    }
    (lines, parts)
}

/// Per key, the counts a built-in `count` committed to the exactly-once
/// file sink in `output` (nothing when it has not been created), sorted.
pub fn committed_counts(output: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u64>> {
    let mut counts = std::collections::BTreeMap::<String, Vec<u64>>::new();
    if output.exists() {
        for v in committed(output).0 {
            counts
                .entry(v["key"].as_str().unwrap().to_owned())
                .or_default()
                .push(v["count"].as_u64().unwrap());
        }
    }
    for c in counts.values_mut() {
        c.sort_unstable();
    }
    counts
}

/// Wait (two minutes at most) until the committed counts of a built-in
/// `count` in `output` are every key's 1..n of `want` (n its input lines),
/// failing at once on a count committed twice or more counts than lines
/// (`what`: whose output it is).
pub async fn counted_exactly(
    output: &std::path::Path,
    want: &std::collections::BTreeMap<String, u64>,
    what: &str,
) {
    let started = Instant::now();
    loop {
        let got = committed_counts(output);
        for (k, c) in &got {
            let mut seen = c.clone();
            seen.dedup();
            assert_eq!(
                seen.len(),
                c.len(),
                "{what}: `{k}`: a count committed twice: {c:?}"
            );
            assert!(
                c.len() as u64 <= want.get(k).copied().unwrap_or(0),
                "{what}: `{k}`: more counts than input lines: {c:?}"
            );
        }
        if got.len() == want.len()
            && got
                .iter()
                .all(|(k, c)| *c == (1..=want[k]).collect::<Vec<_>>())
        {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{what}: the committed output catches up with the input ({} lines): {:?}",
            want.values().sum::<u64>(),
            got.iter()
                .map(|(k, c)| (k, c.len(), want.get(k)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The committed output of an exactly-once file sink (the part files in
/// view in the directory `output`): for every word, each count from 1 to
/// its total exactly once, and the totals add up to `total`. `read` takes a
/// line's word and count.
pub fn exactly_once(
    output: &std::path::Path,
    total: u64,
    read: impl Fn(&serde_json::Value) -> (String, u64),
) {
    let mut counts = std::collections::BTreeMap::<String, Vec<u64>>::new();
    let (lines, parts) = committed(output);
    for line in &lines {
        let (word, count) = read(line);
        counts.entry(word).or_default().push(count);
    }
    assert!(parts > 1, "parts committed with the checkpoints");
    let mut sum = 0;
    for (word, mut seen) in counts {
        seen.sort_unstable();
        let n = seen.len() as u64;
        assert_eq!(
            seen,
            (1..=n).collect::<Vec<_>>(),
            "`{word}`: each count once"
        );
        sum += n;
    }
    assert_eq!(sum, total, "nothing lost, nothing twice");
}

/// Poll job `id`'s checkpoints until `ok` holds (a minute at most).
pub async fn checkpoints_until(
    rest: &str,
    id: &str,
    ok: impl Fn(&weir_coordinator::checkpoint::CheckpointStats) -> bool,
) -> weir_coordinator::checkpoint::CheckpointStats {
    let started = Instant::now();
    loop {
        let c = reqwest::get(format!("{rest}/v1/jobs/{id}/checkpoints"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if ok(&c) {
            return c;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "checkpoints of job {id}: {c:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Submit the bundle directory `bundle` to the coordinator at `rest`;
/// returns the job's id.
pub fn submit(rest: &str, bundle: &std::path::Path) -> String {
    submitted(&weir(&[
        "submit",
        bundle.to_str().unwrap(),
        "--coordinator",
        rest,
    ]))
}

#[allow(unused_imports)]
pub use weir_tests::free_port;

/// The JSON lines of a file, in order.
pub fn json_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A network namespace joined to this one by a veth pair, `10.231.N.1`
/// here and `10.231.N.2` there; removed when dropped (also when the test
/// fails).
pub struct NetNs {
    pub name: String,
    host_link: String,
    subnet: String,
}

fn ip(args: &[&str]) {
    let o = std::process::Command::new("ip")
        .args(args)
        .output()
        .expect("`ip` (iproute2) runs");
    assert!(
        o.status.success(),
        "ip {}: {} (network namespaces need root)",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

impl NetNs {
    pub fn new() -> NetNs {
        let pid = std::process::id();
        let ns = NetNs {
            name: format!("weir-t{pid}"),
            host_link: format!("wh{pid}"),
            subnet: format!("10.231.{}", 20 + pid % 200),
        };
        // Leftovers of runs that were killed before they cleaned up.
        let listed = std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for pid in listed
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.strip_prefix("weir-t"))
            .filter_map(|p| p.parse::<u32>().ok())
            .filter(|p| *p == pid || !std::path::Path::new(&format!("/proc/{p}")).exists())
        {
            NetNs {
                name: format!("weir-t{pid}"),
                host_link: format!("wh{pid}"),
                subnet: format!("10.231.{}", 20 + pid % 200),
            }
            .remove();
        }
        ns.remove();
        let peer = format!("wn{pid}");
        let (here, there) = (ns.here(), ns.there());
        ip(&["netns", "add", &ns.name]);
        ip(&[
            "link",
            "add",
            &ns.host_link,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
        ]);
        ip(&["link", "set", &peer, "netns", &ns.name]);
        ip(&["addr", "add", &format!("{here}/24"), "dev", &ns.host_link]);
        ip(&["link", "set", &ns.host_link, "up"]);
        // While the link is down its route is gone: without this one the
        // subnet's packets would take the default route off the machine.
        ip(&["route", "add", "unreachable", &ns.net(), "metric", "4000"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &ns.name, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["addr", "add", &format!("{there}/24"), "dev", &peer]);
        inside(&["link", "set", &peer, "up"]);
        inside(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn here(&self) -> String {
        format!("{}.1", self.subnet)
    }

    fn net(&self) -> String {
        format!("{}.0/24", self.subnet)
    }

    pub fn there(&self) -> String {
        format!("{}.2", self.subnet)
    }

    /// Cut the link (`false`) or heal it (`true`).
    pub fn link(&self, up: bool) {
        ip(&[
            "link",
            "set",
            &self.host_link,
            if up { "up" } else { "down" },
        ]);
    }
}

impl NetNs {
    fn remove(&self) {
        for args in [
            vec!["link", "del", &self.host_link],
            vec!["netns", "del", &self.name],
        ] {
            let _ = std::process::Command::new("ip").args(args).output();
        }
        let net = self.net();
        let _ = std::process::Command::new("ip")
            .args(["route", "del", "unreachable", &net, "metric", "4000"])
            .output();
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        self.remove();
    }
}
pub mod kafka;
pub mod orders;
