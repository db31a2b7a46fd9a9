//! The REST API. Every error is JSON: `{"code": "...", "message": "..."}`
//! with a 4xx status for the caller's mistakes and 5xx for the
//! coordinator's. The OpenAPI document is served at `/v1/openapi.json`.

use std::sync::Arc;

use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::bundles::{BundleInfo, BundleStore};
use crate::error::ApiError;

/// The default limit of an upload's size.
pub const DEFAULT_MAX_UPLOAD: usize = 64 << 20;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The bundles.
    pub bundles: Arc<BundleStore>,
    /// The largest request body accepted, in bytes.
    pub max_upload: usize,
}

/// The API's router.
pub fn app(state: AppState) -> Router {
    let limit = state.max_upload;
    Router::new()
        .route("/v1/bundles", get(list_bundles).post(upload_bundle))
        .route("/v1/bundles/{id}", get(get_bundle).delete(delete_bundle))
        .route("/v1/openapi.json", get(openapi))
        .fallback(|| async {
            ApiError::not_found("not_found", "no such endpoint: see /v1/openapi.json")
        })
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

async fn upload_bundle(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<(StatusCode, Json<BundleInfo>), ApiError> {
    let mut multipart = multipart.map_err(|e| {
        ApiError::bad_request(
            "upload_not_multipart",
            format!("send the archive as multipart/form-data, field `bundle`: {e}"),
        )
    })?;
    let too_large = |e: axum::extract::multipart::MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "upload_too_large",
                format!(
                    "the upload is larger than the limit of {} bytes",
                    state.max_upload
                ),
            )
        } else {
            ApiError::bad_request("upload_invalid", format!("reading the upload: {e}"))
        }
    };
    while let Some(field) = multipart.next_field().await.map_err(too_large)? {
        if field.name() == Some("bundle") {
            let bytes = field.bytes().await.map_err(too_large)?;
            let info = state.bundles.upload(bytes.to_vec()).await?;
            return Ok((StatusCode::CREATED, Json(info)));
        }
    }
    Err(ApiError::bad_request(
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
) -> Result<Json<BundleInfo>, ApiError> {
    Ok(Json(state.bundles.get(&id).await?))
}

async fn delete_bundle(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.bundles.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The OpenAPI 3.1 document of the API.
pub fn openapi_document() -> serde_json::Value {
    let error = json!({"$ref": "#/components/schemas/Error"});
    let bundle = json!({"$ref": "#/components/schemas/Bundle"});
    let err = |what: &str| json!({"description": what, "content": {"application/json": {"schema": error}}});
    json!({
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
                "delete": {"summary": "Remove a bundle", "responses": {"204": {"description": "Removed"}, "404": err("No such bundle")}}
            },
            "/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3.1"}}}}
        },
        "components": {"schemas": {
            "Error": {"type": "object", "required": ["code", "message"], "properties": {
                "code": {"type": "string", "description": "Stable, machine-readable"},
                "message": {"type": "string", "description": "For people"}
            }},
            "Bundle": {"type": "object", "properties": {
                "id": {"type": "string", "description": "sha256 of the archive"},
                "name": {"type": "string"},
                "size": {"type": "integer"},
                "component_sha256": {"type": "string"},
                "operators": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "kind": {"type": "string", "enum": ["map", "flat-map", "filter", "keyed-process"]}}}},
                "params": {"type": "object", "additionalProperties": {"type": "object", "properties": {"default": {"type": ["string", "null"]}, "doc": {"type": ["string", "null"]}}}},
                "uploaded_at_ms": {"type": "integer"}
            }}
        }}
    })
}

async fn openapi() -> Json<serde_json::Value> {
    Json(openapi_document())
}
