//! `sightline serve --openai` as an OpenAI client uses it, over raw HTTP/1.1 on loopback,
//! with the tiny fixture model loaded once: models and health, a `json_schema` answer that
//! validates, a streamed answer, the `sightline` model's NextMove, and malformed requests
//! (bad base64, a body over the limit, a schema llguidance rejects, an unknown model, no
//! token) answered with a 4xx and a one-line message while the server goes on serving. Also:
//! another address than loopback is refused before any model loads.
#![cfg(feature = "serve")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use base64::Engine;
use cel_contracts::NextMove;
use serde_json::{json, Value};

/// A hang guard per request, not a speed target.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
pub(crate) const TOKEN: &str = "test-token-0123456789";
/// The request body limit the server is started with, in MiB.
const LIMIT_MIB: usize = 1;

pub(crate) struct Server {
    child: Child,
    pub(crate) addr: String,
    /// The MCP endpoint's address (streamable HTTP, same process, same model).
    mcp_addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures")
}

impl Server {
    /// Starts the server on a free port and reads the address it printed.
    pub(crate) fn start() -> Result<Self> {
        let model = fixtures().join("tiny-b");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sightline"))
            .args([
                "serve",
                "--openai",
                "127.0.0.1:0",
                "--mcp",
                "http://127.0.0.1:0",
            ])
            .arg("--model")
            .arg(&model)
            .args(["--max-request-mb", &LIMIT_MIB.to_string()])
            .env("SIGHTLINE_TOKEN", TOKEN)
            .env("HF_HUB_OFFLINE", "1")
            .env_remove("DISPLAY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().context("stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let mut seen = Vec::new();
        let mut mcp_addr = None;
        let addr = loop {
            let Some(line) = lines.next() else {
                let _ = child.kill();
                bail!("the server exited before serving: {}", seen.join("\n"));
            };
            let line = line?;
            if let Some(rest) = line.strip_prefix("serving OpenAI-compatible API") {
                let addr = rest.rsplit("http://").next().context("address")?;
                break addr.trim().to_string();
            }
            if let Some(rest) =
                line.strip_prefix("serving MCP (streamable HTTP) at /mcp on http://")
            {
                mcp_addr = Some(rest.trim().to_string());
            }
            seen.push(line);
        };
        let mcp_addr = mcp_addr.context("no MCP endpoint was printed before the API's")?;
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        Ok(Self {
            child,
            addr,
            mcp_addr,
        })
    }

    /// One request on its own connection: (status, body). `token` adds the bearer header.
    fn http(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        token: bool,
    ) -> Result<(u16, String)> {
        self.http_to(&self.addr, method, path, body, token)
    }

    fn http_to(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        token: bool,
    ) -> Result<(u16, String)> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
             Accept: application/json, text/event-stream\r\n"
        );
        if token {
            head.push_str(&format!("Authorization: Bearer {TOKEN}\r\n"));
        }
        if let Some(body) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        if let Some(body) = body {
            // A server refusing a body over its limit may answer before reading it all.
            let mut writer = stream.try_clone()?;
            let body = body.to_vec();
            std::thread::spawn(move || writer.write_all(&body));
        }
        let mut raw = Vec::new();
        // The answer is complete when the server closes; a reset after it is not an error.
        let mut buf = [0u8; 65536];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::ConnectionReset => {
                    break
                }
                Err(e) => return Err(e.into()),
            }
        }
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").context("no header end")?;
        let status: u16 = head.split_whitespace().nth(1).context("status")?.parse()?;
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        Ok((
            status,
            if chunked {
                dechunk(body)?
            } else {
                body.to_string()
            },
        ))
    }

    fn chat(&self, request: &Value) -> Result<(u16, Value)> {
        let (status, body) = self.http(
            "POST",
            "/v1/chat/completions",
            Some(request.to_string().as_bytes()),
            true,
        )?;
        let value = serde_json::from_str(&body).with_context(|| format!("{status}: {body}"))?;
        Ok((status, value))
    }
}

fn dechunk(mut body: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").context("chunk size")?;
        let size = usize::from_str_radix(size.trim(), 16)?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(rest.get(..size).context("chunk")?);
        body = rest.get(size + 2..).context("chunk end")?;
    }
}

fn screenshot_url() -> Result<String> {
    let png = std::fs::read(fixtures().join("screens/ui_resize.png"))?;
    Ok(format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(png)
    ))
}

/// The error of a 4xx answer, checked to be one line.
fn error_message(status: u16, body: &Value) -> Result<String> {
    ensure!((400..500).contains(&status), "status {status}: {body}");
    let message = body["error"]["message"].as_str().context("message")?;
    ensure!(!message.contains('\n'), "{message}");
    Ok(message.to_string())
}

#[test]
fn an_openai_client_gets_schema_json_streams_and_moves_and_clear_4xx_errors() -> Result<()> {
    let server = Server::start()?;
    let (status, health) = server.http("GET", "/health", None, false)?;
    assert_eq!(status, 200, "{health}");

    let (status, body) = server.http("GET", "/v1/models", None, false)?;
    assert_eq!(status, 401, "no token: {body}");
    let (status, body) = server.http("GET", "/v1/models", None, true)?;
    assert_eq!(status, 200, "{body}");
    let models: Value = serde_json::from_str(&body)?;
    let ids: Vec<&str> = models["data"]
        .as_array()
        .context("data")?
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids, ["tiny-b", "sightline"]);

    // The random tiny model's answer still validates against the schema: the grammar
    // allows nothing else.
    let schema = json!({
        "type": "object",
        "properties": {
            "label": {"type": "string", "maxLength": 12},
            "count": {"type": "integer", "minimum": 0, "maximum": 9}
        },
        "required": ["label", "count"],
        "additionalProperties": false
    });
    let url = screenshot_url()?;
    let (status, answer) = server.chat(&json!({
        "model": "tiny-b",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": "Name the button and count the icons."}
        ]}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "b", "schema": schema}}
    }))?;
    assert_eq!(status, 200, "{answer}");
    let content = answer["choices"][0]["message"]["content"]
        .as_str()
        .context("content")?;
    let parsed: Value = serde_json::from_str(content).with_context(|| content.to_string())?;
    let label = parsed["label"].as_str().context("label")?;
    ensure!(label.chars().count() <= 12, "{parsed}");
    let count = parsed["count"].as_i64().context("count")?;
    ensure!((0..=9).contains(&count), "{parsed}");
    ensure!(parsed.as_object().is_some_and(|o| o.len() == 2), "{parsed}");

    // Streaming: the role, deltas, a finish reason, [DONE].
    let request = json!({
        "model": "tiny-b", "stream": true, "max_tokens": 6,
        "messages": [{"role": "user", "content": "Say hello."}]
    });
    let (status, body) = server.http(
        "POST",
        "/v1/chat/completions",
        Some(request.to_string().as_bytes()),
        true,
    )?;
    assert_eq!(status, 200, "{body}");
    let events: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(events.last(), Some(&"[DONE]"), "{body}");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e))
        .collect::<Result<_, _>>()?;
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let finish = &chunks.last().context("finish")?["choices"][0]["finish_reason"];
    ensure!(finish == "length" || finish == "stop", "{finish}");
    ensure!(chunks.len() >= 3, "{body}");

    // The planner model answers a NextMove.
    let (status, answer) = server.chat(&json!({
        "model": "sightline",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Open the settings"},
            {"type": "image_url", "image_url": {"url": screenshot_url()?}}
        ]}]
    }))?;
    assert_eq!(status, 200, "{answer}");
    let content = answer["choices"][0]["message"]["content"]
        .as_str()
        .context("content")?;
    let _: NextMove = serde_json::from_str(content).with_context(|| content.to_string())?;

    // Malformed requests: a 4xx with one line each.
    let (status, body) = server.chat(&json!({
        "model": "tiny-b",
        "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@not-base64@@"}}]}]
    }))?;
    ensure!(error_message(status, &body)?.contains("base64"), "{body}");

    let (status, body) = server.chat(&json!({
        "model": "tiny-b",
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "bad",
            "schema": {"$ref": "#/definitions/missing"}}}
    }))?;
    error_message(status, &body)?;

    let (status, body) = server.chat(&json!({
        "model": "no-such-model", "messages": [{"role": "user", "content": "x"}]
    }))?;
    assert_eq!(status, 404);
    ensure!(
        error_message(status, &body)?.contains("no-such-model"),
        "{body}"
    );

    let huge = format!(
        "{{\"model\":\"tiny-b\",\"messages\":[{{\"role\":\"user\",\"content\":\"{}\"}}]}}",
        "A".repeat(2 * (LIMIT_MIB << 20))
    );
    let (status, body) =
        server.http("POST", "/v1/chat/completions", Some(huge.as_bytes()), true)?;
    assert_eq!(status, 413, "{body}");
    let body: Value = serde_json::from_str(&body)?;
    ensure!(error_message(status, &body)?.contains("limit"), "{body}");

    let (status, body) = server.http("POST", "/v1/chat/completions", Some(b"{not json"), true)?;
    error_message(status, &serde_json::from_str(&body)?)?;

    // The MCP endpoint of the same server answers an initialize over streamable HTTP.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "sightline-test", "version": "0"}}});
    let (status, body) = server.http_to(
        &server.mcp_addr.clone(),
        "POST",
        "/mcp",
        Some(init.to_string().as_bytes()),
        true,
    )?;
    assert_eq!(status, 200, "{body}");
    ensure!(body.contains("\"name\":\"sightline\""), "{body}");

    // Still serving.
    let (status, answer) = server.chat(&json!({
        "model": "tiny-b", "max_tokens": 2,
        "messages": [{"role": "user", "content": "again"}]
    }))?;
    assert_eq!(status, 200, "{answer}");
    Ok(())
}

#[test]
fn another_address_than_loopback_needs_listen_any_and_a_token() -> Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_sightline"))
        .args([
            "serve",
            "--openai",
            "0.0.0.0:0",
            "--model",
            "no-model-is-loaded",
        ])
        .env_remove("SIGHTLINE_TOKEN")
        .env("HF_HUB_OFFLINE", "1")
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    ensure!(stderr.contains("not a loopback address"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_sightline"))
        .args([
            "serve",
            "--openai",
            "0.0.0.0:0",
            "--listen-any",
            "--model",
            "x",
        ])
        .env_remove("SIGHTLINE_TOKEN")
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    ensure!(stderr.contains("needs a bearer token"), "{stderr}");
    Ok(())
}
