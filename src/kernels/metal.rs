//! The Metal side of [`TokenPicker`](super::TokenPicker): compiles
//! `kernels/masked_argmax.metal` from source on first use (there is no offline Metal
//! compiler outside macOS) and dispatches it on the logits' own buffer.
//!
//! Written against candle 0.11's Metal API (`candle_metal_kernels::metal` wrappers
//! over objc2-metal) but never compiled or run here: the project's machines are
//! Linux, where `--features metal` does not build.

use candle_core::{MetalDevice, Storage, Tensor};
use candle_metal_kernels::metal::{Buffer, ComputeCommandEncoder, ComputePipeline};
use objc2_metal::{MTLResourceOptions, MTLSize};

use super::rule::{kernel_uniform, PickRule, NO_TOKEN};
use crate::error::{Error, Result};

/// The kernels' source, compiled by the Metal driver at first use.
const SOURCE: &str = include_str!("../../kernels/masked_argmax.metal");

/// Most threads of the single threadgroup; `MAX_SIMDGROUPS * 32` in the .metal file.
const MAX_THREADS: usize = 1024;

/// Bytes of a `u32`.
const WORD_BYTES: usize = 4;

/// Compiled pipelines and reusable buffers for one Metal device.
pub(super) struct MetalPicker {
    device: MetalDevice,
    argmax: ComputePipeline,
    sample: ComputePipeline,
    /// The mask words in CPU-visible (shared) memory, overwritten each step; grown
    /// to the widest mask seen.
    mask: Buffer,
    mask_capacity_words: usize,
    /// The kernel's answer, read straight from shared memory after the wait.
    out: Buffer,
}

impl MetalPicker {
    pub(super) fn new(device: &MetalDevice) -> Result<Self> {
        let library = device
            .new_library_with_source(SOURCE, None)
            .map_err(|e| device_error(device, format!("compiling masked_argmax.metal: {e}")))?;
        let pipeline = |name: &str| -> Result<ComputePipeline> {
            let function = library
                .get_function(name, None)
                .map_err(|e| device_error(device, format!("{name}: {e}")))?;
            device
                .new_compute_pipeline_state_with_function(&function)
                .map_err(|e| device_error(device, format!("{name}: {e}")))
        };
        Ok(MetalPicker {
            argmax: pipeline("masked_argmax_f32")?,
            sample: pipeline("masked_sample_f32")?,
            mask: shared_buffer(device, 1)?,
            mask_capacity_words: 1,
            out: shared_buffer(device, 1)?,
            device: device.clone(),
        })
    }

    pub(super) fn serves(&self, device: &MetalDevice) -> bool {
        self.device.id() == device.id()
    }

    /// `logits` is contiguous f32 on this device (the caller made sure).
    pub(super) fn pick(
        &mut self,
        logits: &Tensor,
        mask: &[u32],
        rule: PickRule,
    ) -> Result<Option<u32>> {
        let n = logits.elem_count() as u32;
        let n_words = mask.len().min(n.div_ceil(32) as usize);
        if n_words > self.mask_capacity_words {
            self.mask = shared_buffer(&self.device, n_words)?;
            self.mask_capacity_words = n_words;
        }
        // SAFETY: the buffer is shared (CPU-visible) and holds at least `n_words`
        // words; no GPU work reads it now, since every pick waits for its kernel
        // before returning.
        unsafe {
            std::ptr::copy_nonoverlapping(
                mask.as_ptr(),
                self.mask.contents().cast::<u32>(),
                n_words,
            );
        }
        let n_words = n_words as u32;
        {
            let (storage, layout) = logits.storage_and_layout();
            let Storage::Metal(storage) = &*storage else {
                return Err(Error::internal(
                    "masked pick: logits are not on the Metal device",
                ));
            };
            let offset_bytes = layout.start_offset() * WORD_BYTES;
            let pipeline = match rule {
                PickRule::Argmax => &self.argmax,
                PickRule::Sample { .. } => &self.sample,
            };
            let threads = (pipeline
                .max_total_threads_per_threadgroup()
                .min(MAX_THREADS)
                / 32)
                * 32;
            let guard = self.device.command_encoder()?;
            let encoder: &ComputeCommandEncoder = guard.as_ref();
            encoder.set_compute_pipeline_state(pipeline);
            encoder.set_input_buffer(0, Some(storage.buffer()), offset_bytes);
            encoder.set_input_buffer(1, Some(&self.mask), 0);
            encoder.set_bytes(2, &n);
            encoder.set_bytes(3, &n_words);
            match rule {
                PickRule::Argmax => encoder.set_output_buffer(4, Some(&self.out), 0),
                PickRule::Sample { temperature, u } => {
                    encoder.set_bytes(4, &temperature);
                    encoder.set_bytes(5, &kernel_uniform(u));
                    encoder.set_output_buffer(6, Some(&self.out), 0);
                }
            }
            encoder.dispatch_thread_groups(
                MTLSize {
                    width: 1,
                    height: 1,
                    depth: 1,
                },
                MTLSize {
                    width: threads,
                    height: 1,
                    depth: 1,
                },
            );
        }
        // Commit and wait: the 4-byte answer is the only thing read back.
        self.device.wait_until_completed()?;
        // SAFETY: a shared buffer of at least one u32, written by the finished kernel.
        let id = unsafe { self.out.contents().cast::<u32>().read() };
        Ok((id != NO_TOKEN).then_some(id))
    }
}

/// A CPU-visible buffer of `words` u32, outside candle's pool (it is reused by us).
fn shared_buffer(device: &MetalDevice, words: usize) -> Result<Buffer> {
    device
        .metal_device()
        .new_buffer(words * WORD_BYTES, MTLResourceOptions::StorageModeShared)
        .map_err(|e| device_error(device, format!("allocating a {words}-word buffer: {e}")))
}

fn device_error(device: &MetalDevice, reason: String) -> Error {
    Error::device(
        format!("{device:?}"),
        format!("masked-argmax kernel: {reason}"),
    )
}
