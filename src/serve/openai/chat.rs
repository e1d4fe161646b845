//! Answering a chat: the `sightline` planner model, or the loaded model on the whole
//! conversation (free text, or JSON under a schema), whole or streamed.

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc::unbounded_channel;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;

use super::error::ApiError;
use super::request::{ChatRequest, Format, Message, Piece};
use crate::chat::{self, Role};
use crate::decode::{decode, DecodeOptions, Grammar};
use crate::error::{Error, Result};
use crate::generate::{ChatGenerator, GenerateOptions, StopReason, TextStream};
use crate::image::preprocess_bytes;
use crate::model::VisionLanguageModel;
use crate::planner::ModelLoan;
use crate::serve::brain::OwnedTurn;
use crate::serve::queue::{Interrupt, Interruptible};
use crate::serve::Shared;

/// What the model produced.
struct Answer {
    text: String,
    /// `stop` or `length`.
    finish: &'static str,
    prompt_tokens: usize,
    completion_tokens: usize,
}

/// What a streamed generation sends as it goes.
enum Streamed {
    Delta(String),
    End(Answer),
    Failed(ApiError),
}

/// The `sightline` model: the planner's move for the last user message.
pub(super) async fn plan(shared: &Shared, request: ChatRequest) -> Result<Response, ApiError> {
    let (goal, screenshot) = request.goal_and_screen().ok_or_else(|| {
        ApiError::bad_request("the last user message has no text: it is the goal to plan for")
    })?;
    let turn = OwnedTurn {
        view: crate::view::empty_view(&goal),
        goal,
        history: Vec::new(),
        memory: Value::Null,
        screenshot,
    };
    let planned = shared
        .brain
        .plan(&shared.queue, shared.config.limits.request_timeout, turn)
        .await?;
    let text = serde_json::to_string(&planned.answer)
        .map_err(|e| ApiError::from(Error::internal_caused("the move as JSON", e)))?;
    let stats = planned.stats.as_ref();
    let answer = Answer {
        text,
        finish: "stop",
        prompt_tokens: stats.map_or(0, |s| s.prefill_reused + s.prefill_new),
        completion_tokens: stats.map_or(0, |s| s.generated + s.forced),
    };
    Ok(respond(&request.model, request.stream, answer))
}

/// The loaded model on the conversation.
pub(super) async fn complete(
    shared: &Arc<Shared>,
    request: ChatRequest,
) -> Result<Response, ApiError> {
    let planner = shared
        .brain
        .model()
        .cloned()
        .ok_or_else(|| ApiError::bad_request("no model is loaded"))?;
    let name = request.model.clone();
    let timeout = shared.config.limits.request_timeout;
    if !request.stream {
        let answer = shared
            .queue
            .run(timeout, move |interrupt| {
                planner.with_model(|loan| generate(loan, interrupt, &request, &mut |_| true))
            })
            .await?;
        return Ok(respond(&name, false, answer));
    }
    // Admitted before answering, so a full queue is still a 503, not an event.
    let admission = shared.queue.admit(timeout).await?;
    let (events, rx) = unbounded_channel::<Streamed>();
    let work = admission.spawn(move |interrupt| {
        let failed = events.clone();
        let sent = planner.with_model(|loan| {
            generate(loan, interrupt, &request, &mut |delta| {
                // The client went away: stop generating for it.
                let open = events.send(Streamed::Delta(delta)).is_ok();
                if !open {
                    interrupt.cancel();
                }
                open
            })
        });
        let last = match sent {
            Ok(answer) => Streamed::End(answer),
            Err(e) => Streamed::Failed(interrupt_error(interrupt, e)),
        };
        let _ = failed.send(last);
        Ok(())
    });
    drop(work);
    Ok(sse(name, rx))
}

fn interrupt_error(interrupt: &Interrupt, e: Error) -> ApiError {
    interrupt.classify(e).into()
}

/// Renders the conversation, then generates: free text token by token (each piece of text
/// to `on_text`, which answers whether to go on), or the whole JSON under the schema.
fn generate(
    loan: ModelLoan<'_>,
    interrupt: &Interrupt,
    request: &ChatRequest,
    on_text: &mut dyn FnMut(String) -> bool,
) -> Result<Answer> {
    let mut model = Interruptible {
        model: loan.model,
        interrupt,
    };
    // The schema first: one llguidance rejects is the caller's error before any model work.
    let grammar = match &request.format {
        Format::Schema(schema) => Some(Grammar::from_json_schema(loan.env, schema.clone())?),
        Format::Text => None,
    };
    let (prompt, images) = render(&mut model, loan.preprocess, &request.messages)?;
    let ids = crate::tokenizer::encode_ids(loan.tokenizer, &prompt, "the conversation")?;
    if let Some(grammar) = grammar {
        model.truncate(0)?;
        let logits = model.feed(&ids, &images)?;
        let options = DecodeOptions {
            sampling: request.sampling,
            budget_tokens: request.max_tokens,
            ..DecodeOptions::default()
        };
        let decoded = decode(&mut model, &logits, &grammar, &options)?;
        on_text(decoded.text.clone());
        return Ok(Answer {
            completion_tokens: decoded.tokens.len(),
            text: decoded.text,
            finish: "stop",
            prompt_tokens: ids.len(),
        });
    }
    let vocab = model.vocab_size();
    let generator = ChatGenerator::new(loan.tokenizer.clone(), loan.preprocess.clone(), vocab)?;
    let options = GenerateOptions {
        sampling: request.sampling,
        max_tokens: request.max_tokens,
        keep_logits: false,
    };
    let special = *generator.special();
    let mut stream = TextStream::new(loan.tokenizer);
    let mut streaming = true;
    let mut stream_error = None;
    let generation =
        generator.generate_from_ids_streaming(&mut model, &ids, &images, &options, &mut |t| {
            if !streaming || t == special.im_end || t == special.end_of_text {
                return;
            }
            match stream.push(t) {
                Ok(text) if text.is_empty() => {}
                Ok(text) => streaming = on_text(text),
                Err(e) => {
                    streaming = false;
                    stream_error = Some(e);
                }
            }
        })?;
    if let Some(e) = stream_error {
        return Err(e);
    }
    Ok(Answer {
        finish: match generation.stop {
            StopReason::EndToken(_) => "stop",
            StopReason::MaxTokens => "length",
        },
        completion_tokens: generation.tokens.len(),
        prompt_tokens: ids.len(),
        text: generation.text,
    })
}

/// The conversation as Qwen's chat text (images as pad runs) with its encoded images, the
/// assistant's turn opened.
fn render(
    model: &mut dyn VisionLanguageModel,
    preprocess: &crate::image::PreprocessConfig,
    messages: &[Message],
) -> Result<(String, Vec<crate::model::EncodedImage>)> {
    let mut text = String::new();
    let mut images = Vec::new();
    for message in messages {
        text.push_str(&chat::open(message.role));
        for piece in &message.pieces {
            match piece {
                Piece::Text(t) => text.push_str(t),
                Piece::Image(bytes) => {
                    let encoded = model.encode_image(&preprocess_bytes(bytes, preprocess)?)?;
                    text.push_str(&chat::image_text(encoded.n_tokens()));
                    images.push(encoded);
                }
            }
        }
        text.push_str(chat::END);
    }
    text.push_str(&chat::open(Role::Assistant));
    Ok((text, images))
}

/// The whole answer, or the same as a stream of one delta.
fn respond(model: &str, stream: bool, answer: Answer) -> Response {
    if stream {
        let (tx, rx) = unbounded_channel();
        let _ = tx.send(Streamed::Delta(answer.text.clone()));
        let _ = tx.send(Streamed::End(Answer {
            text: String::new(),
            ..answer
        }));
        return sse(model.to_string(), rx);
    }
    Json(json!({
        "id": completion_id(),
        "object": "chat.completion",
        "created": now_s(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": answer.text},
            "finish_reason": answer.finish,
        }],
        "usage": usage(&answer),
    }))
    .into_response()
}

fn usage(answer: &Answer) -> Value {
    json!({
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    })
}

/// Server-sent events: the role, each delta, the finish reason with the usage, `[DONE]`. A
/// failure after the stream began is an `error` object in place of the finish.
fn sse(model: String, rx: tokio::sync::mpsc::UnboundedReceiver<Streamed>) -> Response {
    let id = completion_id();
    let created = now_s();
    let chunk = move |delta: Value, finish: Option<&str>, usage: Option<Value>| {
        let mut c = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if let Some(usage) = usage {
            c["usage"] = usage;
        }
        Event::default().data(c.to_string())
    };
    let first = chunk(json!({"role": "assistant", "content": ""}), None, None);
    let body = UnboundedReceiverStream::new(rx).map(move |event| match event {
        Streamed::Delta(text) => chunk(json!({"content": text}), None, None),
        Streamed::End(answer) => chunk(json!({}), Some(answer.finish), Some(usage(&answer))),
        Streamed::Failed(e) => Event::default().data(
            json!({"error": {"message": e.message(), "code": e.status().as_u16()}}).to_string(),
        ),
    });
    let events = tokio_stream::once(first)
        .chain(body)
        .chain(tokio_stream::once(Event::default().data("[DONE]")))
        .map(Ok::<Event, Infallible>);
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The answer's `created` field: seconds since the Unix epoch.
fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A completion id, unique in this process.
fn completion_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("chatcmpl-{}-{n}", now_s())
}
