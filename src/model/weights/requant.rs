//! Q6_K matrices computed as Q8_0 ([`LoadOptions::exact_weights`] off, AVX-VNNI CPUs
//! without AVX-512) without
//! a resident Q8_0 copy beside candle's repacked one.
//!
//! The Q8_0 blocks exist only to be repacked: candle packs a Q8_0 matrix once, for every
//! row count, on VNNI CPUs, and never reads the blocks again. So [`RequantQ8`] makes them
//! from the Q6_K bytes of the mapped file when candle first asks (`as_ptr`, on the
//! matmul's own thread), and [`MappedPages::after_matmul`] drops them with the Q6_K pages.
//! What still reads the values afterwards gets the same numbers: embedding rows and
//! `dequantize` are converted from the Q6_K bytes block by block (Q6_K → f32 → Q8_0 is
//! per 32-value block, so a row converted alone equals the row of the whole matrix), and
//! candle's unpacked kernels make the blocks again and keep them for good.
//!
//! Soundness: `as_ptr` hands candle a raw pointer to the blocks. They are freed only by
//! [`Requantized::release`], which first takes `in_use` for writing; [`Linear`] holds it
//! for reading around every matmul (see [`MappedPages::in_use`]), and a pointer asked for
//! outside such a matmul (`QTensor::data`, say) pins the blocks, never freed after.
//!
//! [`LoadOptions::exact_weights`]: super::LoadOptions::exact_weights
//! [`MappedPages::after_matmul`]: super::MappedPages::after_matmul
//! [`MappedPages::in_use`]: super::MappedPages::in_use
//! [`Linear`]: super::Linear

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use candle_core::quantized::k_quants::{BlockQ6K, BlockQ8_0, GgmlType};
use candle_core::quantized::{k_quants, GgmlDType, QuantizedType};
use candle_core::CpuStorage;
use half::f16;
use memmap2::Mmap;

/// Rows one thread converts at a time.
const TASK_ROWS: usize = 64;

thread_local! {
    /// The [`Requantized`] matrices (addresses) whose matmul this thread is running, so
    /// that a pointer candle asks for inside one is known to be used only until it returns.
    static IN_MATMUL: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The state a [`RequantQ8`] storage shares with its matrix's `MappedPages`.
pub(crate) struct Requantized {
    map: Arc<Mmap>,
    /// Byte offset of the Q6_K blocks in the map.
    offset: usize,
    rows: usize,
    cols: usize,
    blocks: Mutex<Option<Vec<BlockQ8_0>>>,
    /// Held for reading by a running matmul, for writing by `release`.
    in_use: RwLock<()>,
    /// Never free the blocks: a pointer escaped, or they had to be made again.
    pinned: AtomicBool,
    released: AtomicBool,
}

impl std::fmt::Debug for Requantized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Requantized")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

/// A matmul running on a [`Requantized`] matrix: its blocks stay until this is dropped.
pub(crate) struct InUse<'a> {
    _read: RwLockReadGuard<'a, ()>,
    address: usize,
}

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        IN_MATMUL.with(|c| {
            let mut running = c.borrow_mut();
            if let Some(i) = running.iter().rposition(|&a| a == self.address) {
                running.swap_remove(i);
            }
        });
    }
}

impl Requantized {
    /// The `rows × cols` Q6_K matrix at `offset` of `map`; `None` when it is out of the
    /// map, misaligned, or its rows are not whole Q6_K and Q8_0 blocks.
    pub(crate) fn new(map: Arc<Mmap>, offset: usize, rows: usize, cols: usize) -> Option<Self> {
        if cols == 0
            || !cols.is_multiple_of(GgmlDType::Q6K.block_size())
            || !cols.is_multiple_of(GgmlDType::Q8_0.block_size())
        {
            return None;
        }
        let bytes = rows
            .checked_mul(cols / GgmlDType::Q6K.block_size())?
            .checked_mul(std::mem::size_of::<BlockQ6K>())?;
        if offset.checked_add(bytes)? > map.len()
            || !(map.as_ptr() as usize + offset).is_multiple_of(std::mem::align_of::<BlockQ6K>())
        {
            return None;
        }
        Some(Requantized {
            map,
            offset,
            rows,
            cols,
            blocks: Mutex::new(None),
            in_use: RwLock::new(()),
            pinned: AtomicBool::new(false),
            released: AtomicBool::new(false),
        })
    }

    fn q6k(&self) -> &[BlockQ6K] {
        let n = self.rows * self.cols / GgmlDType::Q6K.block_size();
        // SAFETY: `new` checked that the blocks lie in the mapping, aligned; block types
        // are plain data; the mapping lives as long as `self.map`.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(self.offset) as *const BlockQ6K, n)
        }
    }

    fn q6k_row_blocks(&self) -> usize {
        self.cols / GgmlDType::Q6K.block_size()
    }

    fn q8_row_blocks(&self) -> usize {
        self.cols / GgmlDType::Q8_0.block_size()
    }

    /// Rows `range` of the Q6_K matrix as Q8_0 blocks, into `out`.
    fn convert_rows(&self, first_row: usize, out: &mut [BlockQ8_0]) {
        let n_rows = out.len() / self.q8_row_blocks();
        let src = &self.q6k()
            [first_row * self.q6k_row_blocks()..(first_row + n_rows) * self.q6k_row_blocks()];
        let mut values = vec![0f32; n_rows * self.cols];
        BlockQ6K::to_float(src, &mut values);
        BlockQ8_0::from_float(&values, out);
    }

    /// The whole Q8_0 matrix, converted by all of candle's threads.
    fn make(&self) -> Vec<BlockQ8_0> {
        let per_row = self.q8_row_blocks();
        let mut blocks = vec![BlockQ8_0::zeros(); self.rows * per_row];
        let tasks: Vec<_> = blocks
            .chunks_mut(TASK_ROWS * per_row)
            .enumerate()
            .map(Mutex::new)
            .collect();
        candle_core::utils::barrier_pool().execute_chunked(tasks.len(), |range| {
            for task in &tasks[range] {
                if let Ok(mut task) = task.lock() {
                    let (i, out) = &mut *task;
                    self.convert_rows(*i * TASK_ROWS, out);
                }
            }
        });
        drop(tasks);
        blocks
    }

    /// Run `f` on the Q8_0 blocks, made first if absent.
    fn with_blocks<R>(&self, f: impl FnOnce(&[BlockQ8_0]) -> R) -> R {
        let mut guard = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        let blocks = guard.get_or_insert_with(|| {
            if self.released.load(Ordering::Relaxed) {
                // Needed again after a release: an unpacked kernel reads them; keep them.
                self.pinned.store(true, Ordering::Relaxed);
            }
            self.make()
        });
        f(blocks)
    }

    /// Mark a matmul on this matrix as running, until the result is dropped.
    pub(crate) fn in_use(&self) -> InUse<'_> {
        let read = self.in_use.read().unwrap_or_else(|e| e.into_inner());
        let address = self as *const Self as usize;
        IN_MATMUL.with(|c| c.borrow_mut().push(address));
        InUse {
            _read: read,
            address,
        }
    }

    /// Free the Q8_0 blocks (unless pinned); they are made again if read.
    pub(crate) fn release(&self) {
        let _write = self.in_use.write().unwrap_or_else(|e| e.into_inner());
        if self.pinned.load(Ordering::Relaxed) {
            return;
        }
        let mut guard = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        if guard.take().is_some() {
            self.released.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the Q8_0 blocks are resident now. For tests.
    #[cfg(test)]
    pub(crate) fn is_resident(&self) -> bool {
        self.blocks.lock().map(|g| g.is_some()).unwrap_or(true)
    }
}

/// candle storage for a [`Requantized`] matrix.
pub(crate) struct RequantQ8(pub(crate) Arc<Requantized>);

impl QuantizedType for RequantQ8 {
    fn dtype(&self) -> GgmlDType {
        GgmlDType::Q8_0
    }

    fn matmul_t(
        &self,
        mkn: (usize, usize, usize),
        lhs: &[f32],
        dst: &mut [f32],
    ) -> candle_core::Result<()> {
        self.0.with_blocks(|b| k_quants::matmul(mkn, lhs, b, dst))
    }

    fn matmul_t_f16(
        &self,
        mkn: (usize, usize, usize),
        lhs: &[f16],
        dst: &mut [f16],
    ) -> candle_core::Result<()> {
        self.0
            .with_blocks(|b| k_quants::matmul_f16(mkn, lhs, b, dst))
    }

    fn embedding(
        &self,
        ids: &[u32],
        rows: usize,
        hidden: usize,
    ) -> candle_core::Result<CpuStorage> {
        let r = &self.0;
        if rows != r.rows || hidden != r.cols {
            candle_core::bail!(
                "embedding of {rows}×{hidden} asked of a {}×{} matrix",
                r.rows,
                r.cols
            )
        }
        let mut out = vec![0f32; ids.len() * hidden];
        let mut row_q8 = vec![BlockQ8_0::zeros(); r.q8_row_blocks()];
        for (dst, &id) in out.chunks_exact_mut(hidden).zip(ids) {
            let row = id as usize;
            if row >= rows {
                candle_core::bail!("embedding id {row} is out of range for {rows} rows")
            }
            r.convert_rows(row, &mut row_q8);
            BlockQ8_0::to_float(&row_q8, dst);
        }
        Ok(CpuStorage::F32(out))
    }

    fn dequantize(&self, elem_count: usize) -> candle_core::Result<CpuStorage> {
        let r = &self.0;
        if elem_count != r.rows * r.cols {
            candle_core::bail!(
                "dequantize of {elem_count} values asked of {}",
                r.rows * r.cols
            )
        }
        let mut out = vec![0f32; elem_count];
        let mut row_q8 = vec![BlockQ8_0::zeros(); r.q8_row_blocks()];
        for (row, dst) in out.chunks_exact_mut(r.cols).enumerate() {
            r.convert_rows(row, &mut row_q8);
            BlockQ8_0::to_float(&row_q8, dst);
        }
        Ok(CpuStorage::F32(out))
    }

    fn storage_size_in_bytes(&self) -> usize {
        self.0.rows * self.0.q8_row_blocks() * std::mem::size_of::<BlockQ8_0>()
    }

    fn as_ptr(&self) -> *const u8 {
        let r = &self.0;
        let address = Arc::as_ptr(r) as usize;
        let inside = IN_MATMUL.with(|c| c.borrow().contains(&address));
        if !inside {
            // The pointer may outlive any matmul we know of: never free the blocks.
            r.pinned.store(true, Ordering::Relaxed);
        }
        r.with_blocks(|b| b.as_ptr() as *const u8)
    }

    fn block_size(&self) -> usize {
        GgmlDType::Q8_0.block_size()
    }

    fn from_float(&mut self, xs: &[f32]) {
        let r = &self.0;
        r.pinned.store(true, Ordering::Relaxed);
        let mut guard = r.blocks.lock().unwrap_or_else(|e| e.into_inner());
        let blocks = guard.get_or_insert_with(|| r.make());
        BlockQ8_0::from_float(xs, blocks);
    }

    fn from_float_imatrix(&mut self, xs: &[f32], imatrix_weights: &[f32], n_per_row: usize) {
        let r = &self.0;
        r.pinned.store(true, Ordering::Relaxed);
        let mut guard = r.blocks.lock().unwrap_or_else(|e| e.into_inner());
        let blocks = guard.get_or_insert_with(|| r.make());
        BlockQ8_0::from_float_imatrix(xs, blocks, imatrix_weights, n_per_row);
    }

    fn size(&self) -> usize {
        self.storage_size_in_bytes()
    }
}
