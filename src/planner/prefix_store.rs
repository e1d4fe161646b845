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
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use candle_core::{DType, Device, Tensor};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::{KvPrefix, KvSource};

/// Most entries kept (a few models, each with its agent and grader prompts).
pub const MAX_ENTRIES: usize = 8;
/// Most bytes kept: a 2B model's 1,100-token system prompt is about 250 MB in f32.
pub const MAX_BYTES: u64 = 3 << 30;
/// Bytes read from each end of a weight file for its fingerprint.
const SAMPLE_BYTES: u64 = 1 << 20;
/// An entry's file extension.
const EXTENSION: &str = "kv";
/// The extension of an entry being written (`<key>.kv.<pid>.part`).
const PART: &str = "part";
/// Age past which a temporary file is a write that never finished.
const STALE_PART: std::time::Duration = std::time::Duration::from_secs(3600);
/// Most bytes of an entry's safetensors header (a few hundred per tensor).
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// A [`PrefixStore::save_in_background`] under way. Dropping it waits for the write, so a
/// process never ends with an entry half written, and [`wait`](Self::wait) does the same
/// before the store is read again.
#[derive(Debug)]
pub struct PendingSave(Option<std::thread::JoinHandle<()>>);

impl PendingSave {
    /// Waits until the entry is written (or its write failed and was logged).
    pub fn wait(mut self) {
        self.join();
    }

    fn join(&mut self) {
        if let Some(thread) = self.0.take() {
            // The thread logs its own errors; a panic in it is not this turn's failure.
            let _ = thread.join();
        }
    }
}

impl Drop for PendingSave {
    fn drop(&mut self) {
        self.join();
    }
}

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
    /// the running executable; one that cannot be read is an error (the planner then runs
    /// without a store).
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

    /// The stored prefix of `tokens`, its layers read one at a time as they are restored;
    /// `None` when there is none or its key, tokens or header are wrong (a broken entry is
    /// removed, and said so in the log).
    pub fn load(&self, tokens: &[u32]) -> Option<StoredPrefix> {
        let (path, key) = self.entry(tokens);
        if !path.is_file() {
            return None;
        }
        match StoredPrefix::open(&path, &key, tokens) {
            Ok(prefix) => {
                // Recently used entries are the last evicted.
                let _ = File::options()
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

    /// Removes the entry of `tokens` (one whose layers turned out unusable).
    pub fn forget(&self, tokens: &[u32]) {
        let _ = std::fs::remove_file(self.entry(tokens).0);
    }

    /// [`save`](Self::save) on a thread of its own, so the turn that computed the prefix
    /// does not wait for the disk (writing a 2B model's 250 MB took 1.2 s on a 2-core VM).
    /// The tensors are copied to host memory here, before the call returns (a GPU's cache
    /// is not read from another thread while the model runs); the thread serializes and
    /// writes them. A failed write is logged: it only costs the next process the prefill.
    /// Errors: the copy to host memory, or no thread could be started.
    pub fn save_in_background(&self, tokens: &[u32], prefix: KvPrefix) -> Result<PendingSave> {
        let host = |t: &Tensor| t.to_device(&Device::Cpu);
        let prefix = KvPrefix {
            layers: prefix
                .layers
                .iter()
                .map(|(k, v)| Ok((host(k)?, host(v)?)))
                .collect::<Result<_>>()?,
            next_position: prefix.next_position,
        };
        let (store, tokens) = (self.clone(), tokens.to_vec());
        std::thread::Builder::new()
            .name("sightline-prefix-save".into())
            .spawn(move || {
                if let Err(e) = store.save(&tokens, &prefix) {
                    store.warn_not_kept(&e);
                }
            })
            .map(|thread| PendingSave(Some(thread)))
            .map_err(|e| Error::io("a thread to write the KV prefix", e))
    }

    /// Logs that an entry could not be written, with why: it only costs the next process
    /// the prefill.
    pub fn warn_not_kept(&self, e: &dyn std::fmt::Display) {
        tracing::warn!(store = %self.dir().display(), "the system prompt's KV was not kept: {e}");
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
        let partial = path.with_extension(format!("{EXTENSION}.{}.{PART}", std::process::id()));
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
    /// Also removes temporary files older than [`STALE_PART`]: writes a process did not
    /// finish (it was killed), which no bound would count otherwise.
    fn trim(&self) {
        let Ok(read) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let files: Vec<(SystemTime, u64, PathBuf)> = read
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        let stale = SystemTime::now()
            .checked_sub(STALE_PART)
            .unwrap_or(UNIX_EPOCH);
        for (modified, _, path) in &files {
            if path.extension().is_some_and(|x| x == PART) && *modified < stale {
                let _ = std::fs::remove_file(path);
            }
        }
        let mut entries: Vec<_> = files
            .into_iter()
            .filter(|(_, _, path)| path.extension().is_some_and(|x| x == EXTENSION))
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

/// An entry whose key and tokens matched: its positions, and its layers read from the file
/// on demand ([`KvSource`]), so a restore holds one layer beside the cache, not the whole
/// file twice.
#[derive(Debug)]
pub struct StoredPrefix {
    file: File,
    /// Where the tensor data starts: after the length and the header.
    data_start: u64,
    data_len: u64,
    tensors: HashMap<String, TensorInfo>,
    next_position: Vec<u32>,
    n_layers: usize,
}

/// A tensor's entry in a safetensors header.
#[derive(Debug, serde::Deserialize)]
struct TensorInfo {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (u64, u64),
}

impl StoredPrefix {
    /// Opens an entry and checks its header, key and tokens.
    fn open(path: &Path, key: &str, tokens: &[u32]) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut n = [0u8; 8];
        file.read_exact_at(&mut n, 0)
            .map_err(|e| Error::io(path, e))?;
        let header_len = u64::from_le_bytes(n);
        if header_len > MAX_HEADER_BYTES || 8 + header_len > file_len {
            return Err(Error::invalid_input(format!(
                "a header of {header_len} bytes in a file of {file_len}"
            )));
        }
        let mut header = vec![0u8; header_len as usize];
        file.read_exact_at(&mut header, 8)
            .map_err(|e| Error::io(path, e))?;
        let mut raw: HashMap<String, serde_json::Value> = serde_json::from_slice(&header)
            .map_err(|e| Error::invalid_input_caused("its header", e))?;
        raw.remove("__metadata__");
        let tensors = raw
            .into_iter()
            .map(|(name, info)| {
                let info: TensorInfo = serde_json::from_value(info)
                    .map_err(|e| Error::invalid_input_caused(format!("tensor {name:?}"), e))?;
                Ok((name, info))
            })
            .collect::<Result<HashMap<_, _>>>()?;
        let n_layers = (0..)
            .take_while(|i| {
                tensors.contains_key(&format!("k.{i}")) && tensors.contains_key(&format!("v.{i}"))
            })
            .count();
        if n_layers == 0 || tensors.len() != 3 + 2 * n_layers {
            return Err(Error::invalid_input(
                "its tensors are not key, tokens, next_position, k.0, v.0, …",
            ));
        }
        let mut prefix = StoredPrefix {
            file,
            data_start: 8 + header_len,
            data_len: file_len - 8 - header_len,
            tensors,
            next_position: Vec::new(),
            n_layers,
        };
        if prefix.tensor("key")?.to_vec1::<u8>()? != key.as_bytes() {
            return Err(Error::invalid_input("it was kept for another setup"));
        }
        if prefix.tensor("tokens")?.to_vec1::<u32>()? != tokens {
            return Err(Error::invalid_input("it was kept for other tokens"));
        }
        prefix.next_position = prefix.tensor("next_position")?.to_vec1::<u32>()?;
        Ok(prefix)
    }

    /// Reads one tensor, its size checked against its type and shape and the file.
    fn tensor(&self, name: &str) -> Result<Tensor> {
        let info = self
            .tensors
            .get(name)
            .ok_or_else(|| Error::invalid_input(format!("it has no tensor {name:?}")))?;
        let dtype = match info.dtype.as_str() {
            "F32" => DType::F32,
            "F16" => DType::F16,
            "BF16" => DType::BF16,
            "U32" => DType::U32,
            "U8" => DType::U8,
            other => {
                return Err(Error::invalid_input(format!(
                    "tensor {name:?} is of type {other}"
                )))
            }
        };
        let (start, end) = info.data_offsets;
        let elements = info.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let bytes = elements.and_then(|n| n.checked_mul(dtype.size_in_bytes()));
        if start > end || end > self.data_len || bytes != Some((end - start) as usize) {
            return Err(Error::invalid_input(format!(
                "tensor {name:?}: {:?} {:?} does not fit bytes {start}..{end} of {}",
                info.dtype, info.shape, self.data_len
            )));
        }
        let mut data = vec![0u8; (end - start) as usize];
        self.file
            .read_exact_at(&mut data, self.data_start + start)
            .map_err(|e| Error::invalid_input_caused(format!("reading tensor {name:?}"), e))?;
        Ok(Tensor::from_raw_buffer(
            &data,
            dtype,
            &info.shape,
            &Device::Cpu,
        )?)
    }
}

impl KvSource for StoredPrefix {
    fn next_position(&self) -> &[u32] {
        &self.next_position
    }

    fn n_layers(&self) -> usize {
        self.n_layers
    }

    fn layer(&mut self, i: usize) -> Result<(Tensor, Tensor)> {
        Ok((
            self.tensor(&format!("k.{i}"))?,
            self.tensor(&format!("v.{i}"))?,
        ))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(layers: usize, len: usize) -> Result<KvPrefix> {
        let layer = |i: usize| -> Result<(Tensor, Tensor)> {
            let k = Tensor::arange(0f32, (2 * len * 4) as f32, &Device::Cpu)?
                .affine(1.0, i as f64)?
                .reshape((1, 2, len, 4))?;
            Ok((k.clone(), k.neg()?))
        };
        Ok(KvPrefix {
            layers: (0..layers).map(layer).collect::<Result<_>>()?,
            next_position: (1..=len as u32).collect(),
        })
    }

    fn store(dir: &Path, setup: &str) -> PrefixStore {
        PrefixStore {
            dir: dir.to_path_buf(),
            setup: setup.into(),
        }
    }

    /// Every layer of `p`, or the first error.
    fn read_all(p: &mut StoredPrefix) -> Result<Vec<(Tensor, Tensor)>> {
        (0..p.n_layers()).map(|i| p.layer(i)).collect()
    }

    #[test]
    fn an_entry_reads_back_as_written_and_only_for_its_setup_and_tokens() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let tokens = [5u32, 6, 7];
        let kept = prefix(3, 3)?;
        store(dir.path(), "a").save(&tokens, &kept)?;
        let mut back = store(dir.path(), "a")
            .load(&tokens)
            .ok_or_else(|| Error::internal("no entry"))?;
        assert_eq!(back.next_position(), &kept.next_position[..]);
        for (i, (k, v)) in read_all(&mut back)?.iter().enumerate() {
            let flat = |t: &Tensor| t.flatten_all()?.to_vec1::<f32>();
            assert_eq!(k.dims(), kept.layers[i].0.dims());
            assert_eq!(flat(k)?, flat(&kept.layers[i].0)?);
            assert_eq!(flat(v)?, flat(&kept.layers[i].1)?);
        }
        assert!(store(dir.path(), "b").load(&tokens).is_none());
        assert!(store(dir.path(), "a").load(&tokens[..2]).is_none());
        Ok(())
    }

    #[test]
    fn damaged_entries_are_misses_or_errors_never_panics() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let tokens = [1u32, 2];
        let s = store(dir.path(), "a");
        s.save(&tokens, &prefix(2, 2)?)?;
        let (path, _) = s.entry(&tokens);
        let good = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let mut n = [0u8; 8];
        n.copy_from_slice(&good[..8]);
        let header_len = u64::from_le_bytes(n) as usize;
        let header = String::from_utf8_lossy(&good[8..8 + header_len]).into_owned();
        let data = &good[8 + header_len..];
        let with_header = |h: &str| {
            let mut b = (h.len() as u64).to_le_bytes().to_vec();
            b.extend_from_slice(h.as_bytes());
            b.extend_from_slice(data);
            b
        };
        let mut corpus: Vec<Vec<u8>> = vec![Vec::new()];
        for cut in [
            1,
            7,
            8,
            9,
            8 + header_len / 2,
            8 + header_len,
            good.len() - 1,
        ] {
            corpus.push(good[..cut].to_vec());
        }
        for n in [0u64, u64::MAX, MAX_HEADER_BYTES + 1, good.len() as u64] {
            let mut b = good.clone();
            b[..8].copy_from_slice(&n.to_le_bytes());
            corpus.push(b);
        }
        let first_offsets = header
            .find("\"data_offsets\":[")
            .ok_or_else(|| Error::internal("no offsets"))?;
        for (from, to) in [
            ("\"F32\"", "\"F64\""),
            ("\"data_offsets\":[", "\"data_offsets\":[99999999,"),
            ("\"shape\":[", "\"shape\":[1099511627776,1099511627776,"),
            ("\"shape\":[", "\"shape\":[0,"),
            (
                "{",
                "{\"extra\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},",
            ),
            ("\"next_position\"", "\"next_positions\""),
            ("\"k.1\"", "\"k.7\""),
        ] {
            corpus.push(with_header(&header.replacen(from, to, 1)));
        }
        corpus.push(with_header(&header[..first_offsets]));
        corpus.push(with_header("[]"));
        for bytes in corpus {
            std::fs::write(&path, &bytes).map_err(|e| Error::io(&path, e))?;
            if let Some(mut p) = s.load(&tokens) {
                // Readable header, key and tokens: the layers either read whole or fail.
                if let Ok(layers) = read_all(&mut p) {
                    assert_eq!(layers.len(), 2);
                }
            } else {
                assert!(!path.exists(), "a broken entry is removed");
            }
        }
        Ok(())
    }

    #[test]
    fn the_directory_keeps_the_most_recent_entries() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let s = store(dir.path(), "a");
        for t in 0..MAX_ENTRIES as u32 + 3 {
            s.save(&[t], &prefix(1, 1)?)?;
            // Modification times must differ for the order to be known.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let left = std::fs::read_dir(dir.path())
            .map_err(|e| Error::io(dir.path(), e))?
            .count();
        assert_eq!(left, MAX_ENTRIES);
        assert!(s.load(&[0]).is_none(), "the oldest went first");
        assert!(s.load(&[MAX_ENTRIES as u32 + 2]).is_some());
        Ok(())
    }

    #[test]
    fn a_background_save_is_written_once_waited_for_and_stale_writes_are_removed() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let s = store(dir.path(), "a");
        let written = prefix(3, 5)?;
        // A write a killed process left an hour and more ago, and one under way now.
        let stale = dir.path().join(format!("old.{EXTENSION}.1.{PART}"));
        let fresh = dir.path().join(format!("new.{EXTENSION}.2.{PART}"));
        for part in [&stale, &fresh] {
            std::fs::write(part, b"half").map_err(|e| Error::io(part, e))?;
        }
        File::options()
            .append(true)
            .open(&stale)
            .and_then(|f| f.set_modified(SystemTime::now() - STALE_PART * 2))
            .map_err(|e| Error::io(&stale, e))?;

        s.save_in_background(&[7, 8, 9, 10, 11], prefix(3, 5)?)?
            .wait();
        let mut read = s
            .load(&[7, 8, 9, 10, 11])
            .ok_or_else(|| Error::internal("a miss"))?;
        for (i, (k, v)) in read_all(&mut read)?.iter().enumerate() {
            let (wk, wv) = &written.layers[i];
            assert_eq!(k.dims(), wk.dims());
            assert_eq!(
                k.flatten_all()?.to_vec1::<f32>()?,
                wk.flatten_all()?.to_vec1::<f32>()?
            );
            assert_eq!(
                v.flatten_all()?.to_vec1::<f32>()?,
                wv.flatten_all()?.to_vec1::<f32>()?
            );
        }
        assert!(!stale.exists(), "a write that never finished is removed");
        assert!(fresh.exists(), "one that may still be under way is left");
        // Dropping a pending save waits for it too.
        drop(s.save_in_background(&[1], prefix(1, 1)?)?);
        assert!(s.load(&[1]).is_some());
        Ok(())
    }
}
