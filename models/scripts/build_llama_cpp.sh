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
#   ISA      env: auto (default) turns on every instruction set the running CPU lists in
#            /proc/cpuinfo; avx2 builds an AVX2+FMA+F16C+BMI2 llama.cpp with every AVX-512 and
#            VNNI kernel off, whatever the CPU has (the comparison with Sightline forced to
#            its AVX2 path, SIGHTLINE_CPU_FEATURES=avx2, on an AVX-512 machine); avxvnni
#            builds the same plus AVX-VNNI (the 256-bit VNNI of Intel Alder Lake and later
#            desktops, no AVX-512), for the comparison with candle and Sightline held at
#            that tier (MISTRALRS_FORCE_AVXVNNI=1) on a CPU that lists avx_vnni.
#
# Why each flag:
#   -DGGML_NATIVE=OFF      A native build (-march=native plus ggml's own feature probe) died on a
#                          VM whose CPU reports AMX that the VM does not enable. So each
#                          instruction set is named explicitly, from what /proc/cpuinfo lists
#                          (a build made with ISA=auto runs only on CPUs with the same features).
#   GGML_SSE42/AVX/AVX2/FMA/F16C/BMI2     sse4_2 avx avx2 fma f16c bmi2, each when listed.
#   GGML_AVX512            avx512f+cd+vl+dq+bw all listed (-mavx512f … -mavx512bw).
#   GGML_AVX512_VBMI/VNNI/BF16   avx512vbmi, avx512_vnni, avx512_bf16 when listed.
#   GGML_AVX_VNNI          avx_vnni (the VEX-encoded variant) when listed.
#   GGML_AMX_TILE/INT8/BF16=OFF  always: the cause of the illegal instruction above.
#   GGML_OPENMP=ON (default)     thread pool as llama.cpp ships it.
#   GGML_CUDA/METAL/VULKAN… off by default: CPU only, like the Sightline CPU numbers.
#   LLAMA_BUILD_TESTS/EXAMPLES/SERVER/APP=OFF, LLAMA_OPENSSL=OFF: nothing else is needed, and
#                          no network is touched during the build.
#   --target llama-bench llama-mtmd-cli llama-quantize: only what the benchmarks use.
#   On a CPU that is not x86-64 (no such flags in /proc/cpuinfo) ggml's native build is used.
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

ISA=${ISA:-auto}
case "$ISA" in auto|avx2|avxvnni) ;; *) echo "ISA must be auto, avx2 or avxvnni, not '$ISA'" >&2; exit 2 ;; esac
flags=" $( (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true) | cut -d: -f2) "
has() { case "$flags" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
onoff() { if "$@"; then echo ON; else echo OFF; fi; }
avx512() { has avx512f && has avx512cd && has avx512vl && has avx512dq && has avx512bw; }
isa_flags=()
if has avx2; then
  isa_flags=(-DGGML_NATIVE=OFF
    -DGGML_SSE42="$(onoff has sse4_2)" -DGGML_AVX="$(onoff has avx)" -DGGML_AVX2=ON
    -DGGML_FMA="$(onoff has fma)" -DGGML_F16C="$(onoff has f16c)" -DGGML_BMI2="$(onoff has bmi2)"
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
  if [ "$ISA" = avxvnni ] && ! has avx_vnni; then
    echo "ISA=avxvnni: this CPU does not list avx_vnni" >&2
    exit 2
  fi
  if [ "$ISA" != auto ]; then
    isa_flags+=(-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
                -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI="$(onoff test "$ISA" = avxvnni)")
  else
    isa_flags+=(-DGGML_AVX512="$(onoff avx512)"
                -DGGML_AVX512_VBMI="$(onoff has avx512vbmi)"
                -DGGML_AVX512_VNNI="$(onoff has avx512_vnni)"
                -DGGML_AVX512_BF16="$(onoff has avx512_bf16)"
                -DGGML_AVX_VNNI="$(onoff has avx_vnni)")
  fi
elif [ "$ISA" != auto ]; then
  echo "ISA=$ISA: this CPU does not list avx2" >&2
  exit 2
else
  isa_flags=(-DGGML_NATIVE=ON)
fi
echo "llama.cpp instruction sets (ISA=$ISA): ${isa_flags[*]}" >&2

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cmake -S "$SRC" -B "$OUT/build" \
  -DCMAKE_BUILD_TYPE=Release \
  "${isa_flags[@]}" \
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
