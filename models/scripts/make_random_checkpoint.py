"""Write a random-weight Qwen3-VL checkpoint with Qwen3-VL-2B-Instruct's real dimensions.

For speed benchmarks only: speed does not depend on weight values. The tensor names and shapes
come from transformers' own Qwen3VLForConditionalGeneration built on the meta device (nothing
is allocated for it); each tensor is then drawn one at a time from a seeded generator and
written in bf16 shards with a model.safetensors.index.json, so peak memory stays near one
shard (SHARD_BYTES), not the 4.3 GB model.

Weights: matrices and embeddings normal(0, STD); norm weights 1; biases 0. With STD = 0.02
activations stay finite through 28 layers (checked by the converter and by Sightline's bench).

config.json is written the way transformers 4.57 wrote the Hub checkpoint (rope_theta and
rope_scaling inside text_config), like models/fixtures/tiny-a/config.json.

Usage: python models/scripts/make_random_checkpoint.py OUT_DIR [--seed N]
"""

import argparse
import json
import os

import torch
from safetensors.torch import save_file
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

STD = 0.02
SHARD_BYTES = 1 << 30
DTYPE = torch.bfloat16

# Qwen/Qwen3-VL-2B-Instruct config.json (Hub, transformers 4.57 layout).
TEXT = dict(
    vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
    num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
    max_position_embeddings=262144, hidden_act="silu", attention_bias=False,
    rope_parameters=dict(rope_type="default", rope_theta=5_000_000.0,
                         mrope_section=[24, 20, 20], mrope_interleaved=True),
)
VISION = dict(
    depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, in_channels=3,
    patch_size=16, temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=2048,
    num_position_embeddings=2304, deepstack_visual_indexes=[5, 11, 17],
    hidden_act="gelu_pytorch_tanh",
)
PREPROCESSOR_CONFIG = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}


def shapes():
    """(name, shape) of every stored tensor, in state-dict order (tied head left out)."""
    cfg = Qwen3VLConfig(text_config=TEXT, vision_config=VISION, tie_word_embeddings=True)
    with torch.device("meta"):
        model = Qwen3VLForConditionalGeneration(cfg)
    # save_pretrained drops the tied lm_head.weight; so do we.
    names = [(n, tuple(p.shape)) for n, p in model.state_dict().items() if n != "lm_head.weight"]
    return cfg, names


def draw(name, shape, gen):
    if name.endswith(".bias"):
        return torch.zeros(shape, dtype=DTYPE)
    if "norm" in name and len(shape) == 1:
        return torch.ones(shape, dtype=DTYPE)
    t = torch.empty(shape, dtype=torch.float32)
    t.normal_(0.0, STD, generator=gen)
    return t.to(DTYPE)


def config_json():
    """config.json as on the Hub (transformers 4.57 layout, keys as in tiny-a/config.json)."""
    text = {k: v for k, v in TEXT.items() if k != "rope_parameters"}
    rope = TEXT["rope_parameters"]
    text.update(model_type="qwen3_vl_text", attention_dropout=0.0, initializer_range=0.02,
                pad_token_id=None, use_cache=True, rope_theta=rope["rope_theta"],
                rope_scaling={"mrope_interleaved": rope["mrope_interleaved"],
                              "mrope_section": rope["mrope_section"], "rope_type": "default"})
    vision = dict(VISION, model_type="qwen3_vl_vision", initializer_range=0.02)
    return {
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "dtype": "bfloat16",
        "image_token_id": 151655,
        "model_type": "qwen3_vl",
        "text_config": dict(sorted(text.items())),
        "tie_word_embeddings": True,
        "transformers_version": "4.57.0",
        "video_token_id": 151656,
        "vision_config": dict(sorted(vision.items())),
        "vision_end_token_id": 151653,
        "vision_start_token_id": 151652,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    _, names = shapes()
    gen = torch.Generator().manual_seed(args.seed)

    weight_map, shard, shard_bytes, files, total = {}, {}, 0, [], 0

    def flush():
        nonlocal shard, shard_bytes
        if not shard:
            return
        fname = f"model-{len(files) + 1:05d}.safetensors"
        save_file(shard, os.path.join(args.out, fname), metadata={"format": "pt"})
        for k in shard:
            weight_map[k] = fname
        files.append(fname)
        print(f"{fname}: {len(shard)} tensors, {shard_bytes / 2**20:.0f} MiB", flush=True)
        shard, shard_bytes = {}, 0

    for name, shape in names:
        t = draw(name, shape, gen)
        nbytes = t.numel() * t.element_size()
        if shard and shard_bytes + nbytes > SHARD_BYTES:
            flush()
        shard[name] = t
        shard_bytes += nbytes
        total += nbytes
    flush()

    # Shards are named -0000i-of-0000n as on the Hub once the count is known.
    n = len(files)
    renames = {f: f.replace(".safetensors", f"-of-{n:05d}.safetensors") for f in files}
    for old, new in renames.items():
        os.replace(os.path.join(args.out, old), os.path.join(args.out, new))
    weight_map = {k: renames[v] for k, v in weight_map.items()}
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              open(os.path.join(args.out, "model.safetensors.index.json"), "w"), indent=2)
    json.dump(config_json(), open(os.path.join(args.out, "config.json"), "w"), indent=2)
    json.dump(PREPROCESSOR_CONFIG, open(os.path.join(args.out, "preprocessor_config.json"), "w"),
              indent=2)
    print(f"{len(names)} tensors, {total / 2**30:.2f} GiB in {n} shards -> {args.out}")


if __name__ == "__main__":
    main()
