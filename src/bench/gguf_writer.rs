//! A GGUF writer that streams tensor data: the header (metadata and every tensor's name,
//! shape, type and offset) is written first from sizes known in advance, then each
//! tensor's bytes as they are produced.
//!
//! candle's `gguf_file::write` needs every tensor in memory at once (a 2B Q8_0 model is
//! 2 GB, an 8B one 9 GB); this writer holds one chunk of one tensor. The bytes are the
//! ones `gguf_file::write` produces (checked by a test), except that the version field
//! is 3, as llama.cpp's converter writes it, instead of candle's 2.

use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;

use crate::error::{Error, Result};

/// `GGUF` read as a little-endian u32.
const GGUF_MAGIC: u32 = 0x4655_4747;
/// The version llama.cpp's converter writes.
pub const GGUF_VERSION: u32 = 3;
/// Tensor data alignment (GGUF's default; `general.alignment` is not written).
pub const GGUF_ALIGNMENT: usize = 32;

/// ggml's type id of a storage type (`ggml_type` in ggml.h).
pub fn ggml_type_id(dtype: GgmlDType) -> u32 {
    match dtype {
        GgmlDType::F32 => 0,
        GgmlDType::F16 => 1,
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q4_1 => 3,
        GgmlDType::Q5_0 => 6,
        GgmlDType::Q5_1 => 7,
        GgmlDType::Q8_0 => 8,
        GgmlDType::Q8_1 => 9,
        GgmlDType::Q2K => 10,
        GgmlDType::Q3K => 11,
        GgmlDType::Q4K => 12,
        GgmlDType::Q5K => 13,
        GgmlDType::Q6K => 14,
        GgmlDType::Q8K => 15,
        GgmlDType::BF16 => 30,
    }
}

/// Bytes a tensor of `elements` values takes in `dtype`, or an error when the count is
/// not a whole number of blocks.
pub fn storage_bytes(name: &str, elements: usize, dtype: GgmlDType) -> Result<usize> {
    let block = dtype.block_size();
    if !elements.is_multiple_of(block) {
        return Err(Error::tensor(
            name,
            format!("{elements} values are not whole {dtype:?} blocks of {block}"),
        ));
    }
    Ok(elements / block * dtype.type_size())
}

/// One tensor of a GGUF file to be written: its name, its shape in candle's (row-major)
/// order, and its storage type.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufTensorInfo {
    /// The GGUF tensor name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Row-major shape; the file stores it reversed (ggml's `ne`).
    pub shape: Vec<usize>,
    /// Storage type.
    pub dtype: GgmlDType,
}

impl GgufTensorInfo {
    /// Number of values.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes of its data.
    pub fn bytes(&self) -> Result<usize> {
        storage_bytes(&self.name, self.elements(), self.dtype)
    }
}

fn padding(len: usize) -> usize {
    (GGUF_ALIGNMENT - len % GGUF_ALIGNMENT) % GGUF_ALIGNMENT
}

fn write_string<W: Write>(w: &mut W, s: &str) -> std::io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

fn value_type_id(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn write_value<W: Write>(w: &mut W, key: &str, v: &Value) -> Result<()> {
    let io = |e: std::io::Error| Error::internal_caused(format!("writing GGUF key {key}"), e);
    match v {
        Value::U8(x) => w.write_all(&[*x]).map_err(io)?,
        Value::I8(x) => w.write_all(&x.to_le_bytes()).map_err(io)?,
        Value::U16(x) => w.write_all(&x.to_le_bytes()).map_err(io)?,
        Value::I16(x) => w.write_all(&x.to_le_bytes()).map_err(io)?,
        Value::U32(x) => w.write_all(&x.to_le_bytes()).map_err(io)?,
        Value::I32(x) => w.write_all(&x.to_le_bytes()).map_err(io)?,
        Value::U64(x) => w.write_all(&x.to_le_bytes()).map_err(io)?,
        Value::I64(x) => w.write_all(&x.to_le_bytes()).map_err(io)?,
        Value::F32(x) => w.write_all(&x.to_le_bytes()).map_err(io)?,
        Value::F64(x) => w.write_all(&x.to_le_bytes()).map_err(io)?,
        Value::Bool(x) => w.write_all(&[u8::from(*x)]).map_err(io)?,
        Value::String(s) => write_string(w, s).map_err(io)?,
        Value::Array(items) => {
            let elem_type = items.first().map(value_type_id).unwrap_or(4);
            if items.iter().any(|i| value_type_id(i) != elem_type) {
                return Err(Error::invalid_input(format!(
                    "GGUF key {key}: an array mixes value types"
                )));
            }
            w.write_all(&elem_type.to_le_bytes()).map_err(io)?;
            w.write_all(&(items.len() as u64).to_le_bytes())
                .map_err(io)?;
            for item in items {
                write_value(w, key, item)?;
            }
        }
    }
    Ok(())
}

/// The header bytes of a GGUF file: magic, version, counts, metadata, tensor infos and
/// the padding up to the data section. Returns the bytes and each tensor's data size.
pub fn header_bytes(
    metadata: &[(String, Value)],
    tensors: &[GgufTensorInfo],
) -> Result<(Vec<u8>, Vec<usize>)> {
    let mut w: Vec<u8> = Vec::new();
    let io = |e: std::io::Error| Error::internal_caused("writing a GGUF header", e);
    w.write_all(&GGUF_MAGIC.to_le_bytes()).map_err(io)?;
    w.write_all(&GGUF_VERSION.to_le_bytes()).map_err(io)?;
    w.write_all(&(tensors.len() as u64).to_le_bytes())
        .map_err(io)?;
    w.write_all(&(metadata.len() as u64).to_le_bytes())
        .map_err(io)?;
    for (key, value) in metadata {
        write_string(&mut w, key).map_err(io)?;
        w.write_all(&value_type_id(value).to_le_bytes())
            .map_err(io)?;
        write_value(&mut w, key, value)?;
    }
    let mut offset = 0usize;
    let mut sizes = Vec::with_capacity(tensors.len());
    for t in tensors {
        write_string(&mut w, &t.name).map_err(io)?;
        w.write_all(&(t.shape.len() as u32).to_le_bytes())
            .map_err(io)?;
        for &d in t.shape.iter().rev() {
            w.write_all(&(d as u64).to_le_bytes()).map_err(io)?;
        }
        w.write_all(&ggml_type_id(t.dtype).to_le_bytes())
            .map_err(io)?;
        w.write_all(&(offset as u64).to_le_bytes()).map_err(io)?;
        let size = t.bytes()?;
        sizes.push(size);
        offset += size + padding(size);
    }
    let pad = padding(w.len());
    w.extend(std::iter::repeat_n(0u8, pad));
    Ok((w, sizes))
}

/// Writes one GGUF file: [`GgufStreamWriter::create`] writes the header, then
/// [`write_data`](GgufStreamWriter::write_data) takes each tensor's bytes in the order
/// of the header, in as many pieces as the caller likes, and
/// [`finish`](GgufStreamWriter::finish) checks that every byte arrived.
#[derive(Debug)]
pub struct GgufStreamWriter {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    sizes: Vec<usize>,
    names: Vec<String>,
    /// Tensor being written and bytes of it written so far.
    current: usize,
    written: usize,
}

impl GgufStreamWriter {
    /// Create `path` and write its header.
    pub fn create(
        path: &Path,
        metadata: &[(String, Value)],
        tensors: &[GgufTensorInfo],
    ) -> Result<Self> {
        let (header, sizes) = header_bytes(metadata, tensors)?;
        let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        out.write_all(&header).map_err(|e| Error::io(path, e))?;
        Ok(GgufStreamWriter {
            path: path.to_path_buf(),
            out,
            sizes,
            names: tensors.iter().map(|t| t.name.clone()).collect(),
            current: 0,
            written: 0,
        })
    }

    /// Append `bytes` to the data of the current tensor; moves on to the next tensor
    /// (after writing the alignment padding) when this one is complete.
    pub fn write_data(&mut self, bytes: &[u8]) -> Result<()> {
        let Some(&size) = self.sizes.get(self.current) else {
            return Err(Error::internal(format!(
                "{}: data written past the last tensor",
                self.path.display()
            )));
        };
        if self.written + bytes.len() > size {
            return Err(Error::tensor(
                self.names[self.current].clone(),
                format!(
                    "{} bytes written, the header says {size}",
                    self.written + bytes.len()
                ),
            ));
        }
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, e))?;
        self.written += bytes.len();
        if self.written == size {
            let pad = [0u8; GGUF_ALIGNMENT];
            self.out
                .write_all(&pad[..padding(size)])
                .map_err(|e| Error::io(&self.path, e))?;
            self.current += 1;
            self.written = 0;
        }
        Ok(())
    }

    /// Flush and sync the file; errors when a tensor is incomplete.
    pub fn finish(mut self) -> Result<()> {
        if self.current != self.sizes.len() {
            return Err(Error::internal(format!(
                "{}: tensor {} is incomplete",
                self.path.display(),
                self.names
                    .get(self.current)
                    .map(String::as_str)
                    .unwrap_or("?")
            )));
        }
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        let _ = self.out.stream_position();
        self.out
            .get_ref()
            .sync_all()
            .map_err(|e| Error::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::{gguf_file, QTensor};
    use candle_core::{Device, Tensor};

    #[test]
    fn streamed_bytes_equal_candles_writer_apart_from_the_version() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let a = Tensor::arange(0f32, 64.0, &dev)?.reshape((2, 32))?;
        let b = Tensor::arange(0f32, 256.0 * 2.0, &dev)?.reshape((2, 256))?;
        let qa = QTensor::quantize(&a, GgmlDType::Q8_0)?;
        let qb = QTensor::quantize(&b, GgmlDType::Q4K)?;
        let qc = QTensor::quantize(
            &Tensor::ones(7, candle_core::DType::F32, &dev)?,
            GgmlDType::F32,
        )?;
        let metadata = vec![
            (
                "general.architecture".to_string(),
                Value::String("qwen3vl".into()),
            ),
            (
                "x.sections".to_string(),
                Value::Array(vec![Value::I32(1), Value::I32(2)]),
            ),
            ("x.flag".to_string(), Value::Bool(true)),
            ("x.f".to_string(), Value::F32(0.5)),
        ];
        let mut reference = std::io::Cursor::new(Vec::new());
        let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
        gguf_file::write(&mut reference, &md, &[("a", &qa), ("b", &qb), ("c", &qc)])?;
        let mut reference = reference.into_inner();
        reference[4..8].copy_from_slice(&GGUF_VERSION.to_le_bytes());

        let dir = tempfile::tempdir()?;
        let path = dir.path().join("x.gguf");
        let infos = [("a", &qa), ("b", &qb), ("c", &qc)]
            .iter()
            .map(|(n, q)| GgufTensorInfo {
                name: n.to_string(),
                shape: q.shape().dims().to_vec(),
                dtype: q.dtype(),
            })
            .collect::<Vec<_>>();
        let mut w = GgufStreamWriter::create(&path, &metadata, &infos)?;
        for q in [&qa, &qb, &qc] {
            let data = q.data()?;
            // In two pieces, as the generator writes row chunks.
            let (x, y) = data.split_at(data.len() / 2);
            w.write_data(x)?;
            w.write_data(y)?;
        }
        w.finish()?;
        let ours = std::fs::read(&path)?;
        assert_eq!(ours, reference);
        let content = gguf_file::Content::read(&mut std::fs::File::open(&path)?)?;
        assert_eq!(content.tensor_infos["b"].ggml_dtype, GgmlDType::Q4K);
        Ok(())
    }

    #[test]
    fn incomplete_tensor_is_an_error() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let info = GgufTensorInfo {
            name: "t".into(),
            shape: vec![4],
            dtype: GgmlDType::F32,
        };
        let mut w = GgufStreamWriter::create(&dir.path().join("t.gguf"), &[], &[info])?;
        w.write_data(&[0u8; 8])?;
        assert!(w.finish().is_err());
        Ok(())
    }
}
