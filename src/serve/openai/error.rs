//! Errors as OpenAI clients read them: a status and `{"error": {"message", "type", "code"}}`,
//! the message on one line.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::error::Error;
use crate::serve::queue::QueueError;

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    code: String,
    message: String,
}

impl ApiError {
    /// An answer of `status`, with OpenAI's `code` (`invalid_request_error`,
    /// `model_not_found`, …) and a message (its lines are joined into one).
    pub fn new(status: StatusCode, code: &str, message: &str) -> Self {
        Self {
            status,
            code: code.to_string(),
            message: message.split_whitespace().collect::<Vec<_>>().join(" "),
        }
    }

    /// A 400 about the request.
    pub fn bad_request(message: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &message.to_string(),
        )
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The one-line message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<Error> for ApiError {
    /// What the caller sent is a 400 (a bad image, a schema llguidance rejects, a bad
    /// sampling setting); anything else is the server's 500.
    fn from(e: Error) -> Self {
        match e {
            Error::InvalidInput { .. }
            | Error::Image { .. }
            | Error::Grammar { .. }
            | Error::Io { .. } => Self::bad_request(&e),
            Error::Decode { .. } => Self::bad_request(format!(
                "{e} (raise max_tokens, or bound the schema's strings)"
            )),
            _ => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                &e.to_string(),
            ),
        }
    }
}

impl From<QueueError> for ApiError {
    fn from(e: QueueError) -> Self {
        match e {
            QueueError::Full { .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_busy",
                &e.to_string(),
            ),
            QueueError::TimedOut { .. } => {
                Self::new(StatusCode::GATEWAY_TIMEOUT, "timeout", &e.to_string())
            }
            QueueError::Failed(e) => e.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let kind = if self.status.is_client_error() {
            "invalid_request_error"
        } else {
            "server_error"
        };
        let body = json!({
            "error": { "message": self.message, "type": kind, "code": self.code, "param": null }
        });
        (self.status, Json(body)).into_response()
    }
}
