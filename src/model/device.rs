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
                .ok_or_else(|| Error::device(s, "expected auto, cpu, cuda, cuda:N or metal")),
        }
    }
}

impl std::fmt::Display for DeviceChoice {
    /// The spelling [`FromStr`](std::str::FromStr) reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceChoice::Auto => f.write_str("auto"),
            DeviceChoice::Cpu => f.write_str("cpu"),
            DeviceChoice::Cuda(n) => write!(f, "cuda:{n}"),
            DeviceChoice::Metal => f.write_str("metal"),
        }
    }
}

impl DeviceChoice {
    /// The candle device, or [`Error::Device`] saying why it cannot be had.
    pub fn resolve(self) -> Result<Device> {
        let unavailable =
            |device: String, e: candle_core::Error| Error::device_caused(device, "", e);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// Without the `metal` feature candle cannot open a Metal device: the error names the
    /// device, reads as candle's message did, and keeps candle's error as its source.
    #[cfg(not(feature = "metal"))]
    #[test]
    fn an_unavailable_device_keeps_candles_error_as_source() -> Result<()> {
        let candle_message = match Device::new_metal(0) {
            Ok(_) => return Err(Error::internal("a Metal device opened")),
            Err(e) => e.to_string(),
        };
        let err = match DeviceChoice::Metal.resolve() {
            Ok(_) => return Err(Error::internal("a Metal device resolved")),
            Err(err) => err,
        };
        assert!(matches!(&err, Error::Device { device, .. } if device == "metal"));
        assert_eq!(err.to_string(), format!("device metal: {candle_message}"));
        let source = err
            .source()
            .ok_or_else(|| Error::internal(format!("no source: {err}")))?;
        assert!(source.downcast_ref::<candle_core::Error>().is_some());
        Ok(())
    }
}
