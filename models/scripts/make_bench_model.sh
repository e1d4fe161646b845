#!/usr/bin/env bash
# Make the random-weight Qwen3-VL model with Qwen3-VL-2B-Instruct's real dimensions that the
# speed benchmarks use (benches/model.rs, `sightline bench --compare-llama-cpp`), in both
# forms Sightline loads, converted and quantized by llama.cpp's own tools:
#
#   OUT_DIR/safetensors/        HF checkpoint, bf16 shards + index, config.json, tokenizer files
#                               (the quantize-at-load input)
#   OUT_DIR/text-f16.gguf       convert_hf_to_gguf.py --outtype f16 (KEEP_F16=0: deleted after)
#   OUT_DIR/text-Q4_K_M.gguf    llama-quantize text-f16.gguf Q4_K_M
#   OUT_DIR/text-Q8_0.gguf      llama-quantize text-f16.gguf Q8_0
#   OUT_DIR/mmproj-f16.gguf     convert_hf_to_gguf.py --mmproj --outtype f16
#
# About 4.3 GB (safetensors) + 4.1 (f16) + 1.3 (Q4_K_M) + 2.2 (Q8_0) + 0.8 (mmproj) on disk;
# peak memory about 2 GB. Takes ~15 minutes on 2 cores. Steps whose output exists are skipped
# (delete a file to redo it).
#
# Usage: models/scripts/make_bench_model.sh [OUT_DIR] [LLAMA_SRC] [LLAMA_BIN]
#   OUT_DIR    default /opt/bench/qwen3vl-2b-random
#   LLAMA_SRC  llama.cpp sources (converter), default the llama-cpp-python 0.3.36 sdist at
#              /opt/llsrc/llama_cpp_python-0.3.36/vendor/llama.cpp
#   LLAMA_BIN  directory with llama-quantize (models/scripts/build_llama_cpp.sh), default
#              /opt/llama-bin
#   PYTHON     env, a Python with torch, transformers 5.x, safetensors, sentencepiece
#              (default /opt/fixvenv/bin/python, the fixture venv of models/README.md)
#   SEED       env, weight seed (default 2026)
#   KEEP_F16   env, 0 deletes text-f16.gguf once both quantized files exist (default 1: keep)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${1:-/opt/bench/qwen3vl-2b-random}
LLAMA=${2:-/opt/llsrc/llama_cpp_python-0.3.36/vendor/llama.cpp}
BIN=${3:-/opt/llama-bin}
PY=${PYTHON:-/opt/fixvenv/bin/python}
SEED=${SEED:-2026}

LLAMA=$(cd "$LLAMA" && pwd)
[ -f "$LLAMA/convert_hf_to_gguf.py" ] || { echo "no convert_hf_to_gguf.py in $LLAMA" >&2; exit 1; }
[ -x "$BIN/llama-quantize" ] || { echo "no $BIN/llama-quantize: run models/scripts/build_llama_cpp.sh" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ST="$OUT/safetensors"
export PYTHONPATH="$LLAMA/gguf-py${PYTHONPATH:+:$PYTHONPATH}"

if [ ! -f "$ST/model.safetensors.index.json" ]; then
  "$PY" "$HERE/make_random_checkpoint.py" "$ST" --seed "$SEED"
fi
# The converter reads the tokenizer through transformers; as Qwen's repos ship it (same as
# make_gguf.sh does for the fixtures).
if [ ! -f "$ST/tokenizer.json" ]; then
  gunzip -c "$REPO/models/fixtures/tokenizer.json.gz" > "$ST/tokenizer.json"
fi
cat > "$ST/tokenizer_config.json" <<'JSON'
{"tokenizer_class": "Qwen2Tokenizer", "bos_token": null, "eos_token": "<|im_end|>",
 "pad_token": "<|endoftext|>", "add_prefix_space": false, "model_max_length": 262144}
JSON

if [ ! -f "$OUT/text-f16.gguf" ] && { [ ! -f "$OUT/text-Q4_K_M.gguf" ] || [ ! -f "$OUT/text-Q8_0.gguf" ] || [ "${KEEP_F16:-1}" = 1 ]; }; then
  "$PY" "$LLAMA/convert_hf_to_gguf.py" "$ST" --outtype f16 --outfile "$OUT/text-f16.gguf.part"
  mv "$OUT/text-f16.gguf.part" "$OUT/text-f16.gguf"
fi
if [ ! -f "$OUT/mmproj-f16.gguf" ]; then
  "$PY" "$LLAMA/convert_hf_to_gguf.py" "$ST" --outtype f16 --mmproj --outfile "$OUT/mmproj-f16.gguf.part"
  mv "$OUT/mmproj-f16.gguf.part" "$OUT/mmproj-f16.gguf"
fi
for q in Q4_K_M Q8_0; do
  if [ ! -f "$OUT/text-$q.gguf" ]; then
    "$BIN/llama-quantize" "$OUT/text-f16.gguf" "$OUT/text-$q.gguf.part" "$q" "${THREADS:-2}"
    mv "$OUT/text-$q.gguf.part" "$OUT/text-$q.gguf"
  fi
done
# The f16 text GGUF is only the quantizer's input (the safetensors are the f16 source for
# quantize-at-load); KEEP_F16=0 deletes it to save 3.3 GB.
if [ "${KEEP_F16:-1}" = 0 ]; then rm -f "$OUT/text-f16.gguf"; fi
ls -l "$OUT" "$ST"
