//! Compiles the CUDA kernels to PTX when the `cuda` feature is on; does nothing
//! otherwise. The PTX is embedded with `include_str!` and loaded through candle's
//! `CudaDevice::get_or_load_custom_func` at first use.
//!
//! nvcc is found as `$NVCC`, else `$CUDA_ROOT/bin/nvcc` (also `CUDA_PATH`,
//! `CUDA_HOME`), else `nvcc` on the PATH. The PTX targets `compute_$CUDA_COMPUTE_CAP`
//! (the variable candle's own kernels use), default 75, the oldest architecture
//! CUDA 13 supports; the driver JIT-compiles it for newer GPUs.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// The CUDA sources, each compiled to `$OUT_DIR/<name>.ptx`.
const CUDA_KERNELS: [&str; 1] = ["masked_argmax"];

/// Oldest compute capability CUDA 13 compiles for.
const DEFAULT_COMPUTE_CAP: &str = "75";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    for var in [
        "NVCC",
        "CUDA_ROOT",
        "CUDA_PATH",
        "CUDA_HOME",
        "CUDA_COMPUTE_CAP",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let nvcc = find_nvcc();
    let cap = env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| DEFAULT_COMPUTE_CAP.into());
    let cap = cap.trim().replace('.', "");
    // Cargo sets OUT_DIR for every build script; like the failures below, its absence
    // fails the build with a message.
    let Some(out_dir) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        panic!("feature `cuda`: cargo did not set OUT_DIR");
    };
    for name in CUDA_KERNELS {
        let src = format!("kernels/{name}.cu");
        println!("cargo:rerun-if-changed={src}");
        let ptx = out_dir.join(format!("{name}.ptx"));
        let status = Command::new(&nvcc)
            .args(["--ptx", "-O3", "-std=c++17"])
            .arg(format!("-arch=compute_{cap}"))
            .arg("-o")
            .arg(&ptx)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "feature `cuda`: cannot run nvcc ({}): {e}. Install the CUDA toolkit, or \
                     `pip install nvidia-cuda-nvcc` and set CUDA_ROOT (see scripts/check_cuda.sh)",
                    nvcc.display()
                )
            });
        if !status.success() {
            panic!("feature `cuda`: nvcc failed on {src} ({status})");
        }
    }
}

fn find_nvcc() -> PathBuf {
    if let Some(nvcc) = env::var_os("NVCC") {
        return nvcc.into();
    }
    for root in ["CUDA_ROOT", "CUDA_PATH", "CUDA_HOME"] {
        if let Some(root) = env::var_os(root) {
            let nvcc = PathBuf::from(root).join("bin").join("nvcc");
            if nvcc.exists() {
                return nvcc;
            }
        }
    }
    PathBuf::from("nvcc")
}
