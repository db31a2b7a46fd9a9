//! The REST API. Every error is JSON: `{"code": "...", "message": "..."}`
//! with a 4xx status for the caller's mistakes and 5xx for the
//! coordinator's. The OpenAPI document is served at `/v1/openapi.json`.

use std::sync::Arc;

use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use axum::extract::rejection::JsonRejection;
use axum::routing::post;

use crate::bundles::{BundleInfo, BundleStore};
use crate::error::{CoordinatorError, ErrorBody, ErrorKind};
use crate::jobs::{JobInfo, JobRequest, Jobs, SavepointRequest, UpgradeRequest};
use crate::metrics::{JobMetrics, gauge, job_families, prometheus_text};
use crate::savepoint::triggers::SavepointStatus;
use crate::slot_manager::{ClusterInfo, SlotManager};

/// The HTTP status of an error of `kind`: the one place the coordinator's
/// errors become HTTP.
fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::Invalid => StatusCode::BAD_REQUEST,
        ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for CoordinatorError {
    fn into_response(self) -> Response {
        http_error(status_of(self.kind), self.code, self.message)
    }
}

/// An error answer: `status`, with `{"code", "message"}`.
fn http_error(status: StatusCode, code: &str, message: String) -> Response {
    if status.is_server_error() {
        tracing::error!(code, "{message}");
    }
    (
        status,
        Json(ErrorBody {
            code: code.to_owned(),
            message,
        }),
    )
        .into_response()
}

/// The default limit of an upload's size.
pub const DEFAULT_MAX_UPLOAD: usize = 64 << 20;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The bundles.
    pub bundles: Arc<BundleStore>,
    /// The jobs.
    pub jobs: Arc<Jobs>,
    /// The workers and their slots.
    pub slots: Arc<SlotManager>,
    /// The largest request body accepted, in bytes.
    pub max_upload: usize,
    /// Who may call it (open: anyone who reaches it).
    pub tokens: Arc<crate::auth::Tokens>,
    /// The host names it answers to, besides IP addresses and localhost.
    pub hosts: Arc<crate::auth::AllowedHosts>,
}

/// The API's router.
pub fn app(state: AppState) -> Router {
    let limit = state.max_upload;
    Router::new()
        .route("/v1/bundles", get(list_bundles).post(upload_bundle))
        .route("/v1/bundles/{id}", get(get_bundle).delete(delete_bundle))
        .route("/v1/jobs", get(list_jobs).post(submit_job))
        .route("/v1/jobs/{id}", get(get_job))
        .route("/v1/jobs/{id}/cancel", post(cancel_job))
        .route("/v1/jobs/{id}/stop", post(stop_job))
        .route("/v1/jobs/{id}/rescaling", axum::routing::patch(rescale_job))
        .route("/v1/jobs/{id}/upgrade", post(upgrade_job))
        .route(
            "/v1/jobs/{id}/savepoints",
            get(list_savepoints).post(trigger_savepoint),
        )
        .route(
            "/v1/jobs/{id}/savepoints/{trigger}",
            get(savepoint_status).delete(delete_savepoint),
        )
        .route("/v1/jobs/{id}/metrics", get(job_metrics))
        .route("/v1/jobs/{id}/checkpoints", get(job_checkpoints))
        .route(
            "/v1/jobs/{id}/checkpoints/latest/state",
            get(latest_checkpoint_state),
        )
        .route("/v1/cluster", get(cluster))
        .route("/v1/openapi.json", get(openapi))
        .route("/metrics", get(prometheus_metrics))
        .merge(crate::dashboard::routes())
        .fallback(|| async {
            CoordinatorError::not_found("not_found", "no such endpoint: see /v1/openapi.json")
        })
        .method_not_allowed_fallback(|| async {
            http_error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this endpoint does not take that method: see /v1/openapi.json".into(),
            )
        })
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            state.tokens.clone(),
            crate::auth::authorize,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.hosts.clone(),
            crate::auth::check_host,
        ))
        .layer(axum::middleware::map_response(errors_as_json))
        .layer(axum::middleware::from_fn(refuse_long_uris))
        .with_state(state)
}

/// The longest request URI (path and query) the API reads.
pub const MAX_URI_BYTES: usize = 8 << 10;

/// A URI longer than [`MAX_URI_BYTES`] is refused before anything else
/// looks at it, in the documented shape (the HTTP server itself refuses
/// ones beyond 64 KiB, with an empty `414`).
async fn refuse_long_uris(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let len = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if len > MAX_URI_BYTES {
        return http_error(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("the request's URI is {len} bytes; the limit is {MAX_URI_BYTES}"),
        );
    }
    next.run(request).await
}

/// Every error answer in the documented shape: an error that a layer or an
/// extractor made as plain text (a body over the limit, a path that is not
/// UTF-8) becomes `{"code", "message"}` with its status and text kept.
async fn errors_as_json(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let code = match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
        StatusCode::URI_TOO_LONG => "uri_too_long",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        s if s.is_server_error() => "internal",
        _ => "request_invalid",
    };
    let text = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("the request failed")
            .to_owned()
    } else {
        text
    };
    http_error(status, code, message)
}

async fn upload_bundle(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<(StatusCode, Json<BundleInfo>), CoordinatorError> {
    let mut multipart = multipart.map_err(|e| {
        CoordinatorError::invalid(
            "upload_not_multipart",
            format!("send the archive as multipart/form-data, field `bundle`: {e}"),
        )
    })?;
    let too_large = |e: axum::extract::multipart::MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            CoordinatorError::new(
                ErrorKind::TooLarge,
                "upload_too_large",
                format!(
                    "the upload is larger than the limit of {} bytes",
                    state.max_upload
                ),
            )
        } else {
            CoordinatorError::invalid("upload_invalid", format!("reading the upload: {e}"))
        }
    };
    while let Some(field) = multipart.next_field().await.map_err(too_large)? {
        if field.name() == Some("bundle") {
            let bytes = field.bytes().await.map_err(too_large)?;
            let info = state.bundles.upload(bytes.to_vec()).await?;
            return Ok((StatusCode::CREATED, Json(info)));
        }
    }
    Err(CoordinatorError::invalid(
        "upload_missing_bundle",
        "the upload has no field named `bundle`",
    ))
}

async fn list_bundles(State(state): State<AppState>) -> Json<Vec<BundleInfo>> {
    Json(state.bundles.list().await)
}

async fn get_bundle(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<BundleInfo>, CoordinatorError> {
    Ok(Json(state.bundles.get(&id).await?))
}

async fn delete_bundle(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, CoordinatorError> {
    if let Some((job, job_state)) = state.jobs.using_bundle(&id).await {
        return Err(CoordinatorError::conflict(
            "bundle_in_use",
            format!(
                "bundle `{id}` is used by job `{job}`, which is {}: cancel it (or wait for its end) first",
                crate::job_state::state_name(job_state)
            ),
        ));
    }
    state.bundles.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn submit_job(
    State(state): State<AppState>,
    request: Result<Json<JobRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<JobInfo>), CoordinatorError> {
    let Json(request) = request.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            CoordinatorError::new(
                ErrorKind::TooLarge,
                "request_too_large",
                format!(
                    "the request is larger than the limit of {} bytes",
                    state.max_upload
                ),
            )
        } else {
            CoordinatorError::invalid("job_request_invalid", e.body_text())
        }
    })?;
    if request.parallelism == Some(0) {
        return Err(CoordinatorError::unprocessable(
            "job_invalid",
            "parallelism must be at least 1",
        ));
    }
    Ok((StatusCode::CREATED, Json(state.jobs.submit(request).await?)))
}

async fn job_checkpoints(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<crate::checkpoint::CheckpointStats>, CoordinatorError> {
    Ok(Json(state.jobs.checkpoints(&id).await?))
}

/// `?operator=NAME&state=NAME` of a state read.
#[derive(Debug, serde::Deserialize)]
struct StateParams {
    operator: Option<String>,
    state: Option<String>,
}

async fn latest_checkpoint_state(
    State(state): State<AppState>,
    Path(id): Path<String>,
    q: Result<axum::extract::Query<StateParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, CoordinatorError> {
    let axum::extract::Query(q) =
        q.map_err(|e| CoordinatorError::invalid("query_invalid", e.body_text()))?;
    let query = crate::checkpoint::inspect::StateQuery {
        operator: q.operator,
        state: q.state,
    };
    let lines = state.jobs.latest_state(&id, &query).await?;
    // Streamed from the spooled file, a chunk at a time.
    let chunks = tokio_util::io::ReaderStream::with_capacity(
        tokio::fs::File::from_std(lines.file),
        64 << 10,
    );
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/x-ndjson")],
        axum::body::Body::from_stream(chunks),
    )
        .into_response())
}

async fn job_metrics(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<JobMetrics>, CoordinatorError> {
    Ok(Json(state.jobs.metrics(&id).await?))
}

/// Prometheus text: every running job's subtasks, the cluster's workers
/// and slots, and the jobs per state.
async fn prometheus_metrics(
    State(state): State<AppState>,
) -> Result<([(axum::http::HeaderName, &'static str); 1], String), CoordinatorError> {
    let internal = |e: prometheus::Error| CoordinatorError::internal(e.to_string());
    let mut families = job_families(&state.jobs.running_metrics().await).map_err(internal)?;
    families.extend(
        crate::metrics::checkpoint_families(&state.jobs.fault_tolerance().await)
            .map_err(internal)?,
    );
    let c = state.slots.cluster().await;
    families.push(
        gauge(
            "weir_workers",
            "Workers registered.",
            c.workers.len() as f64,
        )
        .map_err(internal)?,
    );
    families.push(
        gauge(
            "weir_slots",
            "Task slots of all workers.",
            c.slots_total as f64,
        )
        .map_err(internal)?,
    );
    families
        .push(gauge("weir_slots_free", "Task slots free.", c.slots_free as f64).map_err(internal)?);
    let jobs = prometheus::IntGaugeVec::new(
        prometheus::Opts::new("weir_jobs", "Jobs per state."),
        &["state"],
    )
    .map_err(internal)?;
    for (s, n) in state.jobs.states().await {
        jobs.with_label_values(&[crate::jobs::state_name(s)])
            .set(n as i64);
    }
    let registry = prometheus::Registry::new();
    registry.register(Box::new(jobs)).map_err(internal)?;
    families.extend(registry.gather());
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        prometheus_text(families),
    ))
}

async fn cluster(State(state): State<AppState>) -> Json<ClusterInfo> {
    Json(state.slots.cluster().await)
}

async fn list_jobs(State(state): State<AppState>) -> Json<Vec<JobInfo>> {
    Json(state.jobs.list().await)
}

async fn get_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<JobInfo>, CoordinatorError> {
    Ok(Json(state.jobs.get(&id).await?))
}

async fn cancel_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<JobInfo>, CoordinatorError> {
    Ok(Json(state.jobs.cancel(&id).await?))
}

/// A savepoint request's body: empty, or JSON.
fn savepoint_request(body: &[u8]) -> Result<SavepointRequest, CoordinatorError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(SavepointRequest::default());
    }
    serde_json::from_slice(body)
        .map_err(|e| CoordinatorError::invalid("savepoint_request_invalid", e.to_string()))
}

async fn trigger_savepoint(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<SavepointStatus>), CoordinatorError> {
    let request = savepoint_request(&body)?;
    let status = state.jobs.trigger_savepoint(&id, request, false).await?;
    Ok((StatusCode::ACCEPTED, Json(status)))
}

async fn stop_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<SavepointStatus>), CoordinatorError> {
    let request = savepoint_request(&body)?;
    let status = state.jobs.trigger_savepoint(&id, request, true).await?;
    Ok((StatusCode::ACCEPTED, Json(status)))
}

/// `?parallelism=N` of a rescaling.
#[derive(serde::Deserialize)]
struct Rescaling {
    parallelism: u32,
}

async fn rescale_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<axum::extract::Query<Rescaling>, axum::extract::rejection::QueryRejection>,
) -> Result<(StatusCode, Json<SavepointStatus>), CoordinatorError> {
    let axum::extract::Query(q) = query.map_err(|e| {
        CoordinatorError::invalid(
            "rescaling_invalid",
            format!(
                "give the new parallelism as `?parallelism=N`: {}",
                e.body_text()
            ),
        )
    })?;
    let status = state.jobs.rescale(&id, q.parallelism).await?;
    Ok((StatusCode::ACCEPTED, Json(status)))
}

async fn upgrade_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
    request: Result<Json<UpgradeRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<SavepointStatus>), CoordinatorError> {
    let Json(request) =
        request.map_err(|e| CoordinatorError::invalid("upgrade_request_invalid", e.body_text()))?;
    let status = state.jobs.upgrade(&id, request).await?;
    Ok((StatusCode::ACCEPTED, Json(status)))
}

async fn list_savepoints(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<SavepointStatus>>, CoordinatorError> {
    Ok(Json(state.jobs.savepoints(&id).await?))
}

async fn savepoint_status(
    State(state): State<AppState>,
    Path((id, trigger)): Path<(String, String)>,
) -> Result<Json<SavepointStatus>, CoordinatorError> {
    Ok(Json(state.jobs.savepoint_status(&id, &trigger).await?))
}

async fn delete_savepoint(
    State(state): State<AppState>,
    Path((id, trigger)): Path<(String, String)>,
) -> Result<Json<SavepointStatus>, CoordinatorError> {
    Ok(Json(state.jobs.delete_savepoint(&id, &trigger).await?))
}

/// The OpenAPI 3.1 document of the API.
pub fn openapi_document() -> serde_json::Value {
    let error = json!({"$ref": "#/components/schemas/Error"});
    let bundle = json!({"$ref": "#/components/schemas/Bundle"});
    let job = json!({"$ref": "#/components/schemas/Job"});
    let id_param =
        json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]);
    let err = |what: &str| json!({"description": what, "content": {"application/json": {"schema": error}}});
    let checkpoints = checkpoints_path(&id_param, err("No such job"));
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {"title": "Weir coordinator", "version": env!("CARGO_PKG_VERSION")},
        "paths": {
            "/v1/bundles": {
                "get": {
                    "summary": "List the uploaded bundles, oldest first",
                    "responses": {"200": {"description": "The bundles", "content": {"application/json": {"schema": {"type": "array", "items": bundle}}}}}
                },
                "post": {
                    "summary": "Upload a bundle archive (weir build makes one)",
                    "requestBody": {"required": true, "content": {"multipart/form-data": {"schema": {
                        "type": "object", "required": ["bundle"],
                        "properties": {"bundle": {"type": "string", "format": "binary"}}
                    }}}},
                    "responses": {
                        "201": {"description": "Stored (or already stored)", "content": {"application/json": {"schema": bundle}}},
                        "400": err("Not multipart, no `bundle` field, not an archive, or unsafe paths in it"),
                        "413": err("Larger than the upload limit, or unpacks to more than the limit"),
                        "422": err("The manifest or the component cannot be used; the message says why")
                    }
                }
            },
            "/v1/bundles/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "get": {"summary": "One bundle", "responses": {"200": {"description": "The bundle", "content": {"application/json": {"schema": bundle}}}, "404": err("No such bundle")}},
                "delete": {"summary": "Remove a bundle", "responses": {"204": {"description": "Removed"}, "404": err("No such bundle"), "409": err("A job that has not ended uses the bundle")}}
            },
            "/v1/jobs": {
                "get": {"summary": "List the jobs, oldest first", "responses": {"200": {"description": "The jobs", "content": {"application/json": {"schema": {"type": "array", "items": job}}}}}},
                "post": {
                    "summary": "Submit a job: a bundle, a parallelism and parameters",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {
                        "type": "object", "required": ["bundle"], "additionalProperties": false,
                        "properties": {
                            "bundle": {"type": "string", "description": "A bundle id"},
                            "parallelism": {"type": "integer", "minimum": 1},
                            "params": {"type": "object", "additionalProperties": {"type": "string"}},
                            "from_savepoint": {"type": "string", "description": "A savepoint's directory on the coordinator's machine, or a retained checkpoint's (`<data-dir>/checkpoints/<job>/chk-<id>`): the job starts with its state (matched by vertex name), at any parallelism"},
                            "allow_non_restored_state": {"type": "boolean", "description": "Drop the savepoint's state that no vertex of this job claims"}
                        }
                    }}}},
                    "responses": {
                        "201": {"description": "Started", "content": {"application/json": {"schema": job}}},
                        "400": err("Not a JSON job request"),
                        "404": err("No such bundle"),
                        "409": err("A file sink's file is there already (sink_exists), or the job whose savepoint it starts from has not stopped"),
                        "413": err("The request is larger than the limit"),
                        "422": err("The job cannot run: parallelism, a missing or unknown parameter, a path outside the granted directories, …")
                    }
                }
            },
            "/v1/jobs/{id}": {"parameters": id_param, "get": {"summary": "One job, with live counts", "responses": {"200": {"description": "The job", "content": {"application/json": {"schema": job}}}, "404": err("No such job")}}},
            "/v1/jobs/{id}/cancel": {"parameters": id_param, "post": {"summary": "Cancel a running job", "responses": {"200": {"description": "Canceling", "content": {"application/json": {"schema": job}}}, "404": err("No such job"), "409": err("The job is not running")}}},
            "/v1/jobs/{id}/metrics": {"parameters": id_param, "get": {"summary": "A job's metrics: per vertex and subtask counts, bytes, rates, busy/idle/backpressured ms per second, watermarks, state size, Wasm memory, guest time, dead letters and skipped records; five minutes of history", "responses": {"200": {"description": "The metrics", "content": {"application/json": {"schema": {"type": "object", "properties": {
                "job": {"type": "string"}, "at_ms": {"type": "integer"},
                "vertices": {"type": "array", "items": {"type": "object"}},
                "history": {"type": "array", "items": {"type": "object", "properties": {"at_ms": {"type": "integer"}, "vertices": {"type": "array", "items": {"type": "object"}}}}}
            }}}}}, "404": err("No such job")}}},
            "/v1/jobs/{id}/checkpoints": checkpoints,
            "/v1/jobs/{id}/checkpoints/latest/state": {"parameters": id_param, "get": {
                "summary": "The keyed state of a job's latest completed checkpoint (a running job's, or the newest an ended job retained), as JSON lines (one per entry and timer, as `weir state` prints a savepoint's)",
                "parameters": [
                    {"name": "operator", "in": "query", "required": false, "schema": {"type": "string"}},
                    {"name": "state", "in": "query", "required": false, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {"description": "JSON lines", "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
                    "400": err("A malformed query"),
                    "404": err("No such job, operator or state"),
                    "409": err("The job is not running, takes no checkpoints or has completed none yet")
                }}},
            "/metrics": {"get": {"summary": "Prometheus text: running jobs' subtasks, workers, slots, jobs per state", "responses": {"200": {"description": "Prometheus text format 0.0.4", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/v1/cluster": {"get": {"summary": "Workers, their slots (free and used) and last heartbeats", "responses": {"200": {"description": "The cluster", "content": {"application/json": {"schema": {"type": "object", "properties": {
                "workers": {"type": "array", "items": {"type": "object", "properties": {
                    "id": {"type": "string"}, "hostname": {"type": "string"}, "data_address": {"type": "string"},
                    "slots": {"type": "integer"}, "free_slots": {"type": "integer"},
                    "last_heartbeat_ms_ago": {"type": "integer"}, "registered_ms_ago": {"type": "integer"}
                }}},
                "slots_total": {"type": "integer"}, "slots_free": {"type": "integer"}
            }}}}}}}},
            "/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3.1"}}}}
        },
        "components": {"schemas": {
            "Error": {"type": "object", "required": ["code", "message"], "properties": {
                "code": {"type": "string", "description": "Stable, machine-readable"},
                "message": {"type": "string", "description": "For people"}
            }},
            "Job": {"type": "object", "properties": {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "bundle": {"type": "string"},
                "state": {"type": "string", "enum": ["created", "running", "restarting", "recovering", "finished", "failed", "canceling", "canceled", "unreadable"]},
                "error": {"type": ["string", "null"]},
                "params": {"type": "object", "additionalProperties": {"type": "string"}},
                "vertices": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "parallelism": {"type": "integer"},
                    "records_in": {"type": "integer"}, "records_out": {"type": "integer"}
                }}},
                "subtasks": {"type": "array", "items": {"type": "object", "properties": {
                    "vertex": {"type": "string"}, "subtask": {"type": "integer"},
                    "worker": {"type": ["string", "null"]}, "slot": {"type": ["integer", "null"]},
                    "state": {"type": "string", "enum": ["created", "scheduled", "deploying", "running", "finished", "failed", "canceled"]},
                    "records_in": {"type": "integer"},
                    "records_out": {"type": "integer"}
                }}},
                "submitted_at_ms": {"type": "integer"},
                "ended_at_ms": {"type": ["integer", "null"]}
            }},
            "Bundle": {"type": "object", "properties": {
                "id": {"type": "string", "description": "sha256 of the archive"},
                "name": {"type": "string"},
                "size": {"type": "integer"},
                "component_sha256": {"type": "string", "description": "sha256 of the component (of the first, by name, of several; empty for a bundle of built-in operators only)"},
                "components": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "sha256": {"type": "string"}}}},
                "operators": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "kind": {"type": "string", "enum": ["map", "flat-map", "filter", "keyed-process", "timestamp-assigner", "window", "window-process"]}, "component": {"type": "string"}}}},
                "params": {"type": "object", "additionalProperties": {"type": "object", "properties": {"default": {"type": ["string", "null"]}, "doc": {"type": ["string", "null"]}}}},
                "uploaded_at_ms": {"type": "integer"}
            }}
        }, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}
    });
    savepoint_paths(&mut document, &id_param, &err);
    with_auth_answers(&mut document, &err);
    document
}

/// The savepoint paths of the OpenAPI document.
fn savepoint_paths(
    document: &mut serde_json::Value,
    id_param: &serde_json::Value,
    err: &dyn Fn(&str) -> serde_json::Value,
) {
    let savepoint = json!({"type": "object", "required": ["trigger_id", "job", "status"], "properties": {
        "trigger_id": {"type": "string"}, "job": {"type": "string"},
        "status": {"type": "string", "enum": ["in_progress", "completed", "failed"]},
        "stop": {"type": "boolean"},
        "location": {"type": "string", "description": "Its directory, once written"},
        "checkpoint": {"type": "integer"}, "size_bytes": {"type": "integer"},
        "error": {"type": "string"},
        "triggered_at_ms": {"type": "integer"}, "ended_at_ms": {"type": "integer"},
        "parallelism": {"type": "integer", "description": "A rescale's new parallelism"},
        "resumed_as": {"type": "string", "description": "The job a rescale started from it"},
        "deleted": {"type": "boolean"}
    }});
    let savepoint_request = json!({"type": "object", "additionalProperties": false, "properties": {
        "directory": {"type": "string", "description": "An absolute directory on the coordinator's machine (default: under its data directory)"},
        "trigger_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "description": "The client's id for the trigger: a retry with it takes no second savepoint"},
        "drain": {"type": "boolean", "description": "Stop only: the maximal watermark first, so that every event-time window fires"}
    }});
    let paths = &mut document["paths"];
    paths["/v1/jobs/{id}/savepoints"] = json!({
        "parameters": id_param,
        "get": {"summary": "The savepoints triggered of a job since the coordinator started, oldest first", "responses": {"200": {"description": "Their statuses", "content": {"application/json": {"schema": {"type": "array", "items": savepoint}}}}, "404": err("No such job")}},
        "post": {
            "summary": "Trigger a savepoint (asynchronous: its trigger id at once; poll its status)",
            "requestBody": {"required": false, "content": {"application/json": {"schema": savepoint_request}}},
            "responses": {
                "202": {"description": "Triggered (or, for a trigger id given before, its status)", "content": {"application/json": {"schema": savepoint}}},
                "400": err("Not a savepoint request, or a bad trigger id"),
                "404": err("No such job"),
                "409": err("The job is not running, takes no checkpoints, or the directory holds a savepoint"),
                "422": err("The directory is not absolute, or outside the granted directories; drain without a stop")
            }
        }
    });
    paths["/v1/jobs/{id}/savepoints/{trigger}"] = json!({
        "parameters": [
            {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
            {"name": "trigger", "in": "path", "required": true, "schema": {"type": "string"}}
        ],
        "get": {"summary": "A savepoint's status and location", "responses": {"200": {"description": "Its status", "content": {"application/json": {"schema": savepoint}}}, "404": err("No such job or trigger")}},
        "delete": {"summary": "Delete a written savepoint (its directory)", "responses": {"200": {"description": "Deleted", "content": {"application/json": {"schema": savepoint}}}, "404": err("No such job or trigger, or nothing written"), "409": err("It is being taken")}}
    });
    paths["/v1/jobs/{id}/rescaling"] = json!({
        "parameters": [
            {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
            {"name": "parallelism", "in": "query", "required": true, "schema": {"type": "integer", "minimum": 1}}
        ],
        "patch": {
            "summary": "Rescale a job: stop it with a savepoint and start its bundle again from it at the new parallelism (asynchronous: the stop's trigger; its status names the new job, `resumed_as`, once it runs)",
            "responses": {
                "202": {"description": "Stopping", "content": {"application/json": {"schema": savepoint}}},
                "400": err("No parallelism in the query"),
                "404": err("No such job"),
                "409": err("The job is not running, or takes no checkpoints"),
                "422": err("The job cannot run at that parallelism")
            }
        }
    });
    paths["/v1/jobs/{id}/upgrade"] = json!({
        "parameters": id_param,
        "post": {
            "summary": "Upgrade a job: stop it with a savepoint and start a new bundle from it, with the job's parameters and parallelism; state is matched by vertex name (asynchronous: the stop's trigger; its status names the new job, `resumed_as`, once it runs)",
            "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["bundle"], "additionalProperties": false, "properties": {
                "bundle": {"type": "string", "description": "The new bundle's id"},
                "allow_non_restored_state": {"type": "boolean"}
            }}}}},
            "responses": {
                "202": {"description": "Stopping", "content": {"application/json": {"schema": savepoint}}},
                "400": err("Not an upgrade request"),
                "404": err("No such job or bundle"),
                "409": err("The job is not running, or takes no checkpoints"),
                "422": err("The new bundle's job cannot run")
            }
        }
    });
    paths["/v1/jobs/{id}/stop"] = json!({
        "parameters": id_param,
        "post": {
            "summary": "Stop a job with a savepoint: its last checkpoint, its sinks commit, then the job is canceled (asynchronous, as a savepoint)",
            "requestBody": {"required": false, "content": {"application/json": {"schema": savepoint_request}}},
            "responses": {
                "202": {"description": "Triggered", "content": {"application/json": {"schema": savepoint}}},
                "400": err("Not a savepoint request, or a bad trigger id"),
                "404": err("No such job"),
                "409": err("The job is not running, takes no checkpoints, or the directory holds a savepoint"),
                "422": err("The directory is not absolute, or outside the granted directories; drain without a stop")
            }
        }
    });
}

/// Every operation but the public ones may answer 401 and 403 (a
/// coordinator with tokens, a change from another site's page) and takes
/// a bearer token, or none on an open coordinator.
fn with_auth_answers(document: &mut serde_json::Value, err: &dyn Fn(&str) -> serde_json::Value) {
    let Some(paths) = document["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut().filter(|(m, _)| *m != "parameters") {
            if method == "get" && matches!(path.as_str(), "/v1/openapi.json") {
                continue;
            }
            op["security"] = json!([{"bearer": []}, {}]);
            if let Some(responses) = op["responses"].as_object_mut() {
                responses.insert(
                    "401".into(),
                    err("A token is needed, or this one is unknown"),
                );
                responses.insert(
                    "403".into(),
                    err("A read token asked for a change, or another site's page did"),
                );
            }
        }
    }
}

/// The OpenAPI path of `GET /v1/jobs/{id}/checkpoints`.
fn checkpoints_path(
    id_param: &serde_json::Value,
    not_found: serde_json::Value,
) -> serde_json::Value {
    json!({"parameters": id_param, "get": {"summary": "A job's checkpoints: settings, counts, the latest completed, the recent history (id, status, trigger time, duration, state and uploaded bytes, per-vertex acknowledgements and alignment, sync and async times, failure), the checkpoint it was restored from", "responses": {"200": {"description": "The checkpoints", "content": {"application/json": {"schema": {"type": "object", "properties": {
                "config": {"type": ["object", "null"]},
                "counts": {"type": "object", "properties": {"triggered": {"type": "integer"}, "in_progress": {"type": "integer"}, "completed": {"type": "integer"}, "failed": {"type": "integer"}}},
                "latest_completed": {"type": ["object", "null"]},
                "history": {"type": "array", "items": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "status": {"type": "string", "enum": ["in_progress", "completed", "failed"]},
                    "triggered_at_ms": {"type": "integer"}, "duration_ms": {"type": ["integer", "null"]},
                    "state_bytes": {"type": "integer"}, "uploaded_bytes": {"type": "integer"},
                    "acknowledged": {"type": "integer"}, "total": {"type": "integer"},
                    "vertices": {"type": "array", "items": {"type": "object"}},
                    "failure": {"type": ["string", "null"]}
                }}},
                "restored": {"type": ["object", "null"]}
            }}}}}, "404": not_found}}})
}

async fn openapi() -> Json<serde_json::Value> {
    Json(openapi_document())
}
