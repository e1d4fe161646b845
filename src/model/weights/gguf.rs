//! GGUF files: metadata read through helpers that name the missing key, tensors read on
//! demand.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;

use super::activations::LayerStorage;
use super::mapped::{MappedFile, MappedPages};
use crate::error::{Error, Result};

/// Which file of a llama.cpp GGUF pair holds a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgufPart {
    /// The text model.
    Text,
    /// The vision projector (`mmproj`).
    Mmproj,
}

/// GGUF metadata with the file it came from, read through helpers that name a
/// missing or mistyped key.
#[derive(Debug, Clone, Copy)]
pub struct GgufMeta<'a> {
    /// The file, for error messages.
    pub path: &'a Path,
    /// Its metadata.
    pub metadata: &'a HashMap<String, Value>,
}

impl GgufMeta<'_> {
    pub(crate) fn error(&self, reason: String) -> Error {
        Error::model_file(self.path, reason)
    }

    fn get(&self, key: &str) -> Result<&Value> {
        self.metadata
            .get(key)
            .ok_or_else(|| self.error(format!("metadata key {key} is missing")))
    }

    /// An unsigned integer value (any integer width).
    pub fn usize(&self, key: &str) -> Result<usize> {
        let v = self.get(key)?;
        let n: Option<u64> = match v {
            Value::U8(x) => Some(*x as u64),
            Value::U16(x) => Some(*x as u64),
            Value::U32(x) => Some(*x as u64),
            Value::U64(x) => Some(*x),
            Value::I8(x) => u64::try_from(*x).ok(),
            Value::I16(x) => u64::try_from(*x).ok(),
            Value::I32(x) => u64::try_from(*x).ok(),
            Value::I64(x) => u64::try_from(*x).ok(),
            _ => None,
        };
        n.and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
            self.error(format!(
                "metadata key {key} is {v:?}, expected an unsigned integer"
            ))
        })
    }

    /// A floating-point value (f32 or f64).
    pub fn f64(&self, key: &str) -> Result<f64> {
        match self.get(key)? {
            Value::F32(x) => Ok(*x as f64),
            Value::F64(x) => Ok(*x),
            v => Err(self.error(format!("metadata key {key} is {v:?}, expected a float"))),
        }
    }

    /// A string value.
    pub fn string(&self, key: &str) -> Result<&str> {
        match self.get(key)? {
            Value::String(s) => Ok(s),
            v => Err(self.error(format!("metadata key {key} is {v:?}, expected a string"))),
        }
    }

    /// An array of integers.
    pub fn u32_array(&self, key: &str) -> Result<Vec<u32>> {
        self.array(key, "unsigned integers", |v| match v {
            Value::U32(x) => Some(*x),
            Value::I32(x) if *x >= 0 => Some(*x as u32),
            Value::U64(x) if *x <= u32::MAX as u64 => Some(*x as u32),
            Value::I64(x) if *x >= 0 && *x <= u32::MAX as i64 => Some(*x as u32),
            _ => None,
        })
    }

    /// An array of booleans.
    pub fn bool_array(&self, key: &str) -> Result<Vec<bool>> {
        self.array(key, "booleans", |v| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        })
    }

    /// An array whose every item `item` reads; `what` names the items it expects, for errors.
    fn array<T>(
        &self,
        key: &str,
        what: &str,
        item: impl Fn(&Value) -> Option<T>,
    ) -> Result<Vec<T>> {
        let Value::Array(items) = self.get(key)? else {
            return Err(self.error(format!("metadata key {key} is not an array")));
        };
        items
            .iter()
            .map(|v| {
                item(v).ok_or_else(|| {
                    self.error(format!("metadata key {key} holds {v:?}, expected {what}"))
                })
            })
            .collect()
    }
}

/// The metadata and tensor infos of the GGUF file `file` (at `path`, for errors), read from
/// its memory map when there is one, else through a buffer. candle's reader asks for the
/// stream position at every string: on a bare `File` that is a `read` and an `lseek`
/// system call per vocabulary entry (about three million for Qwen's 151k tokens and
/// merges, seconds of start-up); on the mapped bytes it is none.
pub(crate) fn read_content(
    path: &Path,
    file: &std::fs::File,
    map: Option<&MappedFile>,
) -> Result<gguf_file::Content> {
    let content = match map {
        Some(map) => gguf_file::Content::read(&mut std::io::Cursor::new(map.bytes())),
        None => gguf_file::Content::read(&mut std::io::BufReader::with_capacity(1 << 16, file)),
    };
    content.map_err(|e| Error::model_file_caused(path, "not a readable GGUF file", e))
}

/// One open GGUF file: its metadata and tensor index, read once; tensors are read on demand.
/// On the CPU quantized tensors are read in place from a memory map of the file (see
/// `mapped.rs`); where the file cannot be mapped they are copied as before.
pub(crate) struct GgufFile {
    /// The file, for error messages.
    pub(crate) path: PathBuf,
    file: std::fs::File,
    /// The whole file, mapped read-only, when mapping works.
    map: Option<MappedFile>,
    /// Metadata and tensor infos.
    pub(crate) content: gguf_file::Content,
}

impl GgufFile {
    pub(crate) fn open(path: &Path) -> Result<Self> {
        crate::model::file_checks::check_gguf(path)?;
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let map = MappedFile::new(&file).ok();
        let content = read_content(path, &file, map.as_ref())?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            file,
            map,
            content,
        })
    }

    /// How the layers' matrices (`blk.*`, rank 2) are stored: quantized if any is (a
    /// Q4_K_M file keeps a few in other types), else half if any is, else f32 (also for a
    /// file without layers, such as a vision file, whose blocks are `v.blk.*`).
    pub(crate) fn layer_storage(&self) -> LayerStorage {
        self.content
            .tensor_infos
            .iter()
            .filter(|(name, info)| name.starts_with("blk.") && info.shape.rank() == 2)
            .map(|(_, info)| match info.ggml_dtype {
                GgmlDType::F32 => LayerStorage::F32,
                GgmlDType::F16 | GgmlDType::BF16 => LayerStorage::Half,
                _ => LayerStorage::Quantized,
            })
            .max()
            .unwrap_or(LayerStorage::F32)
    }

    /// Where tensor `name`'s bytes start in the file, if it fits in a `usize`.
    fn data_offset(&self, name: &str) -> Option<usize> {
        let info = self.content.tensor_infos.get(name)?;
        usize::try_from(self.content.tensor_data_offset.checked_add(info.offset)?).ok()
    }

    /// Tensor `name` read in place from the mapped file, with its pages.
    fn read_mapped(&self, name: &str) -> Option<(QTensor, MappedPages)> {
        let info = self.content.tensor_infos.get(name)?;
        self.map
            .as_ref()?
            .qtensor(self.data_offset(name)?, info.ggml_dtype, &info.shape)
    }

    /// The pages of tensor `name` when [`GgufFile::read`] reads it in place on the CPU.
    pub(crate) fn pages(&self, name: &str) -> Option<MappedPages> {
        self.read_mapped(name).map(|(_, pages)| pages)
    }

    /// The mapped file, when mapping worked.
    #[cfg(test)]
    pub(crate) fn mapped(&self) -> Option<&MappedFile> {
        self.map.as_ref()
    }

    /// Drop this process's pages of the mapped file: after loading, every tensor that was
    /// copied (norms, float matrices, converted ones) is no longer read from it, and the
    /// matrices read in place fault their pages back in when a kernel reads them.
    pub(crate) fn release_pages(&self) {
        if let Some(map) = &self.map {
            map.release_all();
        }
    }

    pub(crate) fn meta(&self) -> GgufMeta<'_> {
        GgufMeta {
            path: &self.path,
            metadata: &self.content.metadata,
        }
    }

    pub(crate) fn shape(&self, name: &str) -> Option<&[usize]> {
        self.content.tensor_infos.get(name).map(|t| t.shape.dims())
    }

    pub(crate) fn read(&self, name: &str, device: &Device) -> Result<QTensor> {
        if !self.content.tensor_infos.contains_key(name) {
            return Err(Error::model_file(
                &self.path,
                format!("tensor {name} is missing"),
            ));
        }
        if device.is_cpu() {
            if let Some((tensor, _)) = self.read_mapped(name) {
                return Ok(tensor);
            }
        }
        // `&File` is Read + Seek, so reads need no lock and no mutable borrow.
        let mut reader = &self.file;
        self.content
            .tensor(&mut reader, name, device)
            .map_err(|e| Error::model_file_caused(&self.path, format!("tensor {name}"), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::{ensure, Context};
    use candle_core::Tensor;

    /// The layers' storage picks the default activation type on CUDA: an f16 text file is
    /// half, a Q8_0 one quantized, and a vision file's `v.blk.*` matrices do not count.
    #[test]
    fn a_files_layer_storage_is_read_from_its_blocks() -> anyhow::Result<()> {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures");
        let open = |name: &str| GgufFile::open(&fixtures.join(name));
        ensure!(open("tiny-a/tiny-a-f16.gguf")?.layer_storage() == LayerStorage::Half);
        ensure!(open("tiny-b/tiny-b-q8_0.gguf")?.layer_storage() == LayerStorage::Quantized);
        ensure!(open("tiny-b/mmproj-tiny-b-q8_0.gguf")?.layer_storage() == LayerStorage::F32);
        Ok(())
    }

    /// A GGUF file holding one random Q6_K matrix, and that matrix.
    fn q6k_file(dir: &Path, rows: usize, cols: usize) -> anyhow::Result<(PathBuf, QTensor)> {
        let w = Tensor::randn(0f32, 0.02, (rows, cols), &Device::Cpu)?;
        let q = QTensor::quantize(&w, GgmlDType::Q6K)?;
        let path = dir.join("q6k.gguf");
        let mut f = std::fs::File::create(&path)?;
        gguf_file::write(&mut f, &[], &[("m", &q)])?;
        Ok((path, q))
    }

    #[test]
    fn a_truncated_q6k_matrix_is_an_error_naming_it() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (rows, cols) = (64, 256);
        let (path, _) = q6k_file(dir.path(), rows, cols)?;
        let len = std::fs::metadata(&path)?.len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)?
            .set_len(len - 100)?;
        // The header check at open already sees the tensor run past the end of the file.
        let result = GgufFile::open(&path).and_then(|f| f.read("m", &Device::Cpu));
        let err = result
            .err()
            .context("a truncated tensor was read")?
            .to_string();
        ensure!(
            err.contains("tensor m") && err.contains("q6k.gguf"),
            "{err}"
        );
        Ok(())
    }
}
