//! Quantized matrices read in place from a memory-mapped GGUF file, and the release of
//! their pages once candle has repacked them (ARCHITECTURE.md, decision 14).
//!
//! candle's CPU kernels keep a repacked copy of each quantized matrix (VNNI tiles, and
//! AMX tiles for Q4_K prefills where the CPU has AMX), built on the first matmul of each
//! kind and kept beside the original storage for the life of the tensor. Read into a
//! `Vec`, the original stays in anonymous memory although no kernel reads it again: a
//! 2B Q4_K_M model then holds the file twice. Here the original is the file's own pages,
//! mapped read-only and private: once a matmul of a kind has run (and so packed), its
//! pages are dropped with `madvise(MADV_DONTNEED)` ([`MappedPages::after_matmul`]). A
//! path that does read the original again (candle's unpacked kernels: Q6_K
//! matrix-vector products, Q8_0 on AVX2, embedding rows, `dequantize`) faults the same
//! bytes back in from the file: dropping is never a wrong answer, at worst a re-read.
//!
//! Half-precision matrices (the vision tower of an f16 `mmproj`) are read in place too:
//! `Linear` widens them per matmul, as it widened the f16 copy before, and drops their
//! pages after each one, so the tower is resident only while an image is encoded.
//!
//! The mapping is read-only, so nothing in this process writes to it; like every
//! memory-mapped model loader (llama.cpp, safetensors), it assumes the file is not
//! rewritten while the model is loaded.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8K, BlockQ8_0, BlockQ8_1, GgmlType,
};
use candle_core::quantized::{k_quants, GgmlDType, QStorage, QTensor, QuantizedType};
use candle_core::{CpuStorage, Shape};
use half::{bf16, f16};
use memmap2::Mmap;

/// A read-only memory map of a whole model file, shared by the tensors read from it.
#[derive(Debug, Clone)]
pub(crate) struct MappedFile {
    map: Arc<Mmap>,
}

impl MappedFile {
    /// Map `file` read-only.
    pub(crate) fn new(file: &std::fs::File) -> std::io::Result<Self> {
        // SAFETY: a read-only private mapping; the file is not written by this process
        // (see the module docs for files changed by others while loaded).
        let map = unsafe { Mmap::map(file)? };
        Ok(MappedFile { map: Arc::new(map) })
    }

    /// The whole file's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The `dtype` tensor of `shape` stored at `offset`, read in place; `None` when its
    /// bytes are out of the file or not aligned for the block type (the caller then
    /// reads a copy).
    pub(crate) fn qtensor(
        &self,
        offset: usize,
        dtype: GgmlDType,
        shape: &Shape,
    ) -> Option<(QTensor, MappedPages)> {
        let elems = shape.elem_count();
        if elems == 0 || !elems.is_multiple_of(dtype.block_size()) {
            return None;
        }
        let blocks = elems / dtype.block_size();
        let bytes = blocks.checked_mul(dtype.type_size())?;
        let storage: Box<dyn QuantizedType> = match dtype {
            GgmlDType::F32 => self.blocks::<f32>(offset, blocks)?,
            GgmlDType::F16 => self.blocks::<f16>(offset, blocks)?,
            GgmlDType::BF16 => self.blocks::<bf16>(offset, blocks)?,
            GgmlDType::Q4_0 => self.blocks::<BlockQ4_0>(offset, blocks)?,
            GgmlDType::Q4_1 => self.blocks::<BlockQ4_1>(offset, blocks)?,
            GgmlDType::Q5_0 => self.blocks::<BlockQ5_0>(offset, blocks)?,
            GgmlDType::Q5_1 => self.blocks::<BlockQ5_1>(offset, blocks)?,
            GgmlDType::Q8_0 => self.blocks::<BlockQ8_0>(offset, blocks)?,
            GgmlDType::Q8_1 => self.blocks::<BlockQ8_1>(offset, blocks)?,
            GgmlDType::Q2K => self.blocks::<BlockQ2K>(offset, blocks)?,
            GgmlDType::Q3K => self.blocks::<BlockQ3K>(offset, blocks)?,
            GgmlDType::Q4K => self.blocks::<BlockQ4K>(offset, blocks)?,
            GgmlDType::Q5K => self.blocks::<BlockQ5K>(offset, blocks)?,
            GgmlDType::Q6K => self.blocks::<BlockQ6K>(offset, blocks)?,
            GgmlDType::Q8K => self.blocks::<BlockQ8K>(offset, blocks)?,
        };
        let tensor = QTensor::new(QStorage::Cpu(storage), shape.clone()).ok()?;
        Some((tensor, self.pages(offset, bytes)))
    }

    fn pages(&self, offset: usize, len: usize) -> MappedPages {
        MappedPages {
            file: self.clone(),
            offset,
            len,
            seen: Arc::new(AtomicU8::new(0)),
        }
    }

    fn blocks<T: GgmlType + 'static>(
        &self,
        offset: usize,
        len: usize,
    ) -> Option<Box<dyn QuantizedType>> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        let end = offset.checked_add(bytes)?;
        if end > self.map.len()
            || !(self.map.as_ptr() as usize + offset).is_multiple_of(std::mem::align_of::<T>())
        {
            return None;
        }
        Some(Box::new(MappedBlocks::<T> {
            map: self.map.clone(),
            offset,
            len,
            owned: None,
            _blocks: PhantomData,
        }))
    }

    /// Drop this process's pages of the whole file (they are read again on access).
    pub(crate) fn release_all(&self) {
        self.release(0, self.map.len());
    }

    fn release(&self, offset: usize, len: usize) {
        if len == 0 {
            return;
        }
        // SAFETY: a read-only private file mapping that is never written: MADV_DONTNEED
        // only unmaps its pages, and the next access maps the file's bytes again.
        // Failure (an old kernel, another OS) only keeps the pages resident.
        #[cfg(unix)]
        unsafe {
            let _ =
                self.map
                    .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len);
        }
    }

    /// Bytes of the mapping resident in this process (from `/proc/self/smaps`); `None`
    /// where that file does not exist. For tests.
    #[cfg(test)]
    pub(crate) fn resident_bytes(&self) -> Option<u64> {
        resident_bytes_at(self.map.as_ptr() as usize)
    }
}

/// `Rss` of the mapping that contains `addr`, from `/proc/self/smaps`.
#[cfg(test)]
fn resident_bytes_at(addr: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = head.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&addr);
                continue;
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix("Rss:") {
                let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
                return Some(kb * 1024);
            }
        }
    }
    None
}

/// One matrix's bytes in a `MappedFile`, with the matmul kinds already run on it.
#[derive(Debug, Clone)]
pub struct MappedPages {
    file: MappedFile,
    offset: usize,
    len: usize,
    /// Bit per [`RowClass`] seen.
    seen: Arc<AtomicU8>,
}

/// The row counts at which candle's x86 kernels change how they read a matrix
/// (`quantized/repack_x86.rs`): one row (Q6_K stays unpacked, the fused decode gemv),
/// a few rows (VNNI tiles), 32 rows or more (AMX tiles for Q4_K). A class not listed
/// here only means a page re-read, never a wrong result.
#[derive(Debug, Clone, Copy)]
enum RowClass {
    One = 1,
    Few = 2,
    Many = 4,
}

/// Rows from which candle takes its AMX path for Q4_K.
const AMX_MIN_ROWS: usize = 32;

impl MappedPages {
    /// Call after a matmul of `rows` rows: the first time a kind of matmul has run
    /// (and candle has packed the matrix for it), drop the file pages it read.
    pub fn after_matmul(&self, rows: usize) {
        let class = match rows {
            0 => return,
            1 => RowClass::One,
            r if r < AMX_MIN_ROWS => RowClass::Few,
            _ => RowClass::Many,
        } as u8;
        if self.seen.fetch_or(class, Ordering::Relaxed) & class == 0 {
            self.release();
        }
    }

    /// Drop the pages now.
    pub fn release(&self) {
        self.file.release(self.offset, self.len);
    }
}

/// GGML blocks of type `T` read in place from a `MappedFile`; `owned` replaces them
/// if candle ever writes the storage (`from_float`: candle only does so on storage it
/// made itself, but the trait allows it).
struct MappedBlocks<T> {
    map: Arc<Mmap>,
    offset: usize,
    len: usize,
    owned: Option<Vec<T>>,
    _blocks: PhantomData<T>,
}

impl<T: GgmlType> MappedBlocks<T> {
    fn blocks(&self) -> &[T] {
        if let Some(v) = &self.owned {
            return v;
        }
        // SAFETY: `MappedFile::blocks` checked that `len` blocks from `offset` lie in the
        // mapping and are aligned for `T`; GGML block types are plain data (integers and
        // half floats), valid for any bytes; the mapping lives as long as `self.map`.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(self.offset) as *const T, self.len)
        }
    }

    fn owned_mut(&mut self) -> &mut [T] {
        let owned = self.owned.get_or_insert_with(|| {
            // SAFETY: as in `blocks`.
            unsafe {
                std::slice::from_raw_parts(self.map.as_ptr().add(self.offset) as *const T, self.len)
            }
            .to_vec()
        });
        owned
    }
}

impl<T: GgmlType + 'static> QuantizedType for MappedBlocks<T> {
    fn dtype(&self) -> GgmlDType {
        T::DTYPE
    }

    fn matmul_t(
        &self,
        mkn: (usize, usize, usize),
        lhs: &[f32],
        dst: &mut [f32],
    ) -> candle_core::Result<()> {
        k_quants::matmul(mkn, lhs, self.blocks(), dst)
    }

    fn matmul_t_f16(
        &self,
        mkn: (usize, usize, usize),
        lhs: &[f16],
        dst: &mut [f16],
    ) -> candle_core::Result<()> {
        k_quants::matmul_f16(mkn, lhs, self.blocks(), dst)
    }

    fn embedding(
        &self,
        ids: &[u32],
        rows: usize,
        hidden: usize,
    ) -> candle_core::Result<CpuStorage> {
        if !hidden.is_multiple_of(T::BLCK_SIZE) {
            candle_core::bail!(
                "quantized embedding hidden size {hidden} is not divisible by block size {}",
                T::BLCK_SIZE
            )
        }
        let row_blocks = hidden / T::BLCK_SIZE;
        let blocks = self.blocks();
        if blocks.len() != rows * row_blocks {
            candle_core::bail!(
                "quantized tensor has {} blocks, expected {}",
                blocks.len(),
                rows * row_blocks
            )
        }
        let mut out = vec![0f32; ids.len() * hidden];
        for (dst, &id) in out.chunks_exact_mut(hidden).zip(ids) {
            let row = id as usize;
            if row >= rows {
                candle_core::bail!("embedding id {row} is out of range for {rows} rows")
            }
            T::to_float(&blocks[row * row_blocks..(row + 1) * row_blocks], dst);
        }
        Ok(CpuStorage::F32(out))
    }

    fn dequantize(&self, elem_count: usize) -> candle_core::Result<CpuStorage> {
        let mut ys = vec![0f32; elem_count];
        T::to_float(self.blocks(), &mut ys);
        Ok(CpuStorage::F32(ys))
    }

    fn storage_size_in_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    fn as_ptr(&self) -> *const u8 {
        self.blocks().as_ptr() as *const u8
    }

    fn block_size(&self) -> usize {
        T::BLCK_SIZE
    }

    fn from_float(&mut self, xs: &[f32]) {
        T::from_float(xs, self.owned_mut())
    }

    fn from_float_imatrix(&mut self, xs: &[f32], imatrix_weights: &[f32], n_per_row: usize) {
        T::from_float_imatrix(xs, self.owned_mut(), imatrix_weights, n_per_row)
    }

    fn size(&self) -> usize {
        self.storage_size_in_bytes()
    }
}
