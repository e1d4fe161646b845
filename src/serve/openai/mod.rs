//! The OpenAI-compatible endpoint: `/v1/models`, `/v1/chat/completions` and `/health`.
//!
//! Two models are listed. The loaded model under its `--model` name answers chats: images
//! (data URLs or file paths) go through the model's own image preprocessing, `stream: true`
//! answers with server-sent events, and `response_format` of type `json_schema` (or
//! `json_object`) is decoded under that schema with llguidance, so the answer always parses
//! and validates. The model `sightline` answers with the [`NextMove`](cel_contracts::NextMove)
//! (as JSON text) for the last user message's text as the goal and its last image as the
//! screen: the planner's own prompt and grammar, as `sightline plan` would.
//!
//! Every request is bounded: its body ([`ServeLimits::max_request_bytes`]), its images
//! ([`ServeLimits::max_images`], [`MAX_IMAGE_BYTES`](super::MAX_IMAGE_BYTES) each), its
//! tokens ([`ServeLimits::max_tokens`]) and its time (the model queue's deadline). A bad
//! request is a 4xx with OpenAI's error body and a one-line message; the server goes on.
//!
//! [`ServeLimits::max_request_bytes`]: super::ServeLimits::max_request_bytes
//! [`ServeLimits::max_images`]: super::ServeLimits::max_images
//! [`ServeLimits::max_tokens`]: super::ServeLimits::max_tokens

mod chat;
pub(crate) mod error;
mod request;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde_json::json;

pub use error::ApiError;

use super::Shared;

/// The model name whose answer is a `NextMove`.
pub const PLANNER_MODEL: &str = "sightline";

/// The router of the endpoint.
pub(crate) fn router(shared: Arc<Shared>) -> axum::Router {
    let limit = shared.config.limits.max_request_bytes;
    axum::Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(completions))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(shared)
}

async fn health(State(shared): State<Arc<Shared>>) -> Json<serde_json::Value> {
    Json(json!({
        "status": "ok",
        "model": shared.brain.label(),
        "desktop": shared.desktop.holder().map_or("free".to_string(), |h| format!("held by {h}")),
    }))
}

/// The names a client may ask for: the loaded model's, and `sightline`.
fn model_names(shared: &Shared) -> Vec<String> {
    let mut names = Vec::new();
    if shared.brain.model().is_some() {
        names.push(shared.brain.label().to_string());
    }
    names.push(PLANNER_MODEL.to_string());
    names
}

async fn models(State(shared): State<Arc<Shared>>) -> Json<serde_json::Value> {
    let data: Vec<serde_json::Value> = model_names(&shared)
        .into_iter()
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "sightline"}))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

async fn completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match answer(shared, &headers, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn answer(
    shared: Arc<Shared>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    // JSON only: no web form can send it, so a page the user opens cannot post here.
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !json_body {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            "the body must be JSON (Content-Type: application/json)",
        ));
    }
    let body = body.map_err(|e| {
        let status = e.status();
        let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!(
                "the request is larger than the server's limit of {} MiB",
                shared.config.limits.max_request_bytes >> 20
            )
        } else {
            format!("the request body could not be read: {}", e.body_text())
        };
        ApiError::new(status, "invalid_request_error", &message)
    })?;
    let request = request::ChatRequest::parse(&body, &shared.config.limits)?;
    if request.model == PLANNER_MODEL {
        return chat::plan(&shared, request).await;
    }
    match shared.brain.model() {
        Some(_) if request.model == shared.brain.label() => chat::complete(&shared, request).await,
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "model_not_found",
            &format!(
                "the model {:?} is not served here; models: {}",
                request.model,
                model_names(&shared).join(", ")
            ),
        )),
    }
}
