//! Checks on a model file's header before candle reads it.
//!
//! candle's readers trust some header values: a GGUF `general.alignment` of 0 divides by
//! zero, a metadata array of millions of one-byte elements becomes millions of 32-byte
//! values (a 64 MB array cost 2 GB), and tensor data ranges are not checked against each
//! other. [`check_gguf`] walks the header itself — skipping values, allocating nothing in
//! proportion to the counts it reads — and [`check_safetensors`] parses the JSON header
//! with a size cap, so a forged file is an [`Error::ModelFile`] naming it, before candle
//! sees it.

use std::io::{BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::{BoxError, Error, Result};
use crate::input_file::{self, InputKind};

/// Most elements one GGUF metadata array may hold. Qwen's vocabulary arrays hold ~152k.
pub const MAX_GGUF_ARRAY_ELEMENTS: u64 = 1 << 22;
/// Most elements all GGUF metadata arrays may hold together.
pub const MAX_GGUF_METADATA_ELEMENTS: u64 = 1 << 23;
/// Longest GGUF metadata string (the chat template is the longest real one, a few KB).
pub const MAX_GGUF_STRING_BYTES: u64 = 16 << 20;
/// Most tensors or metadata entries a GGUF header may declare.
pub const MAX_GGUF_ENTRIES: u64 = 1 << 20;
/// Largest safetensors JSON header (a 2B model's is ~100 KB).
pub const MAX_SAFETENSORS_HEADER_BYTES: u64 = 64 << 20;
/// GGML's maximum tensor rank.
const GGML_MAX_DIMS: u32 = 4;
/// llama.cpp's default data alignment when `general.alignment` is absent.
const GGUF_DEFAULT_ALIGNMENT: u64 = 32;

/// Longest skip [`Header`] reads through its buffer rather than seeking over.
const SKIP_BY_READING: u64 = 1 << 16;

struct Header<R> {
    reader: R,
    path: std::path::PathBuf,
    file_len: u64,
    wide: bool,
    array_elements: u64,
    /// Bytes read or skipped so far: the position, counted here because asking the
    /// reader costs an `lseek` per call (per vocabulary string: seconds for Qwen's).
    pos: u64,
}

impl<R: Read + Seek> Header<R> {
    fn bad(&self, reason: impl Into<String>) -> Error {
        Error::model_file(&self.path, reason.into())
    }

    /// Fill `buf`; where the file ends first, `truncated` is the reason, and any read
    /// error is kept as the cause.
    fn read_exact(&mut self, buf: &mut [u8], truncated: &str) -> Result<()> {
        self.reader.read_exact(buf).map_err(|e| {
            let reason = if e.kind() == ErrorKind::UnexpectedEof {
                truncated
            } else {
                "reading the GGUF header"
            };
            Error::model_file_caused(&self.path, reason, e)
        })?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut buf = [0u8; N];
        self.read_exact(&mut buf, "GGUF header is truncated")?;
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes::<4>()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes::<8>()?))
    }

    /// A length or count: u32 in GGUF v1, u64 after.
    fn len(&mut self) -> Result<u64> {
        if self.wide {
            self.u64()
        } else {
            self.u32().map(u64::from)
        }
    }

    fn position(&mut self) -> Result<u64> {
        Ok(self.pos)
    }

    fn remaining(&mut self) -> Result<u64> {
        Ok(self.file_len.saturating_sub(self.position()?))
    }

    fn skip(&mut self, n: u64) -> Result<()> {
        if n > self.remaining()? {
            return Err(self.bad(format!(
                "GGUF header claims {n} bytes past the end of the file"
            )));
        }
        // Short skips (a vocabulary string) read through the buffer: a seek would drop
        // it and cost a system call each.
        if n <= SKIP_BY_READING {
            let copied = std::io::copy(&mut (&mut self.reader).take(n), &mut std::io::sink())
                .map_err(|e| Error::io(&self.path, e))?;
            if copied != n {
                return Err(self.bad("GGUF header is truncated"));
            }
        } else {
            let delta = i64::try_from(n).map_err(|_| self.bad("GGUF length overflows"))?;
            self.reader
                .seek(SeekFrom::Current(delta))
                .map_err(|e| Error::io(&self.path, e))?;
        }
        self.pos += n;
        Ok(())
    }

    fn string_len(&mut self) -> Result<u64> {
        let n = self.len()?;
        if n > MAX_GGUF_STRING_BYTES {
            return Err(self.bad(format!(
                "GGUF string of {n} bytes is over the {MAX_GGUF_STRING_BYTES} byte limit"
            )));
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String> {
        let n = self.string_len()?;
        if n > self.remaining()? {
            return Err(self.bad("GGUF string runs past the end of the file"));
        }
        let mut buf = vec![0u8; usize::try_from(n).unwrap_or(0)];
        self.read_exact(&mut buf, "GGUF header is truncated")?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Skips one value of type `ty`; returns its u32 value when it is one (for alignment).
    fn skip_value(&mut self, ty: u32, depth: usize) -> Result<Option<u64>> {
        let fixed = |ty: u32| -> Option<u64> {
            match ty {
                0 | 1 | 7 => Some(1),
                2 | 3 => Some(2),
                4..=6 => Some(4),
                10..=12 => Some(8),
                _ => None,
            }
        };
        match ty {
            4 => return Ok(Some(u64::from(self.u32()?))),
            8 => {
                let n = self.string_len()?;
                self.skip(n)?;
            }
            9 => {
                if depth > 2 {
                    return Err(self.bad("GGUF metadata arrays nest too deeply"));
                }
                let elem = self.u32()?;
                let count = self.len()?;
                self.array_elements = self.array_elements.saturating_add(count);
                if count > MAX_GGUF_ARRAY_ELEMENTS
                    || self.array_elements > MAX_GGUF_METADATA_ELEMENTS
                {
                    return Err(self.bad(format!(
                        "GGUF metadata array of {count} elements is over the limit \
                         ({MAX_GGUF_ARRAY_ELEMENTS} per array, {MAX_GGUF_METADATA_ELEMENTS} in all)"
                    )));
                }
                match fixed(elem) {
                    Some(size) => self.skip(count.saturating_mul(size))?,
                    None => {
                        // Every element takes at least a length prefix: bound before walking.
                        if count > self.remaining()? {
                            return Err(self.bad("GGUF array runs past the end of the file"));
                        }
                        for _ in 0..count {
                            self.skip_value(elem, depth + 1)?;
                        }
                    }
                }
            }
            t => match fixed(t) {
                Some(size) => self.skip(size)?,
                None => return Err(self.bad(format!("GGUF metadata value type {t} is unknown"))),
            },
        }
        Ok(None)
    }
}

/// Block size (elements) and bytes per block of a GGML tensor type.
fn ggml_block(ty: u32) -> Option<(u64, u64)> {
    Some(match ty {
        0 => (1, 4),
        1 | 30 => (1, 2),
        2 => (32, 18),
        3 => (32, 20),
        6 => (32, 22),
        7 => (32, 24),
        8 => (32, 34),
        9 => (32, 36),
        10 => (256, 84),
        11 => (256, 110),
        12 => (256, 144),
        13 => (256, 176),
        14 => (256, 210),
        15 => (256, 292),
        _ => return None,
    })
}

/// Checks a GGUF file's header: magic and version, bounded counts, strings and arrays,
/// `general.alignment` a power of two, each tensor's rank, type and size, and that tensor
/// data ranges lie inside the file and do not overlap. Reads only the header.
pub fn check_gguf(path: &Path) -> Result<()> {
    let (file, file_len) = input_file::open(path, InputKind::ModelWeights)?;
    let mut h = Header {
        reader: BufReader::with_capacity(1 << 16, file),
        path: path.to_path_buf(),
        file_len,
        wide: true,
        array_elements: 0,
        pos: 0,
    };
    let mut magic = [0u8; 4];
    h.read_exact(&mut magic, "not a GGUF file (too short)")?;
    if &magic != b"GGUF" {
        return Err(h.bad("not a GGUF file (bad magic)"));
    }
    let version = h.u32()?;
    h.wide = match version {
        1 => false,
        2 | 3 => true,
        v => return Err(h.bad(format!("GGUF version {v} is not supported"))),
    };
    let tensor_count = h.len()?;
    let kv_count = h.len()?;
    if tensor_count > MAX_GGUF_ENTRIES || kv_count > MAX_GGUF_ENTRIES {
        return Err(h.bad(format!(
            "GGUF header declares {tensor_count} tensors and {kv_count} metadata entries \
             (limit {MAX_GGUF_ENTRIES})"
        )));
    }
    let mut alignment = GGUF_DEFAULT_ALIGNMENT;
    for _ in 0..kv_count {
        let key = h.string()?;
        let ty = h.u32()?;
        let value = h.skip_value(ty, 0)?;
        if key == "general.alignment" {
            alignment = match value {
                Some(a) if a > 0 && a.is_power_of_two() => a,
                Some(a) => {
                    return Err(h.bad(format!(
                        "general.alignment is {a}; it must be a power of two"
                    )))
                }
                None => return Err(h.bad("general.alignment is not a u32")),
            };
        }
    }
    let mut ranges: Vec<(u64, u64, String)> = Vec::new();
    for _ in 0..tensor_count {
        let name = h.string()?;
        let dims = h.u32()?;
        if dims > GGML_MAX_DIMS {
            return Err(h.bad(format!("tensor {name} has {dims} dimensions (max 4)")));
        }
        let mut elements: u64 = 1;
        for _ in 0..dims {
            let d = h.len()?;
            elements = elements
                .checked_mul(d)
                .ok_or_else(|| h.bad(format!("tensor {name}: shape overflows")))?;
        }
        let ty = h.u32()?;
        let offset = h.u64()?;
        let (block, block_bytes) = ggml_block(ty)
            .ok_or_else(|| h.bad(format!("tensor {name}: unknown GGML type {ty}")))?;
        if !elements.is_multiple_of(block) {
            return Err(h.bad(format!(
                "tensor {name}: {elements} elements is not a multiple of the type's block of {block}"
            )));
        }
        let bytes = (elements / block)
            .checked_mul(block_bytes)
            .ok_or_else(|| h.bad(format!("tensor {name}: size overflows")))?;
        ranges.push((offset, bytes, name));
    }
    let header_end = h.position()?;
    let data_start = header_end.div_ceil(alignment).saturating_mul(alignment);
    let data_len = file_len.saturating_sub(data_start);
    check_ranges(path, &mut ranges, data_len, "GGUF")
}

/// Every `(offset, length, name)` must fit in `data_len` bytes and none may overlap another.
fn check_ranges(
    path: &Path,
    ranges: &mut [(u64, u64, String)],
    data_len: u64,
    format: &str,
) -> Result<()> {
    for (offset, len, name) in ranges.iter() {
        if offset.checked_add(*len).is_none_or(|end| end > data_len) {
            return Err(Error::model_file(
                path,
                format!(
                    "{format} tensor {name}: data range {offset}..+{len} is outside the file's \
                     {data_len} data bytes (truncated or forged file)"
                ),
            ));
        }
    }
    ranges.sort_by_key(|r| r.0);
    for pair in ranges.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.0 + a.1 > b.0 && a.1 > 0 && b.1 > 0 {
            return Err(Error::model_file(
                path,
                format!("{format} tensors {} and {} overlap", a.2, b.2),
            ));
        }
    }
    Ok(())
}

/// Checks a safetensors file's header: its declared size, JSON shape, each tensor's dtype,
/// shape and byte range against the file, and that ranges do not overlap.
pub fn check_safetensors(path: &Path) -> Result<()> {
    let (mut file, file_len) = input_file::open(path, InputKind::ModelWeights)?;
    let bad = |reason: String| Error::model_file(path, reason);
    let caused = |reason: &str, e: BoxError| Error::model_file_caused(path, reason, e);
    let mut len_bytes = [0u8; 8];
    file.read_exact(&mut len_bytes)
        .map_err(|e| caused("not a safetensors file (too short)", e.into()))?;
    let header_len = u64::from_le_bytes(len_bytes);
    if header_len > MAX_SAFETENSORS_HEADER_BYTES || header_len > file_len.saturating_sub(8) {
        return Err(bad(format!(
            "safetensors header claims {header_len} bytes (file is {file_len}, limit \
             {MAX_SAFETENSORS_HEADER_BYTES})"
        )));
    }
    let mut header = vec![0u8; usize::try_from(header_len).unwrap_or(0)];
    file.read_exact(&mut header)
        .map_err(|e| caused("safetensors header is truncated", e.into()))?;
    let json: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&header)
        .map_err(|e| caused("safetensors header is not a JSON object", e.into()))?;
    let data_len = file_len - 8 - header_len;
    let mut ranges = Vec::new();
    for (name, info) in &json {
        if name == "__metadata__" {
            continue;
        }
        let dtype_bytes = match info.get("dtype").and_then(|d| d.as_str()) {
            Some("F64" | "I64" | "U64") => 8,
            Some("F32" | "I32" | "U32") => 4,
            Some("F16" | "BF16" | "I16" | "U16") => 2,
            Some("I8" | "U8" | "BOOL" | "F8_E4M3" | "F8_E5M2") => 1,
            other => {
                return Err(bad(format!(
                    "tensor {name}: dtype {other:?} is not supported"
                )))
            }
        };
        let shape: Vec<u64> = info
            .get("shape")
            .and_then(|s| s.as_array())
            .map(|a| a.iter().map(|d| d.as_u64()).collect::<Option<Vec<_>>>())
            .and_then(|s| s)
            .ok_or_else(|| bad(format!("tensor {name}: shape is not a list of sizes")))?;
        let offsets: Vec<u64> = info
            .get("data_offsets")
            .and_then(|s| s.as_array())
            .map(|a| a.iter().map(|d| d.as_u64()).collect::<Option<Vec<_>>>())
            .and_then(|s| s)
            .filter(|o| o.len() == 2 && o[0] <= o[1])
            .ok_or_else(|| bad(format!("tensor {name}: data_offsets is not [begin, end]")))?;
        let expected = shape
            .iter()
            .try_fold(dtype_bytes, |acc: u64, d| acc.checked_mul(*d))
            .ok_or_else(|| bad(format!("tensor {name}: shape overflows")))?;
        if offsets[1] - offsets[0] != expected {
            return Err(bad(format!(
                "tensor {name}: data_offsets span {} bytes, its shape needs {expected}",
                offsets[1] - offsets[0]
            )));
        }
        ranges.push((offsets[0], expected, name.clone()));
    }
    check_ranges(path, &mut ranges, data_len, "safetensors")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::testing::{failure, source_as};

    /// `bytes` written to a file `name` in a new temporary directory (removed when the
    /// returned handle drops).
    fn written(name: &str, bytes: &[u8]) -> Result<(tempfile::TempDir, std::path::PathBuf)> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("a temporary directory", e))?;
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))?;
        Ok((dir, path))
    }

    /// A GGUF file that ends inside its header names the file, says so, and keeps the
    /// reader's end-of-file error as its source.
    #[test]
    fn a_truncated_gguf_header_keeps_the_read_error_as_source() -> Result<()> {
        // The magic, then half of the version.
        let (_dir, path) = written("cut.gguf", b"GGUF\x03\x00")?;
        let err = failure(check_gguf(&path), "checking a truncated GGUF header")?;
        assert!(
            matches!(&err, Error::ModelFile { reason, .. } if reason == "GGUF header is truncated"),
            "{err:?}"
        );
        let eof: &std::io::Error = source_as(&err)?;
        assert_eq!(eof.kind(), ErrorKind::UnexpectedEof);
        let shown = format!(
            "model file {}: GGUF header is truncated: {eof}",
            path.display()
        );
        assert_eq!(err.to_string(), shown);
        Ok(())
    }

    /// A safetensors header that is not JSON reads as before (reason, then the parser's
    /// message) and keeps serde_json's error as its source.
    #[test]
    fn a_safetensors_header_that_is_not_json_keeps_the_parsers_error_as_source() -> Result<()> {
        let header = b"{\"a\": [";
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        let (_dir, path) = written("model.safetensors", &bytes)?;
        let err = failure(
            check_safetensors(&path),
            "checking a header that is not JSON",
        )?;
        let parser: &serde_json::Error = source_as(&err)?;
        assert_eq!(
            err.to_string(),
            format!(
                "model file {}: safetensors header is not a JSON object: {parser}",
                path.display()
            )
        );
        Ok(())
    }
}
