#!/usr/bin/env bash
# Build llama.cpp's `llama-bench`, `llama-mtmd-cli` and `llama-quantize` (CPU only, Release)
# from the llama.cpp sources vendored in the PyPI sdist of llama-cpp-python, for side-by-side
# benchmarks against Sightline (`sightline bench --compare-llama-cpp`, benches/model.rs).
#
# Usage: models/scripts/build_llama_cpp.sh [SRC_DIR] [OUT_DIR]
#   SRC_DIR  a llama.cpp source tree (e.g. .../llama_cpp_python-0.3.36/vendor/llama.cpp).
#            Omitted or empty: the sdist is fetched with
#            `pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all:` and unpacked
#            under $WORK_DIR (default /tmp/llama-cpp-src).
#   OUT_DIR  default /opt/llama-bin. The CMake build tree is $OUT_DIR/build; the binaries and
#            the shared libraries they link are in $OUT_DIR/build/bin, linked from $OUT_DIR.
#   JOBS     env, parallel compile jobs (default 2).
# The converter, convert_hf_to_gguf.py, is Python and needs no build: run it from SRC_DIR with
# PYTHONPATH=SRC_DIR/gguf-py (see models/scripts/make_gguf.sh).
#
# Why each flag:
#   -DGGML_NATIVE=OFF      A native build (-march=native plus ggml's own feature probe) died here
#                          with an illegal instruction: this VM's CPU reports AMX that the VM does
#                          not enable. So every instruction set is named explicitly below, from
#                          what /proc/cpuinfo lists on this machine (an Ice Lake class Xeon:
#                          avx2 fma f16c bmi2 avx512f/cd/bw/dq/vl avx512vbmi avx512_vnni; no
#                          avx512_bf16, no avx_vnni, no amx). The script prints a warning when
#                          the running CPU lacks one of the features it turns on.
#   GGML_SSE42/AVX/AVX2/FMA/F16C/BMI2=ON   baseline x86-64-v3 kernels.
#   GGML_AVX512=ON         -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw (the
#                          AVX512 quantized dot products).
#   GGML_AVX512_VBMI=ON    present on this CPU (avx512vbmi), used by some q-dot kernels.
#   GGML_AVX512_VNNI=ON    present (avx512_vnni): int8 dot products for Q4_K/Q8_0 x Q8_K.
#   GGML_AVX512_BF16=OFF   absent on this CPU.
#   GGML_AVX_VNNI=OFF      absent on this CPU (the VEX-encoded variant; AVX512-VNNI covers it).
#   GGML_AMX_TILE/INT8/BF16=OFF  the cause of the illegal instruction above.
#   GGML_OPENMP=ON (default)     thread pool as llama.cpp ships it.
#   GGML_CUDA/METAL/VULKAN… off by default: CPU only, like the Sightline CPU numbers.
#   LLAMA_BUILD_TESTS/EXAMPLES/SERVER/APP=OFF, LLAMA_OPENSSL=OFF: nothing else is needed, and
#                          no network is touched during the build.
#   --target llama-bench llama-mtmd-cli llama-quantize: only what the benchmarks use.
set -euo pipefail

VERSION=0.3.36
SRC=${1:-}
OUT=${2:-/opt/llama-bin}
JOBS=${JOBS:-2}
WORK_DIR=${WORK_DIR:-/tmp/llama-cpp-src}

missing=()
for tool in cmake make gcc g++; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "build_llama_cpp.sh: missing ${missing[*]}." >&2
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing cmake and build-essential with apt-get" >&2
    apt-get install -y cmake build-essential || { apt-get update && apt-get install -y cmake build-essential; }
  else
    echo "install them first, e.g.: sudo apt-get install cmake build-essential" >&2
    exit 1
  fi
fi

if [ -z "$SRC" ]; then
  mkdir -p "$WORK_DIR"
  sdist="$WORK_DIR/llama_cpp_python-$VERSION.tar.gz"
  if [ ! -f "$sdist" ]; then
    echo "fetching the llama-cpp-python $VERSION sdist from PyPI" >&2
    python3 -m pip download "llama-cpp-python==$VERSION" --no-deps --no-binary :all: -d "$WORK_DIR"
  fi
  tar -xzf "$sdist" -C "$WORK_DIR"
  SRC="$WORK_DIR/llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
SRC=$(cd "$SRC" && pwd)
[ -f "$SRC/ggml/CMakeLists.txt" ] || { echo "$SRC is not a llama.cpp source tree" >&2; exit 1; }

# Say so when this CPU lacks a feature turned on below (the binaries would then die with SIGILL).
if [ -r /proc/cpuinfo ]; then
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  for f in avx avx2 fma f16c bmi2 avx512f avx512cd avx512bw avx512dq avx512vl avx512vbmi avx512_vnni; do
    case "$flags" in *" $f "*) ;; *) echo "warning: this CPU does not list '$f'; edit the flags below" >&2 ;; esac
  done
fi

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cmake -S "$SRC" -B "$OUT/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=OFF \
  -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
  -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=OFF \
  -DGGML_AVX_VNNI=OFF \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF
cmake --build "$OUT/build" --config Release -j "$JOBS" \
  --target llama-bench llama-mtmd-cli llama-quantize

# llama.cpp puts binaries and its shared libraries in build/bin (the binaries find the
# libraries there through their RUNPATH), so OUT gets links to them.
for bin in llama-bench llama-mtmd-cli llama-quantize; do
  [ -x "$OUT/build/bin/$bin" ] || { echo "build finished but build/bin/$bin is missing" >&2; exit 1; }
  ln -sfn "build/bin/$bin" "$OUT/$bin"
done
"$OUT/llama-bench" --help >/dev/null 2>&1 || { echo "$OUT/llama-bench does not run" >&2; exit 1; }
echo "built into $OUT: llama-bench llama-mtmd-cli llama-quantize"
echo "converter: PYTHONPATH=$SRC/gguf-py python $SRC/convert_hf_to_gguf.py"
