#!/usr/bin/env bash
# Compile every CUDA code path without a GPU: candle's CUDA kernels and Sightline's
# (kernels/*.cu through build.rs), and the Rust code behind `--features cuda`,
# including the CUDA tests. CUDA's compiler comes from PyPI into a venv.
#
#   scripts/check_cuda.sh [VENV_DIR]      default VENV_DIR: target/cudavenv
#
# Environment: CUDA_TARGET_DIR (default target/cuda: a target dir of its own, so the
# cuda feature never invalidates the normal build's artifacts), CUDA_COMPUTE_CAP
# (default 90). It runs `cargo check`, not `build`: build scripts still run nvcc on
# every kernel, only Rust code generation is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${1:-target/cudavenv}
# nvcc, runtime, nvvm and crt pinned to one release: a newer nvvm beside an older
# nvcc emits PTX that its ptxas rejects, and cudarc 0.19 refuses CUDA above 13.4.
# cccl (headers only) is versioned on its own; this is the one tested with them.
packages=(
  "nvidia-cuda-nvcc==13.4.92"
  "nvidia-cuda-runtime==13.4.92"
  "nvidia-nvvm==13.4.92"
  "nvidia-cuda-crt==13.4.92"
  "nvidia-cuda-cccl==13.3.5.0.6"
)

start=$(date +%s)
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q "${packages[@]}"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cuda_root="$site/nvidia/cu13"
[ -x "$cuda_root/bin/nvcc" ] || { echo "check_cuda: no nvcc under $cuda_root" >&2; exit 1; }

export PATH="$cuda_root/bin:$PATH"
export CUDA_ROOT="$cuda_root"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export CARGO_TARGET_DIR="${CUDA_TARGET_DIR:-target/cuda}"
nvcc --version | tail -n 2
cargo check --lib --test all --features cuda
echo "check_cuda: done in $(( $(date +%s) - start ))s"
