//! Quantize-at-load types, as every command's `--quantize` spells them.

use std::fmt;
use std::str::FromStr;

use candle_core::quantized::GgmlDType;

use crate::error::{Error, Result};

/// A type float matrices can be quantized to while loading (see
/// [`LoadOptions::quantize`](crate::model::weights::LoadOptions::quantize)).
///
/// Spelled `q8_0`, `q6k`, `q5k` or `q4k` ([`Display`](fmt::Display) writes these). Parsing
/// ignores case and `_`, so `Q8_0`, `q80`, `q6_k` and `q4_K` are read too, and accepts `q8`
/// for Q8_0 (an older spelling of `sightline bench`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quantization {
    /// 8-bit, blocks of 32 (`q8_0`).
    Q8_0,
    /// 6-bit K-quant, blocks of 256 (`q6k`).
    Q6K,
    /// 5-bit K-quant (`q5k`).
    Q5K,
    /// 4-bit K-quant (`q4k`).
    Q4K,
}

impl Quantization {
    /// Every type, in the order the help texts list them.
    pub const ALL: [Quantization; 4] = [
        Quantization::Q8_0,
        Quantization::Q6K,
        Quantization::Q5K,
        Quantization::Q4K,
    ];

    /// The canonical spelling.
    pub fn name(self) -> &'static str {
        match self {
            Quantization::Q8_0 => "q8_0",
            Quantization::Q6K => "q6k",
            Quantization::Q5K => "q5k",
            Quantization::Q4K => "q4k",
        }
    }

    /// candle's type.
    pub fn dtype(self) -> GgmlDType {
        match self {
            Quantization::Q8_0 => GgmlDType::Q8_0,
            Quantization::Q6K => GgmlDType::Q6K,
            Quantization::Q5K => GgmlDType::Q5K,
            Quantization::Q4K => GgmlDType::Q4K,
        }
    }
}

impl FromStr for Quantization {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().replace('_', "").as_str() {
            "q80" | "q8" => Ok(Quantization::Q8_0),
            "q6k" => Ok(Quantization::Q6K),
            "q5k" => Ok(Quantization::Q5K),
            "q4k" => Ok(Quantization::Q4K),
            _ => Err(Error::invalid_input(format!(
                "quantization {s:?}: expected q8_0, q6k, q5k or q4k"
            ))),
        }
    }
}

impl fmt::Display for Quantization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Quantization> for GgmlDType {
    fn from(q: Quantization) -> Self {
        q.dtype()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_the_commands_ever_accepted_parses_to_one_type() -> Result<()> {
        for (spellings, q) in [
            (&["q8_0", "Q8_0", "q80", "q8"][..], Quantization::Q8_0),
            (&["q6k", "q6_k", "Q6_K"][..], Quantization::Q6K),
            (&["q5k", "q5_k"][..], Quantization::Q5K),
            (&["q4k", "q4_k", "Q4K"][..], Quantization::Q4K),
        ] {
            for s in spellings {
                assert_eq!(s.parse::<Quantization>()?, q, "{s}");
            }
            assert_eq!(q.to_string().parse::<Quantization>()?, q);
        }
        assert!("q3k".parse::<Quantization>().is_err());
        assert!("none".parse::<Quantization>().is_err());
        Ok(())
    }
}
