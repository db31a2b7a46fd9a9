//! `weir savepoint`, `weir stop`, `weir rescale` and `weir upgrade`: a
//! job's state taken into a savepoint, and a job started again from it —
//! at another parallelism, or with a new bundle.

use std::path::Path;
use std::time::{Duration, Instant};

use weir_coordinator::jobs::{JobInfo, SavepointRequest};
use weir_coordinator::savepoint::triggers::{SavepointStatus, TriggerState};

use crate::client::Client;

/// How long a savepoint may take before the CLI stops waiting for it.
const SAVEPOINT_WAIT: Duration = Duration::from_secs(600);

/// How long a stopped job may take to end.
const STOP_WAIT: Duration = Duration::from_secs(60);

/// A path as the coordinator reads it: absolute (relative to the current
/// directory, which the coordinator does not share).
pub fn absolute(path: &Path) -> anyhow::Result<String> {
    let abs = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()?.join(path)
    };
    Ok(abs.display().to_string())
}

/// Take a savepoint of `job` (`stop`: and stop it), into `dir` if given;
/// wait until it is written: its status.
pub async fn take(
    client: &Client,
    job: &str,
    dir: Option<&Path>,
    stop: bool,
    drain: bool,
) -> anyhow::Result<SavepointStatus> {
    let request = SavepointRequest {
        directory: dir.map(absolute).transpose()?,
        trigger_id: None,
        drain,
    };
    let trigger = client.trigger_savepoint(job, &request, stop).await?;
    let started = Instant::now();
    loop {
        let now = client.savepoint(job, &trigger.trigger_id).await?;
        match now.status {
            TriggerState::Completed => return Ok(now),
            TriggerState::Failed => anyhow::bail!(
                "{}",
                now.error.unwrap_or_else(|| "the savepoint failed".into())
            ),
            TriggerState::InProgress if started.elapsed() > SAVEPOINT_WAIT => anyhow::bail!(
                "the savepoint of job {job} is still being taken after {} s (trigger {})",
                SAVEPOINT_WAIT.as_secs(),
                trigger.trigger_id
            ),
            TriggerState::InProgress => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Wait until `job` has ended.
async fn ended(client: &Client, job: &str) -> anyhow::Result<JobInfo> {
    let started = Instant::now();
    loop {
        let now = client.job(job).await?;
        if now.state.is_terminal() {
            return Ok(now);
        }
        if started.elapsed() > STOP_WAIT {
            anyhow::bail!(
                "job {job} is still {} {} s after its savepoint",
                crate::client::state_name(now.state),
                STOP_WAIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `weir savepoint JOB [DIR]`: the savepoint's location, last.
pub async fn savepoint(url: &str, job: &str, dir: Option<&Path>) -> anyhow::Result<()> {
    let client = Client::new(url)?;
    let s = take(&client, job, dir, false, false).await?;
    describe(&s);
    println!("{}", s.location.unwrap_or_default());
    Ok(())
}

/// `weir stop JOB [--drain]`: a savepoint, then the job ends (`drain`:
/// after the maximal watermark fired every window); the savepoint's
/// location, last.
pub async fn stop(url: &str, job: &str, dir: Option<&Path>, drain: bool) -> anyhow::Result<()> {
    let client = Client::new(url)?;
    let s = take(&client, job, dir, true, drain).await?;
    describe(&s);
    let info = ended(&client, job).await?;
    eprintln!("job {job} is {}", crate::client::state_name(info.state));
    println!("{}", s.location.unwrap_or_default());
    Ok(())
}

fn describe(s: &SavepointStatus) {
    eprintln!(
        "savepoint of job {} (checkpoint {}, {} bytes of state) written",
        s.job,
        s.checkpoint.unwrap_or(0),
        s.size_bytes.unwrap_or(0)
    );
}

/// Wait until trigger `trigger` of `job` (a rescale or an upgrade) has
/// started the new job: its status.
async fn resumed(client: &Client, job: &str, trigger: &str) -> anyhow::Result<SavepointStatus> {
    let started = Instant::now();
    loop {
        let now = client.savepoint(job, trigger).await?;
        match (&now.status, &now.resumed_as, &now.error) {
            (TriggerState::Failed, _, e) => anyhow::bail!(
                "{}",
                e.clone().unwrap_or_else(|| "the savepoint failed".into())
            ),
            (TriggerState::Completed, Some(_), _) => return Ok(now),
            (TriggerState::Completed, None, Some(e)) => anyhow::bail!(
                "{e} (the savepoint is in {})",
                now.location.clone().unwrap_or_default()
            ),
            _ if started.elapsed() > SAVEPOINT_WAIT + STOP_WAIT => anyhow::bail!(
                "job {job} has not started again after {} s (trigger {trigger})",
                (SAVEPOINT_WAIT + STOP_WAIT).as_secs()
            ),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// `weir rescale JOB N`: stop with a savepoint, start again at parallelism
/// `n` from it (the coordinator's rescaling); the new job's id, last.
pub async fn rescale(url: &str, job: &str, n: u32) -> anyhow::Result<()> {
    let client = Client::new(url)?;
    let trigger = client.rescale(job, n).await?;
    let done = resumed(&client, job, &trigger.trigger_id).await?;
    describe(&done);
    let new = done.resumed_as.unwrap_or_default();
    eprintln!(
        "job {new} goes on at parallelism {n} from the savepoint in {}",
        done.location.unwrap_or_default()
    );
    println!("{new}");
    Ok(())
}

/// `weir upgrade JOB BUNDLE`: the new bundle uploaded, then the job stopped
/// with a savepoint and the new bundle started from it (the coordinator's
/// upgrade); reports how long no job processed, and the new job's id last.
pub async fn upgrade(
    url: &str,
    job: &str,
    bundle_path: &Path,
    allow_non_restored_state: bool,
) -> anyhow::Result<()> {
    let client = Client::new(url)?;
    // The new bundle first: built and uploaded while the job still runs.
    let bundle = crate::bundle::open(bundle_path, true)?;
    let uploaded = client.upload(crate::bundle::archive(&bundle)?).await?;
    let trigger = client
        .upgrade(job, &uploaded.id, allow_non_restored_state)
        .await?;
    let done = resumed(&client, job, &trigger.trigger_id).await?;
    let new = done.resumed_as.clone().unwrap_or_default();
    // Sources read nothing after the savepoint's barrier; the new job
    // processes once it runs.
    let started = Instant::now();
    loop {
        let j = client.job(&new).await?;
        if j.state != weir_coordinator::jobs::JobState::Created || started.elapsed() > STOP_WAIT {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let paused = (weir_model::now_ms() - done.triggered_at_ms).max(0);
    describe(&done);
    eprintln!(
        "job {new} goes on from the savepoint in {} with the new bundle; no job processed for {paused} ms",
        done.location.unwrap_or_default()
    );
    println!("{new}");
    Ok(())
}
