//! The system prompt's KV cache on disk, so that a new process starts its first turn past
//! the system prompt instead of prefilling it again (about 1,100 tokens: 13 s of a 2B
//! model's first turn on two CPU cores, the same work in every `sightline run`, `plan` and
//! eval task).
//!
//! An entry is one safetensors file named by a SHA-256 over everything the KV depends on:
//! the weight files (canonical path, size, modification time and their first and last MiB),
//! the Sightline executable (size and modification time: kernels change between builds),
//! the device, the activation type, the quantization and the thread count, and the prompt's
//! token ids. The file repeats that key and the token ids; a load that finds anything else
//! (another key, other tokens, a truncated or corrupt file, tensors that do not fit the
//! model) is a miss: the prefix is computed and the entry written again. Entries are written
//! to a temporary file and renamed into place; the directory keeps the most recently used
//! entries within [`MAX_ENTRIES`] and [`MAX_BYTES`].

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use candle_core::{Device, Tensor};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::KvPrefix;

/// Most entries kept (a few models, each with its agent and grader prompts).
pub const MAX_ENTRIES: usize = 8;
/// Most bytes kept: a 2B model's 1,100-token system prompt is about 250 MB in f32.
pub const MAX_BYTES: u64 = 3 << 30;
/// Bytes read from each end of a weight file for its fingerprint.
const SAMPLE_BYTES: u64 = 1 << 20;
/// An entry's file extension.
const EXTENSION: &str = "kv";

/// Where Sightline keeps what it generates or caches: `$SIGHTLINE_CACHE`, else
/// `$XDG_CACHE_HOME/sightline` or `~/.cache/sightline`, else `./.sightline-cache`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("SIGHTLINE_CACHE") {
        return PathBuf::from(dir);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map_or_else(
            || PathBuf::from(".sightline-cache"),
            |c| c.join("sightline"),
        )
}

/// The default directory of the store: `prefix` under [`cache_root`].
pub fn default_dir() -> PathBuf {
    cache_root().join("prefix")
}

/// A directory of KV prefixes for one model setup.
#[derive(Debug, Clone)]
pub struct PrefixStore {
    dir: PathBuf,
    /// Everything but the tokens that the KV depends on, in words.
    setup: String,
}

impl PrefixStore {
    /// The store in `dir` for a model of `weights` run with `settings` (device, type,
    /// quantization, threads, in words). Reads the fingerprints of the weight files and of
    /// the running executable; an unreadable weight file is an error.
    pub fn new(dir: PathBuf, weights: &[PathBuf], settings: &str) -> Result<Self> {
        let mut setup = String::new();
        for file in weights {
            setup.push_str(&file_fingerprint(file, true)?);
            setup.push('\n');
        }
        let exe = std::env::current_exe().map_err(|e| Error::io("the running executable", e))?;
        setup.push_str(&file_fingerprint(&exe, false)?);
        setup.push('\n');
        setup.push_str(settings);
        Ok(PrefixStore { dir, setup })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The stored prefix of `tokens`, on the CPU; `None` when there is none or it cannot be
    /// used (a broken entry is removed, and said so in the log).
    pub fn load(&self, tokens: &[u32]) -> Option<KvPrefix> {
        let (path, key) = self.entry(tokens);
        if !path.is_file() {
            return None;
        }
        match read_entry(&path, &key, tokens) {
            Ok(prefix) => {
                // Recently used entries are the last evicted.
                let _ = std::fs::File::options()
                    .append(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(SystemTime::now()));
                Some(prefix)
            }
            Err(e) => {
                tracing::warn!(entry = %path.display(), "unusable KV prefix, computing it: {e}");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Keeps `prefix` as the KV of `tokens`, then trims the directory to its bounds.
    pub fn save(&self, tokens: &[u32], prefix: &KvPrefix) -> Result<()> {
        if prefix.len() != tokens.len() {
            return Err(Error::internal(format!(
                "a KV prefix of {} positions kept for {} tokens",
                prefix.len(),
                tokens.len()
            )));
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        let (path, key) = self.entry(tokens);
        let cpu = |t: &Tensor| t.to_device(&Device::Cpu);
        let mut tensors = HashMap::new();
        tensors.insert("key".to_string(), bytes_tensor(key.as_bytes())?);
        tensors.insert("tokens".to_string(), u32_tensor(tokens)?);
        tensors.insert(
            "next_position".to_string(),
            u32_tensor(&prefix.next_position)?,
        );
        for (i, (k, v)) in prefix.layers.iter().enumerate() {
            tensors.insert(format!("k.{i}"), cpu(k)?);
            tensors.insert(format!("v.{i}"), cpu(v)?);
        }
        let partial = path.with_extension(format!("{EXTENSION}.{}.part", std::process::id()));
        let written = candle_core::safetensors::save(&tensors, &partial)
            .map_err(Error::from)
            .and_then(|()| std::fs::rename(&partial, &path).map_err(|e| Error::io(&path, e)));
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        written?;
        self.trim();
        Ok(())
    }

    /// The entry's path and key for `tokens`.
    fn entry(&self, tokens: &[u32]) -> (PathBuf, String) {
        let mut hash = Sha256::new();
        hash.update(self.setup.as_bytes());
        for t in tokens {
            hash.update(t.to_le_bytes());
        }
        let key = hex(&hash.finalize());
        let path = self.dir.join(format!("{}.{EXTENSION}", &key[..32]));
        (path, key)
    }

    /// Removes the least recently used entries past [`MAX_ENTRIES`] or [`MAX_BYTES`].
    fn trim(&self) {
        let Ok(read) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = read
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == EXTENSION))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.0));
        let mut bytes = 0;
        for (i, (_, len, path)) in entries.iter().enumerate() {
            bytes += len;
            if i >= MAX_ENTRIES || bytes > MAX_BYTES {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Reads and checks an entry.
fn read_entry(path: &Path, key: &str, tokens: &[u32]) -> Result<KvPrefix> {
    let mut tensors = candle_core::safetensors::load(path, &Device::Cpu)?;
    let mut take = |name: &str| {
        tensors
            .remove(name)
            .ok_or_else(|| Error::invalid_input(format!("it has no tensor {name:?}")))
    };
    let stored_key = take("key")?.to_vec1::<u8>()?;
    if stored_key != key.as_bytes() {
        return Err(Error::invalid_input("it was kept for another setup"));
    }
    if take("tokens")?.to_vec1::<u32>()? != tokens {
        return Err(Error::invalid_input("it was kept for other tokens"));
    }
    let next_position = take("next_position")?.to_vec1::<u32>()?;
    let mut layers = Vec::new();
    while let (Ok(k), Ok(v)) = (
        take(&format!("k.{}", layers.len())),
        take(&format!("v.{}", layers.len())),
    ) {
        layers.push((k, v));
    }
    if !tensors.is_empty() || layers.is_empty() {
        return Err(Error::invalid_input("its layers are not k.0, v.0, k.1, …"));
    }
    Ok(KvPrefix {
        layers,
        next_position,
    })
}

/// A file in words: its path, size and modification time, and with `sampled` a hash of its
/// first and last [`SAMPLE_BYTES`].
fn file_fingerprint(path: &Path, sampled: bool) -> Result<String> {
    let canonical = path.canonicalize().map_err(|e| Error::io(path, e))?;
    let meta = std::fs::metadata(&canonical).map_err(|e| Error::io(path, e))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let mut words = format!("{} {} {modified}", canonical.display(), meta.len());
    if sampled {
        let mut file = std::fs::File::open(&canonical).map_err(|e| Error::io(path, e))?;
        let mut hash = Sha256::new();
        let mut buf = Vec::new();
        let head = meta.len().min(SAMPLE_BYTES);
        (&mut file)
            .take(head)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io(path, e))?;
        let tail_from = meta.len().saturating_sub(SAMPLE_BYTES).max(head);
        file.seek(SeekFrom::Start(tail_from))
            .and_then(|_| file.read_to_end(&mut buf))
            .map_err(|e| Error::io(path, e))?;
        hash.update(&buf);
        words.push(' ');
        words.push_str(&hex(&hash.finalize()));
    }
    Ok(words)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn bytes_tensor(bytes: &[u8]) -> Result<Tensor> {
    Ok(Tensor::from_slice(bytes, bytes.len(), &Device::Cpu)?)
}

fn u32_tensor(values: &[u32]) -> Result<Tensor> {
    Ok(Tensor::from_slice(values, values.len(), &Device::Cpu)?)
}
