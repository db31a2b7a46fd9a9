//! The CLI's side of the REST API: `weir submit`, `list`, `status`,
//! `checkpoints`, `cancel`, `savepoint`, `stop`, `rescale`, `upgrade`.

use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::multipart::{Form, Part};
use serde::de::DeserializeOwned;
use weir_coordinator::bundles::BundleInfo;
use weir_coordinator::checkpoint::CheckpointStats;
use weir_coordinator::checkpoint::stats::CheckpointStatus;
use weir_coordinator::error::ErrorBody;
use weir_coordinator::jobs::{JobInfo, JobRequest, JobState, SavepointRequest};
use weir_coordinator::metrics::JobMetrics;
use weir_coordinator::savepoint::triggers::SavepointStatus;

/// A client of one coordinator.
pub struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    /// A client of the coordinator at `url` (e.g. `http://127.0.0.1:8081`),
    /// sending the token in `WEIR_TOKEN`, if set; an `https://` coordinator's
    /// certificate must be signed by one in `WEIR_CA_CERT` (PEM), if set,
    /// else by one the system trusts.
    pub fn new(url: &str) -> anyhow::Result<Client> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(token) = std::env::var("WEIR_TOKEN").ok().filter(|t| !t.is_empty()) {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .context("WEIR_TOKEN holds characters a header cannot")?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let mut http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .default_headers(headers);
        if let Some(ca) = std::env::var_os("WEIR_CA_CERT").filter(|c| !c.is_empty()) {
            let pem = std::fs::read(&ca).with_context(|| {
                format!(
                    "cannot read WEIR_CA_CERT {}",
                    std::path::Path::new(&ca).display()
                )
            })?;
            http = http.tls_backend_preconfigured(weir_model::tls::client_trusting(
                &pem,
                "certificate in WEIR_CA_CERT",
            )?);
        }
        let http = http.build()?;
        Ok(Client {
            base: url.trim_end_matches('/').to_owned(),
            http,
        })
    }

    async fn answer<T: DeserializeOwned>(
        &self,
        response: Result<reqwest::Response, reqwest::Error>,
    ) -> anyhow::Result<T> {
        let response = response.map_err(|e| {
            let mut cause = String::new();
            let mut source: Option<&dyn std::error::Error> = Some(&e);
            while let Some(s) = source {
                cause = s.to_string();
                source = s.source();
            }
            if cause.contains("certificate") {
                anyhow::anyhow!(
                    "the coordinator at {} has a TLS certificate this client does not trust ({cause}): set WEIR_CA_CERT to the cluster's certificate (PEM)",
                    self.base
                )
            } else if e.is_connect() || e.is_timeout() {
                anyhow::anyhow!("cannot reach the coordinator at {}: is `weir local` (or a coordinator) running there?", self.base)
            } else {
                anyhow::anyhow!("talking to the coordinator at {}: {e}", self.base)
            }
        })?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .context("reading the coordinator's answer")?;
        if !status.is_success() {
            match serde_json::from_slice::<ErrorBody>(&body) {
                Ok(e) => bail!("{} ({}, {})", e.message, status.as_u16(), e.code),
                Err(_) => bail!(
                    "the coordinator answered {status}: {}",
                    String::from_utf8_lossy(&body)
                ),
            }
        }
        serde_json::from_slice(&body)
            .with_context(|| format!("unexpected answer from {}", self.base))
    }

    /// Upload a bundle archive.
    pub async fn upload(&self, archive: Vec<u8>) -> anyhow::Result<BundleInfo> {
        let form = Form::new().part("bundle", Part::bytes(archive).file_name("bundle.weir"));
        let r = self
            .http
            .post(format!("{}/v1/bundles", self.base))
            .multipart(form)
            .send()
            .await;
        self.answer(r).await
    }

    /// Submit a job.
    pub async fn submit(&self, request: &JobRequest) -> anyhow::Result<JobInfo> {
        let r = self
            .http
            .post(format!("{}/v1/jobs", self.base))
            .json(request)
            .send()
            .await;
        self.answer(r).await
    }

    /// All jobs.
    pub async fn jobs(&self) -> anyhow::Result<Vec<JobInfo>> {
        let r = self.http.get(format!("{}/v1/jobs", self.base)).send().await;
        self.answer(r).await
    }

    /// One job.
    pub async fn job(&self, id: &str) -> anyhow::Result<JobInfo> {
        let r = self
            .http
            .get(format!("{}/v1/jobs/{id}", self.base))
            .send()
            .await;
        self.answer(r).await
    }

    /// A job's metrics.
    /// A job's checkpoints.
    pub async fn checkpoints(&self, id: &str) -> anyhow::Result<CheckpointStats> {
        let r = self
            .http
            .get(format!("{}/v1/jobs/{id}/checkpoints", self.base))
            .send()
            .await;
        self.answer(r).await
    }

    /// A job's metrics.
    pub async fn metrics(&self, id: &str) -> anyhow::Result<JobMetrics> {
        let r = self
            .http
            .get(format!("{}/v1/jobs/{id}/metrics", self.base))
            .send()
            .await;
        self.answer(r).await
    }

    /// Trigger a savepoint of job `id` (`stop`: and stop the job after it).
    pub async fn trigger_savepoint(
        &self,
        id: &str,
        request: &SavepointRequest,
        stop: bool,
    ) -> anyhow::Result<SavepointStatus> {
        let what = if stop { "stop" } else { "savepoints" };
        let r = self
            .http
            .post(format!("{}/v1/jobs/{id}/{what}", self.base))
            .json(request)
            .send()
            .await;
        self.answer(r).await
    }

    /// Rescale job `id` to `parallelism` (a stop with a savepoint, and the
    /// job started again from it).
    pub async fn rescale(&self, id: &str, parallelism: u32) -> anyhow::Result<SavepointStatus> {
        let r = self
            .http
            .patch(format!(
                "{}/v1/jobs/{id}/rescaling?parallelism={parallelism}",
                self.base
            ))
            .send()
            .await;
        self.answer(r).await
    }

    /// Upgrade job `id` to bundle `bundle` (a stop with a savepoint, and
    /// the new bundle started from it).
    pub async fn upgrade(
        &self,
        id: &str,
        bundle: &str,
        allow_non_restored_state: bool,
    ) -> anyhow::Result<SavepointStatus> {
        let r = self
            .http
            .post(format!("{}/v1/jobs/{id}/upgrade", self.base))
            .json(&weir_coordinator::jobs::UpgradeRequest {
                bundle: bundle.to_owned(),
                allow_non_restored_state,
            })
            .send()
            .await;
        self.answer(r).await
    }

    /// Savepoint trigger `trigger` of job `id`.
    pub async fn savepoint(&self, id: &str, trigger: &str) -> anyhow::Result<SavepointStatus> {
        let r = self
            .http
            .get(format!("{}/v1/jobs/{id}/savepoints/{trigger}", self.base))
            .send()
            .await;
        self.answer(r).await
    }

    /// Cancel a job.
    pub async fn cancel(&self, id: &str) -> anyhow::Result<JobInfo> {
        let r = self
            .http
            .post(format!("{}/v1/jobs/{id}/cancel", self.base))
            .send()
            .await;
        self.answer(r).await
    }
}

/// A job's state as a word.
pub fn state_name(state: JobState) -> &'static str {
    weir_coordinator::jobs::state_name(state)
}

/// A job, as `weir status` shows it, with rates, backpressure and watermarks
/// when its metrics are at hand.
pub fn describe(job: &JobInfo, metrics: Option<&JobMetrics>) -> String {
    let mut out = format!(
        "job {} ({}) is {}\n",
        job.id,
        job.name,
        state_name(job.state)
    );
    if let Some(e) = &job.error {
        out.push_str(&format!("error: {e}\n"));
    }
    if job.restarts > 0 {
        out.push_str(&format!(
            "attempt {}: restarted {} time{} after failures:\n",
            job.attempt,
            job.restarts,
            if job.restarts == 1 { "" } else { "s" }
        ));
        for e in &job.exceptions {
            if e.count > 1 {
                out.push_str(&format!(
                    "  attempts {}-{} ({} times): {}\n",
                    e.attempt, e.last_attempt, e.count, e.message
                ));
            } else {
                out.push_str(&format!("  attempt {}: {}\n", e.attempt, e.message));
            }
        }
    }
    for v in &job.vertices {
        out.push_str(&format!(
            "  {:<16} parallelism {:>2}  records in {:>10}  out {:>10}",
            v.name, v.parallelism, v.records_in, v.records_out
        ));
        if let Some(m) = metrics.and_then(|m| m.vertices.iter().find(|m| m.name == v.name)) {
            let watermark = match m.watermark {
                Some(w) if w < i64::MAX => w.to_string(),
                Some(_) => "end".to_owned(),
                None => "-".to_owned(),
            };
            out.push_str(&format!(
                "  {:>9}/s  backpressure {:>3.0}%  watermark {watermark}",
                crate::progress::thousands(m.records_out_per_s.max(m.records_in_per_s) as u64),
                m.backpressure * 100.0
            ));
        }
        out.push('\n');
    }
    if !job.subtasks.is_empty() {
        out.push_str("subtasks:\n");
    }
    for t in &job.subtasks {
        let place = match (&t.worker, t.slot) {
            (Some(w), Some(s)) => format!("worker {w}, slot {s}"),
            _ => "in the coordinator".to_owned(),
        };
        out.push_str(&format!(
            "  {:<20} {:<9}  in {:>10}  out {:>10}  {place}\n",
            format!("{}[{}]", t.vertex, t.subtask),
            format!("{:?}", t.state).to_lowercase(),
            t.records_in,
            t.records_out
        ));
    }
    out
}

/// Bytes for people.
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// `weir checkpoints`: the counts, then the recent checkpoints.
pub fn describe_checkpoints(job: &str, c: &CheckpointStats) -> String {
    let Some(config) = &c.config else {
        return format!("job {job} takes no checkpoints (its manifest has no [checkpoint])\n");
    };
    let mut out = format!(
        "job {job}: a checkpoint every {} ms ({}); {} triggered, {} in progress, {} completed, {} failed\n",
        config.interval_ms,
        match config.mode {
            weir_model::CheckpointMode::ExactlyOnce => "exactly-once",
            weir_model::CheckpointMode::AtLeastOnce => "at-least-once",
        },
        c.counts.triggered,
        c.counts.in_progress,
        c.counts.completed,
        c.counts.failed
    );
    if let Some(r) = &c.restored {
        out.push_str(&format!(
            "restored from checkpoint {} (attempt {})\n",
            r.id, r.attempt
        ));
    }
    out.push_str(&format!(
        "{:>6}  {:<11}  {:>9}  {:>10}  {:>10}  {:>7}  {}\n",
        "id", "status", "duration", "state", "uploaded", "acks", "failure"
    ));
    for s in &c.history {
        out.push_str(&format!(
            "{:>6}  {:<11}  {:>9}  {:>10}  {:>10}  {:>7}  {}\n",
            s.id,
            match s.status {
                CheckpointStatus::InProgress => "in progress",
                CheckpointStatus::Completed => "completed",
                CheckpointStatus::Failed => "failed",
            },
            s.duration_ms.map(|d| format!("{d} ms")).unwrap_or_default(),
            bytes(s.state_bytes),
            bytes(s.uploaded_bytes),
            format!("{}/{}", s.acknowledged, s.total),
            s.failure.as_deref().unwrap_or("")
        ));
    }
    out
}
