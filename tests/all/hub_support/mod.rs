//! A stand-in Hugging Face Hub on loopback, answering as the real one does: the listing
//! (`/api/models/<repo>/revision/<rev>`), and `resolve/<rev>/<file>` with `X-Repo-Commit`;
//! LFS files (weights) by a 302 to a storage server on a second address (127.0.0.2 where it
//! can be bound) with `X-Linked-Etag` (the sha256) and `X-Linked-Size`; small files directly,
//! with ranges. Gated repos answer 401 (`X-Error-Code: GatedRepo`) without the right bearer
//! token. Faults can be scripted: answers of 429/503, a body cut after N bytes, a body always
//! short, wrong bytes, a stall until released. It counts what it sends.
//!
//! Every connection is answered and closed (`Connection: close`); the servers stop when the
//! [`StandInHub`] is dropped.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use sha2::{Digest, Sha256};

/// The commit every repo of the stand-in is at.
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// A file of a repo.
#[derive(Clone)]
pub struct RepoFile {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Served through the storage redirect, with its sha256 as the etag.
    pub lfs: bool,
}

/// A scripted fault of the storage server.
#[derive(Default)]
pub struct StorageFaults {
    /// Answers for the next requests, in order: (status, `Retry-After`).
    pub statuses: VecDeque<(u16, Option<u64>)>,
    /// Cut the next response's body after this many bytes (its `Content-Length` announces all).
    pub cut_once_after: Option<u64>,
    /// Every response sends only this many bytes, with a `Content-Length` that says so.
    pub always_short: Option<u64>,
    /// Every response sends these bytes instead of the file's (same length).
    pub wrong_bytes: Option<Vec<u8>>,
    /// The next response stalls after this many bytes until [`StandInHub::release`].
    pub stall_once_after: Option<u64>,
}

/// What the servers saw and sent.
#[derive(Default)]
pub struct Seen {
    /// Request paths (with the query), Hub and storage, in order.
    pub paths: Vec<String>,
    /// `Range` headers the storage server received.
    pub storage_ranges: Vec<Option<String>>,
    /// Whether an `Authorization` header reached the storage server.
    pub authorization_at_storage: bool,
}

#[derive(Default)]
struct State {
    repos: BTreeMap<String, (Option<String>, BTreeMap<String, RepoFile>)>,
    hub_statuses: VecDeque<(u16, Option<u64>)>,
    storage: StorageFaults,
    seen: Seen,
    stalled: bool,
}

struct Shared {
    state: Mutex<State>,
    released: Condvar,
    storage_bytes: AtomicU64,
    stop: AtomicBool,
    storage_url: String,
}

/// The two servers (see the module docs).
pub struct StandInHub {
    shared: Arc<Shared>,
    /// `http://127.0.0.1:PORT`, for `HF_ENDPOINT`.
    pub url: String,
    addrs: [SocketAddr; 2],
    threads: Vec<JoinHandle<()>>,
}

/// Most connections one test may make to one server; a test needs a few dozen.
const MAX_CONNECTIONS: usize = 500;

impl StandInHub {
    /// Starts both servers.
    pub fn start() -> anyhow::Result<Self> {
        let hub = TcpListener::bind("127.0.0.1:0")?;
        // A second address, as the real storage is another host; the same one where
        // 127.0.0.2 cannot be bound.
        let storage =
            TcpListener::bind("127.0.0.2:0").or_else(|_| TcpListener::bind("127.0.0.1:0"))?;
        let addrs = [hub.local_addr()?, storage.local_addr()?];
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            released: Condvar::new(),
            storage_bytes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            storage_url: format!("http://{}", addrs[1]),
        });
        let mut threads = Vec::new();
        for (listener, is_storage) in [(hub, false), (storage, true)] {
            let shared = Arc::clone(&shared);
            threads.push(std::thread::spawn(move || {
                serve(listener, is_storage, shared)
            }));
        }
        Ok(Self {
            shared,
            url: format!("http://{}", addrs[0]),
            addrs,
            threads,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a repo; `token`: gated, opened only by `Authorization: Bearer <token>`.
    pub fn add_repo(&self, repo: &str, token: Option<&str>, files: &[(&str, RepoFile)]) {
        let files = files
            .iter()
            .map(|(n, f)| (n.to_string(), f.clone()))
            .collect();
        self.state()
            .repos
            .insert(repo.to_string(), (token.map(str::to_string), files));
    }

    /// Answers the next Hub requests with these statuses first.
    pub fn fail_hub_requests(&self, statuses: &[(u16, Option<u64>)]) {
        self.state().hub_statuses.extend(statuses.iter().copied());
    }

    /// Scripts the storage server's faults.
    pub fn storage_faults(&self, faults: StorageFaults) {
        self.state().storage = faults;
    }

    /// Lets a stalled response go on.
    pub fn release(&self) {
        self.state().stalled = false;
        self.shared.released.notify_all();
    }

    /// Whether a response is stalled now.
    pub fn is_stalled(&self) -> bool {
        self.state().stalled
    }

    /// Body bytes the storage server sent.
    pub fn storage_bytes(&self) -> u64 {
        self.shared.storage_bytes.load(Ordering::SeqCst)
    }

    /// What the servers saw, so far.
    pub fn seen<T>(&self, read: impl FnOnce(&Seen) -> T) -> T {
        read(&self.state().seen)
    }
}

impl Drop for StandInHub {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.release();
        for addr in self.addrs {
            let _ = TcpStream::connect(addr);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The sha256 of `bytes`, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn serve(listener: TcpListener, is_storage: bool, shared: Arc<Shared>) {
    let mut handlers = Vec::new();
    for stream in listener.incoming().take(MAX_CONNECTIONS) {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let shared = Arc::clone(&shared);
        handlers.push(std::thread::spawn(move || {
            let _ = handle(stream, is_storage, &shared);
        }));
    }
    for h in handlers {
        let _ = h.join();
    }
}

struct Request {
    path: String,
    headers: BTreeMap<String, String>,
}

fn read_request(stream: &TcpStream) -> std::io::Result<Request> {
    let mut reader = BufReader::new(stream.try_clone()?.take(64 * 1024));
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_lowercase(), v.trim().to_string());
        }
    }
    Ok(Request { path, headers })
}

fn respond(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| *k == "Content-Length") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

/// The first byte of `bytes=N-`.
fn range_start(range: Option<&String>) -> Option<u64> {
    range?
        .strip_prefix("bytes=")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

fn handle(mut stream: TcpStream, is_storage: bool, shared: &Shared) -> std::io::Result<()> {
    let req = read_request(&stream)?;
    if shared.stop.load(Ordering::SeqCst) {
        return Ok(());
    }
    let mut state = shared
        .state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    state.seen.paths.push(req.path.clone());
    if is_storage {
        state
            .seen
            .storage_ranges
            .push(req.headers.get("range").cloned());
        if req.headers.contains_key("authorization") {
            state.seen.authorization_at_storage = true;
        }
        if let Some((status, after)) = state.storage.statuses.pop_front() {
            drop(state);
            let headers: Vec<(&str, String)> = after
                .map(|a| ("Retry-After", a.to_string()))
                .into_iter()
                .collect();
            return respond(&mut stream, status, &headers, b"");
        }
        let sha = req.path.trim_start_matches("/blobs/").to_string();
        let file = state
            .repos
            .values()
            .flat_map(|(_, files)| files.values())
            .find(|f| sha256_hex(&f.bytes) == sha)
            .cloned();
        let Some(file) = file else {
            drop(state);
            return respond(&mut stream, 404, &[], b"");
        };
        let mut bytes = state
            .storage
            .wrong_bytes
            .clone()
            .unwrap_or_else(|| file.bytes.clone());
        let cut = state.storage.cut_once_after.take();
        let short = state.storage.always_short;
        let stall = state.storage.stall_once_after.take();
        drop(state);
        let start = range_start(req.headers.get("range")).unwrap_or(0);
        let total = bytes.len() as u64;
        if start >= total && start > 0 {
            return respond(&mut stream, 416, &[], b"");
        }
        bytes.drain(..start as usize);
        if let Some(short) = short {
            bytes.truncate(short.saturating_sub(start) as usize);
        }
        let (status, mut headers) = if start > 0 {
            (
                206,
                vec![(
                    "Content-Range",
                    format!("bytes {start}-{}/{total}", total - 1),
                )],
            )
        } else {
            (200, Vec::new())
        };
        headers.push(("Content-Length", bytes.len().to_string()));
        respond(&mut stream, status, &headers, b"")?;
        let send_until = cut.map_or(bytes.len(), |c| (c as usize).min(bytes.len()));
        let stall_at = stall.map(|s| (s as usize).min(send_until));
        let mut sent = 0;
        for chunk in bytes[..send_until].chunks(16 * 1024) {
            if let Some(at) = stall_at {
                if sent <= at && at < sent + chunk.len() {
                    let (before, after) = chunk.split_at(at - sent);
                    shared
                        .storage_bytes
                        .fetch_add(before.len() as u64, Ordering::SeqCst);
                    stream.write_all(before)?;
                    stream.flush()?;
                    wait_for_release(shared);
                    shared
                        .storage_bytes
                        .fetch_add(after.len() as u64, Ordering::SeqCst);
                    stream.write_all(after)?;
                    sent += chunk.len();
                    continue;
                }
            }
            // Counted before the write: once the last write returns, the client may have
            // read it all and the test may look at the count.
            shared
                .storage_bytes
                .fetch_add(chunk.len() as u64, Ordering::SeqCst);
            stream.write_all(chunk)?;
            sent += chunk.len();
        }
        stream.flush()?;
        // A cut: close without the rest (the client sees the body end early).
        return stream.shutdown(std::net::Shutdown::Both);
    }

    if let Some((status, after)) = state.hub_statuses.pop_front() {
        drop(state);
        let headers: Vec<(&str, String)> = after
            .map(|a| ("Retry-After", a.to_string()))
            .into_iter()
            .collect();
        return respond(&mut stream, status, &headers, b"");
    }
    let auth = req.headers.get("authorization").cloned();
    let (repo, rest) = match parse_hub_path(&req.path, &state) {
        Some(found) => found,
        None => {
            drop(state);
            return respond(
                &mut stream,
                401,
                &[("X-Error-Code", "RepoNotFound".into())],
                b"",
            );
        }
    };
    let (token, files) = state.repos[&repo].clone();
    drop(state);
    if let Some(token) = token {
        match auth {
            Some(a) if a == format!("Bearer {token}") => {}
            Some(_) => return respond(&mut stream, 401, &[], b""),
            None => {
                return respond(
                    &mut stream,
                    401,
                    &[("X-Error-Code", "GatedRepo".into())],
                    b"",
                )
            }
        }
    }
    match rest {
        HubPath::Listing => {
            let siblings: Vec<String> = files
                .keys()
                .map(|n| format!("{{\"rfilename\":\"{n}\"}}"))
                .collect();
            let body = format!("{{\"siblings\":[{}]}}", siblings.join(","));
            respond(&mut stream, 200, &[], body.as_bytes())
        }
        HubPath::Resolve(file) => {
            let Some(f) = files.get(&file) else {
                return respond(
                    &mut stream,
                    404,
                    &[("X-Error-Code", "EntryNotFound".into())],
                    b"",
                );
            };
            let sha = sha256_hex(&f.bytes);
            if f.lfs {
                let location = format!("{}/blobs/{sha}", shared.storage_url);
                return respond(
                    &mut stream,
                    302,
                    &[
                        ("Location", location),
                        ("X-Repo-Commit", COMMIT.into()),
                        ("X-Linked-Etag", format!("\"{sha}\"")),
                        ("X-Linked-Size", f.bytes.len().to_string()),
                        ("ETag", format!("\"{}\"", &sha[..40])),
                    ],
                    b"",
                );
            }
            let start = range_start(req.headers.get("range")).unwrap_or(0) as usize;
            let total = f.bytes.len();
            let body = &f.bytes[start.min(total)..];
            let mut headers = vec![
                ("X-Repo-Commit", COMMIT.to_string()),
                ("ETag", format!("\"{}\"", &sha[..40])),
            ];
            let status = if req.headers.contains_key("range") {
                // The Hub answers a one-byte probe (`bytes=0-0`) with one byte.
                let end = if req.headers.get("range").is_some_and(|r| r.ends_with("-0")) {
                    start
                } else {
                    total.saturating_sub(1)
                };
                headers.push(("Content-Range", format!("bytes {start}-{end}/{total}")));
                let body = &f.bytes[start.min(total)..(end + 1).min(total)];
                return respond(&mut stream, 206, &headers, body);
            } else {
                200
            };
            respond(&mut stream, status, &headers, body)
        }
    }
}

enum HubPath {
    Listing,
    Resolve(String),
}

/// `/api/models/<repo>/revision/<rev>` or `/<repo>/resolve/<rev>/<file>`, for a known repo.
fn parse_hub_path(path: &str, state: &State) -> Option<(String, HubPath)> {
    if let Some(rest) = path.strip_prefix("/api/models/") {
        let (repo, _rev) = rest.split_once("/revision/")?;
        return state
            .repos
            .contains_key(repo)
            .then(|| (repo.to_string(), HubPath::Listing));
    }
    let rest = path.strip_prefix('/')?;
    let (repo, tail) = rest.split_once("/resolve/")?;
    let (_rev, file) = tail.split_once('/')?;
    state
        .repos
        .contains_key(repo)
        .then(|| (repo.to_string(), HubPath::Resolve(file.to_string())))
}

fn wait_for_release(shared: &Shared) {
    let mut state = shared
        .state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    state.stalled = true;
    // Bounded: a test that forgets to release still ends.
    for _ in 0..600 {
        if !state.stalled || shared.stop.load(Ordering::SeqCst) {
            return;
        }
        state = match shared
            .released
            .wait_timeout(state, std::time::Duration::from_millis(100))
        {
            Ok((s, _)) => s,
            Err(p) => p.into_inner().0,
        };
    }
}

/// `n` bytes from a seeded generator (xorshift), so the hashes are fixed.
pub fn seeded_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
