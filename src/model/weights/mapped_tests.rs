//! Tests of matrices read in place (`mapped.rs`) as the loader (`gguf.rs`) and [`Linear`]
//! use them: a sibling of the three, so none of them depends on another through its tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{ensure, Context};
use candle_core::quantized::{gguf_file, GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

use crate::model::weights::{GgufFile, Linear};

/// A GGUF file holding `tensors` (random values quantized to their types).
fn gguf_with(dir: &Path, tensors: &[(&str, GgmlDType, (usize, usize))]) -> anyhow::Result<PathBuf> {
    let qs = tensors
        .iter()
        .map(|&(_, dtype, shape)| {
            let w = Tensor::randn(0f32, 0.5, shape, &Device::Cpu)?;
            Ok(QTensor::quantize(&w, dtype)?)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let named: Vec<(&str, &QTensor)> = tensors.iter().map(|t| t.0).zip(&qs).collect();
    let path = dir.join("m.gguf");
    let mut f = std::fs::File::create(&path)?;
    gguf_file::write(&mut f, &[], &named)?;
    Ok(path)
}

/// The tensor as candle reads it: copied into a `Vec`.
fn copied(path: &Path, name: &str) -> anyhow::Result<QTensor> {
    let mut f = std::fs::File::open(path)?;
    let content = gguf_file::Content::read(&mut f)?;
    Ok(content.tensor(&mut f, name, &Device::Cpu)?)
}

fn bits(t: &Tensor) -> anyhow::Result<Vec<u32>> {
    Ok(t.flatten_all()?
        .to_vec1::<f32>()?
        .iter()
        .map(|x| x.to_bits())
        .collect())
}

/// Rows counts that reach every kernel candle picks on x86 (one row, a few, AMX's 32+)
/// and aarch64 (multiples of 4 and tails).
const ROWS: [usize; 4] = [1, 3, 32, 37];

#[test]
fn mapped_matrices_multiply_bit_exactly_like_copied_ones_before_and_after_release(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let specs = [
        ("q4k", GgmlDType::Q4K, (64, 512)),
        ("q6k", GgmlDType::Q6K, (48, 512)),
        ("q8_0", GgmlDType::Q8_0, (32, 512)),
        ("f16", GgmlDType::F16, (16, 64)),
    ];
    let path = gguf_with(dir.path(), &specs)?;
    let file = GgufFile::open(&path)?;
    let ids = Tensor::new(&[0u32, 5, 15], &Device::Cpu)?;
    for (name, dtype, (_, k)) in specs {
        let copy = QMatMul::from_qtensor(copied(&path, name)?)?;
        let pages = file.pages(name).context("not read in place")?;
        let mapped = QMatMul::from_qtensor(file.read(name, &Device::Cpu)?)?;
        for round in ["fresh", "released"] {
            for m in ROWS {
                let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?;
                let (a, b) = (copy.forward(&x)?, mapped.forward(&x)?);
                ensure!(bits(&a)? == bits(&b)?, "{name} ({dtype:?}) m={m}, {round}");
            }
            let (a, b) = (copy.embedding(&ids)?, mapped.embedding(&ids)?);
            ensure!(bits(&a)? == bits(&b)?, "{name} embedding rows, {round}");
            pages.release();
            file.release_pages();
        }
    }
    Ok(())
}

#[test]
fn a_repacked_matrix_leaves_the_resident_set_and_reads_back_the_same() -> anyhow::Result<()> {
    let (n, k) = (1024, 2048);
    let dir = tempfile::tempdir()?;
    let path = gguf_with(dir.path(), &[("w", GgmlDType::Q4K, (n, k))])?;
    let file = GgufFile::open(&path)?;
    let map = file.mapped().context("not mapped")?;
    let size = (n * k / 256 * GgmlDType::Q4K.type_size()) as u64;
    let weight = QMatMul::from_qtensor(file.read("w", &Device::Cpu)?)?;
    let linear = Linear::new(weight, None, candle_core::DType::F32).with_pages(file.pages("w"));
    // The same layer from a copy of the bytes, so both take the same kernel (candle's, or
    // on an AVX2-tier CPU the eight-row layout).
    let copy = Linear::new(
        QMatMul::from_qtensor(copied(&path, "w")?)?,
        None,
        candle_core::DType::F32,
    );
    let page = 4096;

    let x = Tensor::randn(0f32, 1.0, (1, k), &Device::Cpu)?;
    let first = linear.forward(&x)?;
    let Some(resident) = map.resident_bytes() else {
        return Ok(()); // no /proc/self/smaps: nothing to measure
    };
    ensure!(
        resident <= 2 * page,
        "{resident} bytes of {size} still resident"
    );

    // The same kind of matmul again: bit-exact, and where candle repacks Q4_K (x86-64
    // with AVX2) it no longer reads the original at all.
    let again = linear.forward(&x)?;
    ensure!(bits(&first)? == bits(&again)? && bits(&first)? == bits(&copy.forward(&x)?)?);
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        let resident = map.resident_bytes().unwrap_or(0);
        ensure!(
            resident <= 2 * page,
            "a repacked matrix was read again: {resident} bytes"
        );
    }

    // Reading the original (dequantize, an unpacked kernel) faults the same bytes back.
    let QMatMul::QTensor(q) = linear.weight() else {
        anyhow::bail!("not quantized");
    };
    let c = copied(&path, "w")?;
    ensure!(
        bits(&q.dequantize(&Device::Cpu)?)? == bits(&c.dequantize(&Device::Cpu)?)?,
        "dequantized values differ after release"
    );
    ensure!(map.resident_bytes().unwrap_or(0) >= size - 2 * page);
    Ok(())
}

/// A half matrix read in place gives the bits of the widened copy: a few-row product (a
/// decode step) reads it where it lies and leaves its pages to the next step; a many-row
/// product (the vision tower's) widens it and drops the pages after each use.
#[test]
fn a_half_precision_matrix_in_place_matches_the_widened_copy_and_is_dropped_after_wide_use(
) -> anyhow::Result<()> {
    let (n, k) = (96, 1024);
    let dir = tempfile::tempdir()?;
    let path = gguf_with(dir.path(), &[("w", GgmlDType::F16, (n, k))])?;
    let file = GgufFile::open(&path)?;
    let map = file.mapped().context("not mapped")?;
    // What the loader kept before: the f16 values as a tensor, widened per matmul.
    let half = copied(&path, "w")?
        .dequantize(&Device::Cpu)?
        .to_dtype(candle_core::DType::F16)?;
    let bias = Tensor::randn(0f32, 1.0, n, &Device::Cpu)?;
    let dtype = candle_core::DType::F32;
    let copy = Linear::new(QMatMul::Tensor(half), Some(bias.clone()), dtype);
    let weight = QMatMul::QTensor(Arc::new(file.read("w", &Device::Cpu)?));
    let in_place = Linear::new(weight, Some(bias), dtype).with_pages(file.pages("w"));
    for m in [1, 4, 7, 40] {
        let x = Tensor::randn(0f32, 1.0, (2, m, k), &Device::Cpu)?;
        ensure!(
            bits(&copy.forward(&x)?)? == bits(&in_place.forward(&x)?)?,
            "m={m}"
        );
        let wide = 2 * m > super::float_gemv::MAX_ROWS;
        if let (true, Some(resident)) = (wide, map.resident_bytes()) {
            ensure!(
                resident <= 2 * 4096,
                "{resident} bytes resident after the matmul"
            );
        }
    }
    Ok(())
}
