//! The coordinator's REST API for bundles, called in process (no server):
//! uploads are checked whole, stored content-addressed, listed again after a
//! restart; every bad input gets a 4xx JSON error and leaves nothing stored.

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use tower::ServiceExt;
use weir_coordinator::auth::{Role, Tokens};
use weir_coordinator::blob::BlobStore;
use weir_coordinator::bundles::{BundleInfo, BundleStore};
use weir_coordinator::error::ErrorBody;
use weir_coordinator::job_master::{Done, Events, Execution, JobRunner};
use weir_coordinator::jobs::{JobInfo, JobState, Jobs, TaskState, subtasks_of};
use weir_coordinator::rest::{AppState, app};
use weir_coordinator::slot_manager::{HeartbeatConfig, SlotManager};
use weir_host::WasmRuntime;
use weir_model::JobGraph;
use weir_model::bundle::{BundleFiles, pack};
use weir_model::proto::JobComponent;
use weir_worker::{LocalJob, WasmOperatorFactory, run_job};

use crate::runtime;

/// Runs every task of a job in this test's process (no workers): the
/// dispatcher's tests need only its `JobRunner` interface.
struct EmbeddedRunner {
    runtime: Arc<WasmRuntime>,
}

#[tonic::async_trait]
impl JobRunner for EmbeddedRunner {
    async fn start(
        &self,
        _id: &str,
        graph: JobGraph,
        components: Vec<JobComponent>,
        done: Done,
        _events: Events,
    ) -> Result<Execution, weir_coordinator::error::CoordinatorError> {
        let params = graph.params.clone().into_iter().collect();
        let files = components.into_iter().map(|c| (c.name, c.wasm)).collect();
        let components = weir_host::JobComponents::load(&self.runtime, files).map_err(|e| {
            weir_coordinator::error::CoordinatorError::unprocessable(
                "component_invalid",
                e.to_string(),
            )
        })?;
        let factory = Arc::new(WasmOperatorFactory {
            runtime: self.runtime.clone(),
            components,
            params,
            state: weir_worker::state::StateSetup::in_memory(),
            attempt: 0,
        });
        let job = LocalJob::new(graph, factory);
        let running = Execution {
            cancel: job.cancel.clone(),
            counters: job.counters.clone(),
            subtasks: Arc::new(std::sync::Mutex::new(subtasks_of(
                &job.graph,
                TaskState::Running,
            ))),
            checkpoints: None,
            stopped: Default::default(),
        };
        tokio::spawn(async move { done(run_job(job).await.map(|_| ())) });
        Ok(running)
    }
}

/// The coordinator's API over `data`, running jobs in process, open.
pub fn router(data: &Path, max_upload: usize) -> axum::Router {
    router_with(data, max_upload, Tokens::open())
}

/// [`router`], accepting `tokens`.
fn router_with(data: &Path, max_upload: usize, tokens: Tokens) -> axum::Router {
    let rt = runtime();
    let blobs = BlobStore::local(&data.join("blobs")).unwrap();
    let bundles = Arc::new(BundleStore::open(data, blobs, rt.clone(), 64 << 20).unwrap());
    let runner = Box::new(EmbeddedRunner {
        runtime: rt.clone(),
    });
    // Jobs read and write files in the test's directory.
    let allowed = weir_model::access::AllowedDirs::new([data]).unwrap();
    let jobs = Jobs::open(data, bundles.clone(), runner, allowed).unwrap();
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let jobs = jobs.clone();
        handle.spawn(async move { jobs.resume_recovering().await });
    }
    let slots = SlotManager::new(HeartbeatConfig::default());
    app(AppState {
        bundles,
        jobs,
        slots,
        max_upload,
        tokens: Arc::new(tokens),
        hosts: Default::default(),
    })
}

const BOUNDARY: &str = "weir-test-boundary";

pub fn multipart(field: &str, bytes: &[u8]) -> Request<Body> {
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"b.weir\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    Request::post("/v1/bundles")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(Body::from(body))
        .unwrap()
}

pub async fn call(router: &axum::Router, request: Request<Body>) -> (StatusCode, Vec<u8>) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, body.to_vec())
}

async fn error(
    router: &axum::Router,
    request: Request<Body>,
    status: StatusCode,
    code: &str,
    needle: &str,
) {
    let (got, body) = call(router, request).await;
    let e: ErrorBody = serde_json::from_slice(&body)
        .unwrap_or_else(|_| panic!("not a JSON error: {}", String::from_utf8_lossy(&body)));
    assert_eq!((got, e.code.as_str()), (status, code), "{}", e.message);
    assert!(
        e.message.contains(needle),
        "{needle:?} not in {:?}",
        e.message
    );
}

pub fn wordcount_archive() -> Vec<u8> {
    let manifest =
        std::fs::read_to_string(weir_tests::workspace_root().join("examples/wordcount/weir.toml"))
            .unwrap();
    let component = std::fs::read(weir_tests::guest("wordcount")).unwrap();
    pack(&BundleFiles::single(manifest, component)).unwrap()
}

fn files_under(dir: &Path) -> usize {
    if !dir.exists() {
        return 0;
    }
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            if p.is_dir() { files_under(&p) } else { 1 }
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_list_get_delete_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let archive = wordcount_archive();
    let (status, body) = call(&api, multipart("bundle", &archive)).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let info: BundleInfo = serde_json::from_slice(&body).unwrap();
    assert_eq!(info.name, "wordcount");
    assert_eq!(info.id, weir_coordinator::blob::sha256_hex(&archive));
    let ops: Vec<&str> = info.operators.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(ops, ["split-words", "count"]);
    assert!(info.params.contains_key("input"));

    // The same archive again: the same bundle, stored once.
    let (status, body) = call(&api, multipart("bundle", &archive)).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(serde_json::from_slice::<BundleInfo>(&body).unwrap(), info);
    assert_eq!(
        files_under(&dir.path().join("blobs")),
        2,
        "the archive and the component"
    );

    // A restarted coordinator lists it again.
    let restarted = router(dir.path(), 64 << 20);
    let (status, body) = call(
        &restarted,
        Request::get("/v1/bundles").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_slice::<Vec<BundleInfo>>(&body).unwrap(),
        std::slice::from_ref(&info)
    );
    let (status, _) = call(
        &restarted,
        Request::get(format!("/v1/bundles/{}", info.id))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    let (status, _) = call(
        &restarted,
        Request::delete(format!("/v1/bundles/{}", info.id))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    error(
        &restarted,
        Request::get(format!("/v1/bundles/{}", info.id))
            .body(Body::empty())
            .unwrap(),
        StatusCode::NOT_FOUND,
        "bundle_not_found",
        &info.id,
    )
    .await;
    assert_eq!(files_under(&dir.path().join("blobs")), 0);
    assert_eq!(files_under(&dir.path().join("bundles")), 0);
}

fn raw_tar_with(name: &[u8], body: &[u8]) -> Vec<u8> {
    let mut header = tar_header(name, body.len());
    header.set_cksum();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    tar.append(&header, body).unwrap();
    tar.into_inner().unwrap().finish().unwrap()
}

fn tar_header(name: &[u8], size: usize) -> tar::Header {
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name);
    header.set_size(size as u64);
    header.set_mode(0o644);
    header
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_uploads_get_4xx_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let manifest =
        std::fs::read_to_string(weir_tests::workspace_root().join("examples/wordcount/weir.toml"))
            .unwrap();
    let component = std::fs::read(weir_tests::guest("wordcount")).unwrap();

    error(
        &api,
        multipart("bundle", b"this is not an archive"),
        StatusCode::BAD_REQUEST,
        "bundle_invalid_archive",
        "not a bundle archive",
    )
    .await;
    error(
        &api,
        multipart("bundle", &raw_tar_with(b"../escape", b"x")),
        StatusCode::BAD_REQUEST,
        "bundle_invalid_archive",
        "outside the bundle",
    )
    .await;
    let wrong_world = pack(&BundleFiles::single(
        manifest.clone(),
        b"\0asm\x0d\0\x01\0".to_vec(),
    ))
    .unwrap();
    error(
        &api,
        multipart("bundle", &wrong_world),
        StatusCode::UNPROCESSABLE_ENTITY,
        "component_invalid",
        "Weir operator world",
    )
    .await;
    let core = pack(&BundleFiles::single(
        manifest.clone(),
        b"\0asm\x01\0\0\0".to_vec(),
    ))
    .unwrap();
    error(
        &api,
        multipart("bundle", &core),
        StatusCode::UNPROCESSABLE_ENTITY,
        "component_invalid",
        "core WebAssembly module",
    )
    .await;
    let missing_op = manifest.replace("function = \"count\"", "function = \"tally\"");
    let archive = pack(&BundleFiles::single(missing_op, component.clone())).unwrap();
    error(
        &api,
        multipart("bundle", &archive),
        StatusCode::UNPROCESSABLE_ENTITY,
        "manifest_invalid",
        "`tally`",
    )
    .await;
    let archive = pack(&BundleFiles::single(
        "[job]\nname = 3\n".into(),
        component.clone(),
    ))
    .unwrap();
    error(
        &api,
        multipart("bundle", &archive),
        StatusCode::UNPROCESSABLE_ENTITY,
        "manifest_invalid",
        "invalid manifest",
    )
    .await;
    error(
        &api,
        multipart("file", b"x"),
        StatusCode::BAD_REQUEST,
        "upload_missing_bundle",
        "`bundle`",
    )
    .await;
    let not_multipart = Request::post("/v1/bundles")
        .header("content-type", "application/json")
        .body(Body::from("{}"))
        .unwrap();
    error(
        &api,
        not_multipart,
        StatusCode::BAD_REQUEST,
        "upload_not_multipart",
        "multipart/form-data",
    )
    .await;
    error(
        &api,
        Request::get("/v1/bundles/nope")
            .body(Body::empty())
            .unwrap(),
        StatusCode::NOT_FOUND,
        "bundle_not_found",
        "nope",
    )
    .await;
    error(
        &api,
        Request::delete("/v1/bundles/nope")
            .body(Body::empty())
            .unwrap(),
        StatusCode::NOT_FOUND,
        "bundle_not_found",
        "nope",
    )
    .await;
    error(
        &api,
        Request::get("/v2/things").body(Body::empty()).unwrap(),
        StatusCode::NOT_FOUND,
        "not_found",
        "openapi",
    )
    .await;

    // An upload over the limit.
    let small = router(dir.path(), 4096);
    let big = pack(&BundleFiles::single(manifest, component)).unwrap();
    assert!(big.len() > 4096);
    error(
        &small,
        multipart("bundle", &big),
        StatusCode::PAYLOAD_TOO_LARGE,
        "upload_too_large",
        "4096",
    )
    .await;

    assert_eq!(
        files_under(&dir.path().join("blobs")),
        0,
        "nothing half-stored"
    );
    let (_, body) = call(
        &api,
        Request::get("/v1/bundles").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        serde_json::from_slice::<Vec<BundleInfo>>(&body).unwrap(),
        []
    );
}

#[tokio::test]
async fn the_openapi_document_lists_the_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 1024);
    let (status, body) = call(
        &api,
        Request::get("/v1/openapi.json")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/bundles",
        "/v1/bundles/{id}",
        "/v1/jobs",
        "/v1/jobs/{id}",
        "/v1/jobs/{id}/cancel",
        "/v1/openapi.json",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} is documented");
    }
}

/// Send `request`, which must create what it asks for; its answer.
async fn created<T: serde::de::DeserializeOwned>(api: &axum::Router, request: Request<Body>) -> T {
    let (status, body) = call(api, request).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    serde_json::from_slice(&body).unwrap()
}

/// Upload `archive`, which must be accepted.
async fn upload(api: &axum::Router, archive: &[u8]) -> BundleInfo {
    created(api, multipart("bundle", archive)).await
}

fn json_post(path: &str, body: serde_json::Value) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

async fn wait_for(api: &axum::Router, id: &str, done: impl Fn(&JobInfo) -> bool) -> JobInfo {
    let started = std::time::Instant::now();
    loop {
        let (status, body) = call(
            api,
            Request::get(format!("/v1/jobs/{id}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let job: JobInfo = serde_json::from_slice(&body).unwrap();
        if done(&job) {
            return job;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "job {id} stuck: {job:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A bundle of built-in operators only is its manifest: uploaded, run and
/// deleted with no component; a function in such a bundle is refused at
/// upload, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_of_built_in_operators_has_no_component() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let output = dir.path().join("out.jsonl");
    let manifest = |operator: &str| {
        format!(
            "[job]\nname = 'sql'\n\
             [[source]]\nname = 'numbers'\ntype = 'generator'\npattern = 'numbers'\ncount = '300'\n\
             [[operator]]\n{operator}\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            output.display()
        )
    };
    let files = |text: String| BundleFiles {
        manifest: text,
        components: Vec::new(),
    };
    let archive = pack(&files(manifest(
        "name = 'counts'\nbuiltin = 'count'\nkey-by = '/price'",
    )))
    .unwrap();
    let bundle = upload(&api, &archive).await;
    assert_eq!(
        (bundle.components.len(), bundle.component_sha256.as_str()),
        (0, "")
    );
    assert_eq!(
        files_under(&dir.path().join("blobs")),
        1,
        "the archive alone"
    );
    let job: JobInfo = created(
        &api,
        json_post("/v1/jobs", serde_json::json!({"bundle": bundle.id})),
    )
    .await;
    let job = wait_for(&api, &job.id, |j| j.state.is_terminal()).await;
    assert_eq!(job.state, JobState::Finished, "{:?}", job.error);
    // 300 events over 300 prices (`id % 1000`): one count of 1 each.
    let out = std::fs::read_to_string(&output).unwrap();
    assert_eq!(out.lines().count(), 300);
    assert!(out.lines().all(|l| l.contains("\"count\":1")), "{out}");
    let (status, _) = call(
        &api,
        Request::delete(format!("/v1/bundles/{}", bundle.id))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(files_under(&dir.path().join("blobs")), 0);

    // A function needs a component, even when a parameter without a
    // default keeps the upload from planning the job; so does a manifest
    // that declares one.
    for (text, says) in [
        (
            manifest("name = 'split'\nfunction = 'split-words'"),
            "operator `split` (function `split-words`) needs one",
        ),
        (
            manifest("name = 'split'\nfunction = 'split-words'")
                .replace("[job]\n", "[params]\nn = {}\n[job]\n"),
            "operator `split` (function `split-words`) needs one",
        ),
        (
            manifest("name = 'c'\nbuiltin = 'count'\nkey-by = '/k'")
                .replace("[[source]]", "[component]\npath = 'c.wasm'\n[[source]]"),
            "declares a component",
        ),
    ] {
        error(
            &api,
            multipart("bundle", &pack(&files(text)).unwrap()),
            StatusCode::UNPROCESSABLE_ENTITY,
            "component_missing",
            says,
        )
        .await;
    }
    assert_eq!(files_under(&dir.path().join("blobs")), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_are_listed_canceled_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let (_, body) = call(&api, multipart("bundle", &wordcount_archive())).await;
    let bundle: BundleInfo = serde_json::from_slice(&body).unwrap();

    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a b a\nc a\n".repeat(100)).unwrap();
    let output = dir.path().join("out.jsonl");
    let request = serde_json::json!({
        "bundle": bundle.id, "parallelism": 2,
        "params": {"input": input.to_str().unwrap(), "output": output.to_str().unwrap()},
    });
    let (status, body) = call(&api, json_post("/v1/jobs", request)).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let job: JobInfo = serde_json::from_slice(&body).unwrap();
    let job = wait_for(&api, &job.id, |j| j.state.is_terminal()).await;
    assert_eq!(job.state, JobState::Finished, "{:?}", job.error);
    let count = job.vertices.iter().find(|v| v.name == "count").unwrap();
    assert_eq!((count.parallelism, count.records_in), (2, 500));
    let last_a = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"a\""))
        .count();
    assert_eq!(last_a, 300);
    // Its metrics stay after its end, per vertex and subtask.
    let (status, body) = call(
        &api,
        Request::get(format!("/v1/jobs/{}/metrics", job.id))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let m: weir_coordinator::metrics::JobMetrics = serde_json::from_slice(&body).unwrap();
    let count = m.vertices.iter().find(|v| v.name == "count").unwrap();
    assert_eq!(count.records_in, 500);
    assert_eq!(count.subtasks.len(), 2);
    assert_eq!(
        count.subtasks.iter().map(|s| s.records_in).sum::<u64>(),
        500
    );
    assert!(count.bytes_in > 0, "{count:?}");
    // The job's graph, for the dashboard.
    let edges: Vec<(usize, usize, &str)> = job
        .graph
        .edges
        .iter()
        .map(|e| (e.from, e.to, e.partitioning.as_str()))
        .collect();
    assert_eq!(
        edges,
        [(0, 1, "chained"), (1, 2, "hash(value)"), (2, 3, "chained")]
    );

    // An unbounded job: it runs until canceled.
    let unbounded = wordcount_archive_with(|m| {
        m.replace(
            "type = \"text-file\"\npath = \"${input}\"",
            "type = \"generator\"\npattern = \"words\"\nrate = \"2000\"",
        )
    });
    let (status, body) = call(&api, multipart("bundle", &unbounded)).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let generator: BundleInfo = serde_json::from_slice(&body).unwrap();
    let request = serde_json::json!({"bundle": generator.id, "params": {"output": "/dev/null"}});
    let (_, body) = call(&api, json_post("/v1/jobs", request)).await;
    let endless: JobInfo = serde_json::from_slice(&body).unwrap();
    wait_for(&api, &endless.id, |j| {
        j.vertices
            .iter()
            .any(|v| v.name == "count" && v.records_in > 0)
    })
    .await;
    // A bundle that a job which has not ended uses cannot be deleted.
    error(
        &api,
        Request::delete(format!("/v1/bundles/{}", generator.id))
            .body(Body::empty())
            .unwrap(),
        StatusCode::CONFLICT,
        "bundle_in_use",
        &format!("used by job `{}`, which is running", endless.id),
    )
    .await;
    let (status, _) = call(
        &api,
        json_post(
            &format!("/v1/jobs/{}/cancel", endless.id),
            serde_json::json!({}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let canceled = wait_for(&api, &endless.id, |j| j.state.is_terminal()).await;
    assert_eq!(canceled.state, JobState::Canceled);
    error(
        &api,
        json_post(
            &format!("/v1/jobs/{}/cancel", endless.id),
            serde_json::json!({}),
        ),
        StatusCode::CONFLICT,
        "job_not_running",
        "Canceled",
    )
    .await;

    // A third job is still running when the coordinator "restarts" (a new
    // one opens the same data directory).
    let request = serde_json::json!({"bundle": generator.id, "params": {"output": "/dev/null"}});
    let (_, body) = call(&api, json_post("/v1/jobs", request)).await;
    let orphan: JobInfo = serde_json::from_slice(&body).unwrap();
    assert_eq!(orphan.state, JobState::Running);

    // The restarted coordinator lists every job: those that ended as they
    // ended, the running one (without checkpoints or restarts, so it
    // cannot resume) as failed, saying why.
    let restarted = router(dir.path(), 64 << 20);
    wait_for(&restarted, &orphan.id, |j| j.state.is_terminal()).await;
    let (_, body) = call(
        &restarted,
        Request::get("/v1/jobs").body(Body::empty()).unwrap(),
    )
    .await;
    let jobs: Vec<JobInfo> = serde_json::from_slice(&body).unwrap();
    let states: Vec<JobState> = jobs.iter().map(|j| j.state).collect();
    assert_eq!(
        states,
        [JobState::Finished, JobState::Canceled, JobState::Failed]
    );
    assert_eq!(jobs[2].id, orphan.id);
    assert!(
        jobs[2]
            .error
            .as_deref()
            .unwrap()
            .contains("coordinator stopped"),
        "{:?}",
        jobs[2].error
    );
    // Stop the first coordinator's copy of it.
    call(
        &api,
        json_post(
            &format!("/v1/jobs/{}/cancel", orphan.id),
            serde_json::json!({}),
        ),
    )
    .await;
    wait_for(&api, &orphan.id, |j| j.state.is_terminal()).await;
}

fn wordcount_archive_with(edit: impl Fn(&str) -> String) -> Vec<u8> {
    let manifest =
        std::fs::read_to_string(weir_tests::workspace_root().join("examples/wordcount/weir.toml"))
            .unwrap();
    let component = std::fs::read(weir_tests::guest("wordcount")).unwrap();
    let edited = edit(&manifest);
    assert_ne!(edited, manifest, "the edit applies");
    pack(&BundleFiles::single(edited, component)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_job_requests_get_4xx() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let (_, body) = call(&api, multipart("bundle", &wordcount_archive())).await;
    let bundle: BundleInfo = serde_json::from_slice(&body).unwrap();
    let post = |v: serde_json::Value| json_post("/v1/jobs", v);
    error(
        &api,
        post(serde_json::json!({"bundle": "nope"})),
        StatusCode::NOT_FOUND,
        "bundle_not_found",
        "nope",
    )
    .await;
    error(
        &api,
        post(serde_json::json!({"bundle": bundle.id, "parallelism": 0})),
        StatusCode::UNPROCESSABLE_ENTITY,
        "job_invalid",
        "at least 1",
    )
    .await;
    error(
        &api,
        post(serde_json::json!({"bundle": bundle.id, "parallelism": 1000})),
        StatusCode::UNPROCESSABLE_ENTITY,
        "job_invalid",
        "max-parallelism",
    )
    .await;
    error(
        &api,
        post(serde_json::json!({"bundle": bundle.id, "params": {"colour": "red"}})),
        StatusCode::UNPROCESSABLE_ENTITY,
        "job_invalid",
        "unknown parameter `colour`",
    )
    .await;
    error(
        &api,
        post(serde_json::json!({"bundel": bundle.id})),
        StatusCode::BAD_REQUEST,
        "job_request_invalid",
        "bundel",
    )
    .await;
    let not_json = Request::post("/v1/jobs")
        .header("content-type", "application/json")
        .body(Body::from("{"))
        .unwrap();
    error(
        &api,
        not_json,
        StatusCode::BAD_REQUEST,
        "job_request_invalid",
        "",
    )
    .await;
    error(
        &api,
        Request::get("/v1/jobs/nope").body(Body::empty()).unwrap(),
        StatusCode::NOT_FOUND,
        "job_not_found",
        "nope",
    )
    .await;
    error(
        &api,
        json_post("/v1/jobs/nope/cancel", serde_json::json!({})),
        StatusCode::NOT_FOUND,
        "job_not_found",
        "nope",
    )
    .await;
    error(
        &api,
        Request::get("/v1/jobs/nope/metrics")
            .body(Body::empty())
            .unwrap(),
        StatusCode::NOT_FOUND,
        "job_not_found",
        "nope",
    )
    .await;
    let (_, body) = call(&api, Request::get("/v1/jobs").body(Body::empty()).unwrap()).await;
    assert_eq!(serde_json::from_slice::<Vec<JobInfo>>(&body).unwrap(), []);
}

/// The word count's operators are typed (`split-words` reads a `string`):
/// the bundle lists their types, and a job that feeds `split` records of
/// another type is refused when it is submitted, naming both sides and the
/// field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_types_do_not_fit_gets_400_naming_both_operators() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let bundle = upload(&api, &wordcount_archive()).await;
    let split = bundle
        .operators
        .iter()
        .find(|o| o.name == "split-words")
        .unwrap();
    assert_eq!(
        (
            split.input_type.as_ref().map(|t| t.to_string()),
            split.output_type.as_ref().map(|t| t.to_string())
        ),
        (Some("string".into()), Some("string".into()))
    );
    // A bundle whose job can never fit is refused when it is uploaded.
    let numbers = wordcount_archive_with(|m| {
        m.replace(
            "type = \"text-file\"\npath = \"${input}\"",
            "type = \"generator\"\npattern = \"numbers\"\ncount = \"10\"",
        )
    });
    error(
        &api,
        multipart("bundle", &numbers),
        StatusCode::BAD_REQUEST,
        "type_mismatch",
        "operator `split` cannot read what `lines` writes: the record is \
         {id: u64, k: u32, price: u64, ts: i64} upstream and string here",
    )
    .await;
    // One whose parameters decide: refused when it is submitted with them.
    let chosen = wordcount_archive_with(|m| {
        m.replace(
            "type = \"text-file\"\npath = \"${input}\"",
            "type = \"generator\"\npattern = \"${pattern}\"\ncount = \"10\"",
        )
        .replace(
            "[params]\n",
            "[params]\npattern = { default = \"words\" }\n",
        )
    });
    let bundle = upload(&api, &chosen).await;
    error(
        &api,
        json_post(
            "/v1/jobs",
            serde_json::json!({"bundle": bundle.id, "params": {"pattern": "bids"}}),
        ),
        StatusCode::BAD_REQUEST,
        "type_mismatch",
        "operator `split` cannot read what `lines` writes: the record is \
         {key: string, price: u64, ts: i64} upstream and string here",
    )
    .await;
    // A key-by field the typed stream does not have.
    let unkeyed = wordcount_archive_with(|m| m.replace("key-by = \"value\"", "key-by = \"/word\""));
    error(
        &api,
        multipart("bundle", &unkeyed),
        StatusCode::BAD_REQUEST,
        "type_mismatch",
        "key-by = \"/word\" names no field of what `split` writes (string)",
    )
    .await;
    let (_, body) = call(&api, Request::get("/v1/jobs").body(Body::empty()).unwrap()).await;
    assert_eq!(serde_json::from_slice::<Vec<JobInfo>>(&body).unwrap(), []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_keeps_its_exception_with_the_operator_and_the_guest_message() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let manifest = "[job]\nname = 'fails'\n[params]\ninput = {}\n\
        [[source]]\nname = 'lines'\ntype = 'text-file'\npath = '${input}'\n\
        [[operator]]\nname = 'check'\nfunction = 'trap'\n\
        [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '/dev/null'\n";
    let archive = pack(&BundleFiles::single(
        manifest.into(),
        std::fs::read(weir_tests::guest("test-guests")).unwrap(),
    ))
    .unwrap();
    let (status, body) = call(&api, multipart("bundle", &archive)).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let bundle: BundleInfo = serde_json::from_slice(&body).unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "fine\nboom\nfine\n").unwrap();
    let request =
        serde_json::json!({"bundle": bundle.id, "params": {"input": input.to_str().unwrap()}});
    let (_, body) = call(&api, json_post("/v1/jobs", request)).await;
    let job: JobInfo = serde_json::from_slice(&body).unwrap();
    let job = wait_for(&api, &job.id, |j| j.state.is_terminal()).await;
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.exceptions.len(), 1, "{job:?}");
    let message = &job.exceptions[0].message;
    assert!(message.contains("check"), "{message}");
    assert!(message.contains("boom: this record is bad"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_reach_only_granted_files_and_sinks_write_only_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let api = router(&data, 64 << 20);
    let bundle = upload(&api, &wordcount_archive()).await;
    let input = data.join("in.txt");
    std::fs::write(&input, "a b a\n").unwrap();
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, data.join("link.txt")).unwrap();
    let submit = |input: &str, output: &str| {
        json_post(
            "/v1/jobs",
            serde_json::json!({"bundle": bundle.id, "params": {"input": input, "output": output}}),
        )
    };
    let (i, out) = (
        input.to_str().unwrap(),
        data.join("out.jsonl").to_str().unwrap().to_owned(),
    );
    let granted = data.canonicalize().unwrap().display().to_string();
    // A FIFO inside the granted directory: granted, and still not a file.
    let fifo = data.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Outside the granted directory, through `..`, through a link, a
    // device; inside it, a FIFO.
    for (input, output, needle) in [
        (
            fifo.to_str().unwrap(),
            out.as_str(),
            "is not a regular file",
        ),
        ("/etc/passwd", out.as_str(), "\"/etc/passwd\" is outside"),
        (outside.to_str().unwrap(), out.as_str(), "is outside"),
        (
            &format!("{}/../outside.txt", data.display()),
            out.as_str(),
            "`..`",
        ),
        (
            data.join("link.txt").to_str().unwrap(),
            out.as_str(),
            "links followed",
        ),
        ("/dev/zero", out.as_str(), "outside"),
        (i, "/etc/weir-test-output", "sink `counts`"),
    ] {
        error(
            &api,
            submit(input, output),
            StatusCode::UNPROCESSABLE_ENTITY,
            "path_not_allowed",
            needle,
        )
        .await;
        let (_, body) = call(&api, Request::get("/v1/jobs").body(Body::empty()).unwrap()).await;
        assert_eq!(serde_json::from_slice::<Vec<JobInfo>>(&body).unwrap(), []);
    }
    let (_, body) = call(&api, submit("/etc/passwd", &out)).await;
    let e: ErrorBody = serde_json::from_slice(&body).unwrap();
    assert!(e.message.contains(&granted), "{}", e.message);
    assert!(!std::path::Path::new("/etc/weir-test-output").exists());

    // The first run makes its output; a second run to it is refused.
    let job: JobInfo = created(&api, submit(i, &out)).await;
    let job = wait_for(&api, &job.id, |j| j.state.is_terminal()).await;
    assert_eq!(job.state, JobState::Finished, "{:?}", job.error);
    let first = std::fs::read_to_string(&out).unwrap();
    assert_eq!(first.lines().count(), 3, "{first}");
    error(
        &api,
        submit(i, &out),
        StatusCode::CONFLICT,
        "sink_exists",
        "overwrite",
    )
    .await;
    assert_eq!(std::fs::read_to_string(&out).unwrap(), first);
    // A file someone else made is not appended to either.
    let theirs = data.join("theirs.jsonl");
    std::fs::write(&theirs, "keep me\n").unwrap();
    error(
        &api,
        submit(i, theirs.to_str().unwrap()),
        StatusCode::CONFLICT,
        "sink_exists",
        "exists already",
    )
    .await;
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "keep me\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_may_overwrite_replaces_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let archive = wordcount_archive_with(|m| {
        m.replace(
            "path = \"${output}\"",
            "path = \"${output}\"\nmode = \"overwrite\"",
        )
    });
    let bundle = upload(&api, &archive).await;
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a b a\n").unwrap();
    let output = dir.path().join("out.jsonl");
    std::fs::write(&output, "old\n".repeat(100)).unwrap();
    // `parallelism` may be any whole JSON number.
    let request = serde_json::json!({
        "bundle": bundle.id, "parallelism": 2.0,
        "params": {"input": input.to_str().unwrap(), "output": output.to_str().unwrap()},
    });
    let job: JobInfo = created(&api, json_post("/v1/jobs", request)).await;
    assert_eq!(job.parallelism, Some(2));
    let job = wait_for(&api, &job.id, |j| j.state.is_terminal()).await;
    assert_eq!(job.state, JobState::Finished, "{:?}", job.error);
    let text = std::fs::read_to_string(&output).unwrap();
    assert!(!text.contains("old"), "{text}");
    assert_eq!(text.lines().count(), 3, "{text}");
    // A parallelism beyond any max parallelism, and one that is not whole.
    for (p, status, code) in [
        (
            serde_json::json!(41073.0),
            StatusCode::UNPROCESSABLE_ENTITY,
            "job_invalid",
        ),
        (
            serde_json::json!(1e30),
            StatusCode::UNPROCESSABLE_ENTITY,
            "job_invalid",
        ),
        (
            serde_json::json!(1.5),
            StatusCode::BAD_REQUEST,
            "job_request_invalid",
        ),
    ] {
        let request = serde_json::json!({"bundle": bundle.id, "parallelism": p});
        error(&api, json_post("/v1/jobs", request), status, code, "").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_json_even_those_no_endpoint_makes() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 1024);
    let big = serde_json::json!({"bundle": "x".repeat(4096)});
    for (request, status, code, needle) in [
        (
            Request::put("/v1/jobs").body(Body::empty()).unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "method",
        ),
        (
            Request::delete("/v1/cluster").body(Body::empty()).unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "",
        ),
        (
            json_post("/v1/jobs", big),
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            "1024 bytes",
        ),
        (
            Request::get("/v1/nothing").body(Body::empty()).unwrap(),
            StatusCode::NOT_FOUND,
            "not_found",
            "",
        ),
        (
            Request::get(format!("/v1/jobs/{}", "x".repeat(9000)))
                .body(Body::empty())
                .unwrap(),
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            "the limit is 8192",
        ),
    ] {
        error(&api, request, status, code, needle).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_decide_who_may_look_and_who_may_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut tokens = Tokens::open();
    tokens.add("admin-token-0123456789", Role::Admin).unwrap();
    tokens.add("read-token-0123456789", Role::Read).unwrap();
    let api = router_with(dir.path(), 64 << 20, tokens);
    let with = |request: axum::http::request::Builder, token: Option<&str>| match token {
        Some(t) => request.header("authorization", format!("Bearer {t}")),
        None => request,
    };
    let upload = |token: Option<&str>| {
        let mut r = multipart("bundle", &wordcount_archive());
        if let Some(t) = token {
            r.headers_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        r
    };

    // No token, or a wrong one: 401 in the JSON shape, with the scheme.
    for token in [None, Some("not-a-token-at-all-000")] {
        let request = with(Request::get("/v1/jobs"), token)
            .body(Body::empty())
            .unwrap();
        let response = api.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        error(
            &api,
            upload(token),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "token",
        )
        .await;
    }
    // A read token looks but does not change.
    let (status, _) = call(
        &api,
        with(Request::get("/v1/jobs"), Some("read-token-0123456789"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    error(
        &api,
        upload(Some("read-token-0123456789")),
        StatusCode::FORBIDDEN,
        "forbidden",
        "admin token",
    )
    .await;
    // An admin token does both.
    let bundle: BundleInfo = created(&api, upload(Some("admin-token-0123456789"))).await;
    error(
        &api,
        with(
            Request::delete(format!("/v1/bundles/{}", bundle.id)),
            Some("read-token-0123456789"),
        )
        .body(Body::empty())
        .unwrap(),
        StatusCode::FORBIDDEN,
        "forbidden",
        "",
    )
    .await;
    let (status, _) = call(
        &api,
        with(
            Request::delete(format!("/v1/bundles/{}", bundle.id)),
            Some("admin-token-0123456789"),
        )
        .body(Body::empty())
        .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // The dashboard's page and the API's description are public.
    for path in ["/", "/ui/app.js", "/v1/openapi.json"] {
        let (status, _) = call(&api, Request::get(path).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sites_page_cannot_change_anything_even_on_an_open_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let bundle = upload(&api, &wordcount_archive()).await;
    // A form posted from another site: an upload, a delete.
    let mut form = multipart("bundle", &wordcount_archive());
    form.headers_mut()
        .insert("origin", "http://evil.example".parse().unwrap());
    form.headers_mut()
        .insert("host", "127.0.0.1:8081".parse().unwrap());
    error(
        &api,
        form,
        StatusCode::FORBIDDEN,
        "cross_origin",
        "another site",
    )
    .await;
    error(
        &api,
        Request::delete(format!("/v1/bundles/{}", bundle.id))
            .header("host", "127.0.0.1:8081")
            .header("sec-fetch-site", "cross-site")
            .body(Body::empty())
            .unwrap(),
        StatusCode::FORBIDDEN,
        "cross_origin",
        "",
    )
    .await;
    // A page whose own domain was pointed at this machine (DNS
    // rebinding) is same-origin to the browser, but names its domain:
    // refused, for reading as well as for changes.
    for request in [
        Request::delete(format!("/v1/bundles/{}", bundle.id))
            .header("host", "x.example:8081")
            .header("origin", "http://x.example:8081")
            .body(Body::empty())
            .unwrap(),
        Request::get("/v1/jobs")
            .header("host", "x.example")
            .body(Body::empty())
            .unwrap(),
        Request::get("/")
            .header("host", "x.example")
            .body(Body::empty())
            .unwrap(),
    ] {
        error(
            &api,
            request,
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            "does not serve the host `x.example",
        )
        .await;
    }
    // This server's own page may.
    let (status, _) = call(
        &api,
        Request::delete(format!("/v1/bundles/{}", bundle.id))
            .header("host", "127.0.0.1:8081")
            .header("origin", "http://127.0.0.1:8081")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // No CORS headers: other sites cannot read the API either.
    let response = api
        .clone()
        .oneshot(
            Request::get("/v1/jobs")
                .header("origin", "http://evil.example")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(
        response
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

/// A sink's output belongs to one job: a second job naming the file of a
/// running one is refused naming the owner, even with `mode =
/// "overwrite"`, which hands the file over only once the owner has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sinks_file_belongs_to_one_job_until_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let api = router(dir.path(), 64 << 20);
    let endless = |overwrite: bool| {
        wordcount_archive_with(|m| {
            let m = m.replace(
                "type = \"text-file\"\npath = \"${input}\"",
                "type = \"generator\"\npattern = \"words\"\nrate = \"500\"",
            );
            if overwrite {
                m.replace(
                    "path = \"${output}\"",
                    "path = \"${output}\"\nmode = \"overwrite\"",
                )
            } else {
                m
            }
        })
    };
    let plain = upload(&api, &endless(false)).await;
    let overwriting = upload(&api, &endless(true)).await;
    let output = dir.path().join("out.jsonl");
    let submit = |bundle: &str| {
        json_post(
            "/v1/jobs",
            serde_json::json!({"bundle": bundle, "params": {"output": output.to_str().unwrap()}}),
        )
    };
    let owner: JobInfo = created(&api, submit(&plain.id)).await;
    let claim = dir.path().join(".out.jsonl.owner");
    assert_eq!(std::fs::read_to_string(&claim).unwrap(), owner.id);
    for bundle in [&plain.id, &overwriting.id] {
        error(
            &api,
            submit(bundle),
            StatusCode::CONFLICT,
            "sink_exists",
            &format!("belongs to job {}, which has not ended", owner.id),
        )
        .await;
    }
    call(
        &api,
        json_post(
            &format!("/v1/jobs/{}/cancel", owner.id),
            serde_json::json!({}),
        ),
    )
    .await;
    wait_for(&api, &owner.id, |j| j.state.is_terminal()).await;
    // Ended: still its own unless handed over.
    error(
        &api,
        submit(&plain.id),
        StatusCode::CONFLICT,
        "sink_exists",
        "which has ended",
    )
    .await;
    let next: JobInfo = created(&api, submit(&overwriting.id)).await;
    assert_eq!(std::fs::read_to_string(&claim).unwrap(), next.id);
    call(
        &api,
        json_post(
            &format!("/v1/jobs/{}/cancel", next.id),
            serde_json::json!({}),
        ),
    )
    .await;
    wait_for(&api, &next.id, |j| j.state.is_terminal()).await;
}
