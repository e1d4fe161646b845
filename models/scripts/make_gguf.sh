#!/usr/bin/env bash
# Convert the tiny checkpoints to llama.cpp GGUF with llama.cpp's own converter.
#
# The converter ships in the PyPI sdist of llama-cpp-python (vendor/llama.cpp/). Needs the
# fixture venv (torch, transformers, sentencepiece: see models/README.md).
#
# Usage: models/scripts/make_gguf.sh /path/to/llama.cpp models/fixtures
#   tiny-a: text f16 + mmproj f16;  tiny-b: text q8_0 + mmproj q8_0
set -euo pipefail
LLAMA=$(cd "$1" && pwd)
OUT=$(cd "$2" && pwd)
PY=${PYTHON:-python}
export PYTHONPATH="$LLAMA/gguf-py${PYTHONPATH:+:$PYTHONPATH}"

convert() { # name outtype
  local name=$1 outtype=$2 work
  work=$(mktemp -d)
  cp "$OUT/$name/config.json" "$OUT/$name/model.safetensors" "$OUT/$name/preprocessor_config.json" "$work/"
  gunzip -c "$OUT/tokenizer.json.gz" > "$work/tokenizer.json"
  # As Qwen's repos ship it; the converter reads the tokenizer through transformers.
  cat > "$work/tokenizer_config.json" <<'JSON'
{"tokenizer_class": "Qwen2Tokenizer", "bos_token": null, "eos_token": "<|im_end|>",
 "pad_token": "<|endoftext|>", "add_prefix_space": false, "model_max_length": 262144}
JSON
  "$PY" "$LLAMA/convert_hf_to_gguf.py" "$work" --outtype "$outtype" \
    --outfile "$OUT/$name/$name-$outtype.gguf"
  "$PY" "$LLAMA/convert_hf_to_gguf.py" "$work" --outtype "$outtype" --mmproj \
    --outfile "$OUT/$name/mmproj-$name-$outtype.gguf"
  rm -rf "$work"
}

convert tiny-a f16
convert tiny-b q8_0
