//! A chat completion request, read and checked: roles known, images decoded and bounded,
//! sampling settings valid, `max_tokens` within the server's limit. Fields this endpoint does
//! not use (`n`, `stop`, `tools`, …) are ignored, as OpenAI's clients send many.

use serde::Deserialize;
use serde_json::Value;

use super::error::ApiError;
use crate::chat::Role;
use crate::decode::Sampling;
use crate::serve::images::image_from_url;
use crate::serve::ServeLimits;

/// Tokens generated when a request does not say.
pub const DEFAULT_MAX_TOKENS: usize = 512;

#[derive(Deserialize)]
struct Wire {
    model: Option<String>,
    messages: Vec<WireMessage>,
    #[serde(default)]
    stream: bool,
    max_tokens: Option<usize>,
    max_completion_tokens: Option<usize>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    seed: Option<u64>,
    response_format: Option<WireFormat>,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    #[serde(default)]
    content: Option<WireContent>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum WireContent {
    Text(String),
    Parts(Vec<WirePart>),
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart {
    Text { text: String },
    ImageUrl { image_url: WireImage },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum WireImage {
    Object { url: String },
    Url(String),
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: WireSchema },
}

#[derive(Deserialize)]
struct WireSchema {
    schema: Option<Value>,
}

/// A piece of a message: text, or an image's bytes (PNG or JPEG).
#[derive(Debug, Clone)]
pub enum Piece {
    /// Text.
    Text(String),
    /// An image.
    Image(Vec<u8>),
}

/// One message.
#[derive(Debug, Clone)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What it says, in order.
    pub pieces: Vec<Piece>,
}

/// What the answer must be.
#[derive(Debug, Clone)]
pub enum Format {
    /// Free text.
    Text,
    /// JSON valid under this schema.
    Schema(Value),
}

/// A checked request.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The model asked for.
    pub model: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Answer as server-sent events.
    pub stream: bool,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Token choice.
    pub sampling: Sampling,
    /// The answer's form.
    pub format: Format,
}

impl ChatRequest {
    /// Reads `body`; every problem is a 400 naming it.
    pub fn parse(body: &[u8], limits: &ServeLimits) -> Result<Self, ApiError> {
        let wire: Wire = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the request is not a valid chat completion request: {e}"
            ))
        })?;
        let model = wire
            .model
            .ok_or_else(|| ApiError::bad_request("the request names no model"))?;
        if wire.messages.is_empty() {
            return Err(ApiError::bad_request("messages is empty"));
        }
        let max_tokens = wire
            .max_completion_tokens
            .or(wire.max_tokens)
            .unwrap_or(DEFAULT_MAX_TOKENS.min(limits.max_tokens));
        if max_tokens == 0 || max_tokens > limits.max_tokens {
            return Err(ApiError::bad_request(format!(
                "max_tokens {max_tokens} is outside 1..={} (the server's limit)",
                limits.max_tokens
            )));
        }
        let sampling = match wire.temperature {
            None => Sampling::Greedy,
            Some(0.0) => Sampling::Greedy,
            Some(t) => Sampling::top_p(t, wire.top_p.unwrap_or(1.0), wire.seed.unwrap_or(0))
                .map_err(ApiError::bad_request)?,
        };
        let format = match wire.response_format {
            None | Some(WireFormat::Text) => Format::Text,
            Some(WireFormat::JsonObject) => Format::Schema(serde_json::json!({"type": "object"})),
            Some(WireFormat::JsonSchema { json_schema }) => {
                Format::Schema(json_schema.schema.ok_or_else(|| {
                    ApiError::bad_request("response_format.json_schema has no schema")
                })?)
            }
        };
        let mut images = 0usize;
        let mut messages = Vec::with_capacity(wire.messages.len());
        for (i, m) in wire.messages.into_iter().enumerate() {
            let role = match m.role.as_str() {
                "system" | "developer" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "messages[{i}]: role {other:?} is not served (system, developer, user, assistant)"
                    )))
                }
            };
            let pieces = match m.content {
                None => Vec::new(),
                Some(WireContent::Text(text)) => vec![Piece::Text(text)],
                Some(WireContent::Parts(parts)) => {
                    let mut pieces = Vec::with_capacity(parts.len());
                    for part in parts {
                        pieces.push(match part {
                            WirePart::Text { text } => Piece::Text(text),
                            WirePart::ImageUrl { image_url } => {
                                images += 1;
                                if images > limits.max_images {
                                    return Err(ApiError::bad_request(format!(
                                        "more than {} images in one request",
                                        limits.max_images
                                    )));
                                }
                                let url = match &image_url {
                                    WireImage::Object { url } | WireImage::Url(url) => url,
                                };
                                Piece::Image(image_from_url(url).map_err(|e| {
                                    ApiError::bad_request(format!("messages[{i}]: {e}"))
                                })?)
                            }
                        });
                    }
                    pieces
                }
            };
            messages.push(Message { role, pieces });
        }
        Ok(Self {
            model,
            messages,
            stream: wire.stream,
            max_tokens,
            sampling,
            format,
        })
    }

    /// The last user message's text (its pieces joined) and its last image: a goal and a
    /// screen for the planner.
    pub fn goal_and_screen(&self) -> Option<(String, Option<Vec<u8>>)> {
        let last = self.messages.iter().rev().find(|m| m.role == Role::User)?;
        let mut text = Vec::new();
        let mut image = None;
        for piece in &last.pieces {
            match piece {
                Piece::Text(t) => text.push(t.trim()),
                Piece::Image(bytes) => image = Some(bytes.clone()),
            }
        }
        let goal = text.join(" ").trim().to_string();
        (!goal.is_empty()).then_some((goal, image))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

    fn parse(body: Value) -> Result<ChatRequest, ApiError> {
        ChatRequest::parse(body.to_string().as_bytes(), &ServeLimits::default())
    }

    #[test]
    fn the_last_user_message_gives_the_goal_and_its_image() -> Result<(), ApiError> {
        let url = format!("data:image/png;base64,{PNG_1X1}");
        let request = parse(serde_json::json!({
            "model": "sightline",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [
                    {"type": "text", "text": "open the"},
                    {"type": "image_url", "image_url": {"url": url}},
                    {"type": "text", "text": "settings"}
                ]}
            ],
            "n": 1
        }))?;
        let (goal, image) = request
            .goal_and_screen()
            .ok_or_else(|| ApiError::bad_request("no goal"))?;
        assert_eq!(goal, "open the settings");
        assert!(image.is_some_and(|b| b.starts_with(b"\x89PNG")));
        assert_eq!(request.max_tokens, DEFAULT_MAX_TOKENS);
        Ok(())
    }

    #[test]
    fn malformed_requests_are_refused_naming_what_is_wrong() {
        let cases = [
            (
                serde_json::json!({"messages": [{"role": "user", "content": "hi"}]}),
                "no model",
            ),
            (serde_json::json!({"model": "m", "messages": []}), "empty"),
            (
                serde_json::json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}),
                "not served",
            ),
            (
                serde_json::json!({"model": "m", "max_tokens": 1_000_000,
                    "messages": [{"role": "user", "content": "x"}]}),
                "server's limit",
            ),
            (
                serde_json::json!({"model": "m", "messages": [{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}}]}]}),
                "base64",
            ),
            (
                serde_json::json!({"model": "m", "temperature": -1.0,
                    "messages": [{"role": "user", "content": "x"}]}),
                "temperature",
            ),
        ];
        for (body, says) in cases {
            match parse(body.clone()) {
                Ok(_) => panic!("{body} was accepted"),
                Err(e) => {
                    assert_eq!(e.status().as_u16(), 400, "{body}");
                    assert!(e.message().contains(says), "{body}: {}", e.message());
                    assert!(!e.message().contains('\n'));
                }
            }
        }
    }
}
