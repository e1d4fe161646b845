//! Where a model runs: [`DeviceChoice`], as every command's `--device` spells it.

use candle_core::Device;

use crate::error::{Error, Result};

/// Where the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// CUDA if this build has it and a GPU answers, else Metal likewise, else the CPU.
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// CUDA GPU number `n` (needs `--features cuda`).
    Cuda(usize),
    /// The Metal GPU (needs `--features metal`).
    Metal,
}

impl std::str::FromStr for DeviceChoice {
    type Err = Error;

    /// `auto`, `cpu`, `cuda`, `cuda:N` or `metal`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda(0)),
            "metal" => Ok(DeviceChoice::Metal),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceChoice::Cuda)
                .ok_or_else(|| Error::Device {
                    device: s.to_string(),
                    reason: "expected auto, cpu, cuda, cuda:N or metal".into(),
                }),
        }
    }
}

impl DeviceChoice {
    /// The candle device, or [`Error::Device`] saying why it cannot be had.
    pub fn resolve(self) -> Result<Device> {
        let unavailable = |device: String, e: candle_core::Error| Error::Device {
            device,
            reason: e.to_string(),
        };
        match self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Cuda(n) => {
                Device::new_cuda(n).map_err(|e| unavailable(format!("cuda:{n}"), e))
            }
            DeviceChoice::Metal => Device::new_metal(0).map_err(|e| unavailable("metal".into(), e)),
            DeviceChoice::Auto => {
                if candle_core::utils::cuda_is_available() {
                    if let Ok(device) = Device::new_cuda(0) {
                        return Ok(device);
                    }
                }
                if candle_core::utils::metal_is_available() {
                    if let Ok(device) = Device::new_metal(0) {
                        return Ok(device);
                    }
                }
                Ok(Device::Cpu)
            }
        }
    }
}
