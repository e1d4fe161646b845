//! The CUDA side of [`TokenPicker`](super::TokenPicker): launches
//! `kernels/masked_argmax.cu` (PTX built by `build.rs`) on the logits' own buffer.

use candle_core::cuda_backend::cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaDevice, WrapErr};
use candle_core::{Storage, Tensor};

use super::rule::{kernel_uniform, PickRule, NO_TOKEN};
use crate::error::{Error, Result};

/// The kernels' PTX, compiled from `kernels/masked_argmax.cu` by `build.rs`.
const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/masked_argmax.ptx"));

/// Name under which candle caches the loaded module on the device.
const MODULE: &str = "sightline_masked_argmax";

/// Threads of the single block; `BLOCK_THREADS` in the .cu file.
const BLOCK_THREADS: u32 = 1024;

/// Reusable device buffers for one CUDA device.
pub(super) struct CudaPicker {
    device: CudaDevice,
    /// The mask words, grown to the widest mask seen and overwritten each step.
    mask: CudaSlice<u32>,
    /// The kernel's answer: one token id or `NO_TOKEN`.
    out: CudaSlice<u32>,
}

impl CudaPicker {
    pub(super) fn new(device: &CudaDevice) -> Result<Self> {
        // Load the module now so a PTX the driver rejects fails here, by name.
        device
            .get_or_load_custom_func("masked_argmax_f32", MODULE, PTX)
            .map_err(|e| load_error(device, e))?;
        Ok(CudaPicker {
            device: device.clone(),
            mask: device.alloc_zeros::<u32>(1)?,
            out: device.alloc_zeros::<u32>(1)?,
        })
    }

    pub(super) fn serves(&self, device: &CudaDevice) -> bool {
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
        let (storage, layout) = logits.storage_and_layout();
        let Storage::Cuda(storage) = &*storage else {
            return Err(Error::internal(
                "masked pick: logits are not on the CUDA device",
            ));
        };
        let (start, end) = layout
            .contiguous_offsets()
            .ok_or_else(|| Error::internal("masked pick: logits are not contiguous"))?;
        let row = storage.as_cuda_slice::<f32>()?.slice(start..end);

        // Words past the mask are disallowed; never read more than was uploaded.
        let n_words = mask.len().min(n.div_ceil(32) as usize);
        if self.mask.len() < n_words.max(1) {
            self.mask = self.device.alloc_zeros::<u32>(n_words)?;
        }
        if n_words > 0 {
            let mut dst = self.mask.slice_mut(..n_words);
            self.device.memcpy_htod(&mask[..n_words], &mut dst)?;
        }
        let n_words = n_words as u32;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (BLOCK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let (name, temperature, u) = match rule {
            PickRule::Argmax => ("masked_argmax_f32", 0.0, 0.0),
            PickRule::Sample { temperature, u } => {
                ("masked_sample_f32", temperature, kernel_uniform(u))
            }
        };
        let func = self
            .device
            .get_or_load_custom_func(name, MODULE, PTX)
            .map_err(|e| load_error(&self.device, e))?;
        let mut args = func.builder();
        args.arg(&row);
        args.arg(&self.mask);
        args.arg(&n);
        args.arg(&n_words);
        if let PickRule::Sample { .. } = rule {
            args.arg(&temperature);
            args.arg(&u);
        }
        args.arg(&mut self.out);
        // SAFETY: the arguments match the kernel's signature in masked_argmax.cu
        // (`temperature` and `u` only for the sample kernel); it reads `n` floats of
        // `row` and `n_words` words of `mask`, both at least that long, and writes
        // one u32 of `out`.
        unsafe { args.launch(cfg) }.w()?;
        // The only device-to-host copy of the step: 4 bytes, after the kernel.
        let id = self.device.clone_dtoh(&self.out)?;
        Ok(id.first().copied().filter(|&id| id != NO_TOKEN))
    }
}

fn load_error(device: &CudaDevice, e: candle_core::Error) -> Error {
    Error::device_caused(
        format!("{device:?}"),
        format!("cannot load the masked-argmax kernel ({MODULE})"),
        e,
    )
}
