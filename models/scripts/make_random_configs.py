"""Randomized differential fixtures: N random tiny Qwen3-VL configurations, each with one image
(or a text-only prompt), and the reference (transformers) outputs for them.

Unlike the two hand-picked checkpoints of make_tiny_models.py, these vary what the image path
depends on: odd head counts, head_dim 24 or 40 (text and vision), 1-4 vision heads, DeepStack
taps on the last vision layer or none (and sometimes an earlier one), learned position grids from
6x6 to 48x48 (so the bilinear resampling runs both up and down), M-RoPE sections, rope bases,
both config.json layouts (transformers 4.57 `rope_scaling` + `rope_theta`, 5.x
`rope_parameters`), weights scaled x4 (norms left at 1), and images that are exact multiples of
32, resized, very wide or very tall. The vocabulary is small (the image/vision token ids are
taken from its top), so each checkpoint is a few hundred KB.

Output, one directory per configuration under OUT/<name>/:
  config.json, model.safetensors   the checkpoint (bf16), read back in f32 for the goldens
  image.png, preprocessor_config.json   the image and the visual-token budget it was preprocessed at
  golden.safetensors
    pixel_values    (patches, patch_dim) f32   reference preprocessing (absent for text cases)
    image_grid_thw  (3,) i64
    input_ids       (n,) i64      the prompt: random text ids, vision_start, pads, vision_end, ...
    position_ids    (3, n) i64    M-RoPE positions as the reference computes them
    image_embeds    (k, hidden)   merger output
    deepstack_<i>   (k, hidden)   DeepStack merger outputs
    logits          (n, vocab) f32  logits at every position
    pixel_values_torchvision, logits_torchvision   the same through transformers' torchvision
                    image processor, when torchvision is installed (reported, not compared)
  case.json         what was drawn (for the test's report)

Usage: python make_random_configs.py OUT [--n 16] [--seed 17] [--only r03,r05] [--no-torchvision]
The committed subset: python make_random_configs.py ../fixtures/random --only r03,r05,r07,r15 --no-torchvision
"""

import argparse
import json
import os
import random
import sys

import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

sys.path.insert(0, os.path.dirname(__file__))
from make_tiny_models import draw_screen, to_457_style  # noqa: E402

WEIGHT_SCALE = 4.0
PATCH = 16
MERGE = 2


def draw_config(rng, index):
    """One random configuration, as keyword arguments for Qwen3VLConfig plus extras."""
    head_dim = rng.choice([24, 40])
    heads = rng.choice([1, 3, 5, 7])
    kv_heads = rng.choice([h for h in (1, heads) if heads % h == 0])
    half = head_dim // 2
    h_sec = rng.randint(1, half // 3)
    w_sec = h_sec if rng.random() < 0.6 else rng.randint(1, half // 3)
    t_sec = half - h_sec - w_sec
    text = dict(
        hidden_size=rng.choice([24, 40, 56, 64]),
        intermediate_size=rng.choice([48, 80, 96]),
        num_hidden_layers=rng.randint(1, 3),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=1e-6,
        rope_parameters=dict(rope_type="default", rope_theta=rng.choice([10_000.0, 1_000_000.0, 5_000_000.0]),
                             mrope_section=[t_sec, h_sec, w_sec], mrope_interleaved=True),
    )
    v_heads = rng.randint(1, 4)
    v_head_dim = rng.choice([24, 40])
    depth = rng.randint(1, 3)
    deepstack = rng.choice(["none", "last", "last_and_first"])
    taps = {"none": [], "last": [depth - 1], "last_and_first": sorted({0, depth - 1})}[deepstack]
    side = rng.choice([6, 8, 11, 16, 24, 33, 48])
    vision = dict(
        depth=depth,
        hidden_size=v_heads * v_head_dim,
        intermediate_size=rng.choice([64, 96, 128]),
        num_heads=v_heads,
        patch_size=PATCH,
        temporal_patch_size=2,
        spatial_merge_size=MERGE,
        out_hidden_size=text["hidden_size"],
        num_position_embeddings=side * side,
        deepstack_visual_indexes=taps,
    )
    # The reference ignores DeepStack taps beyond the text layers; Sightline refuses such a
    # config (no real checkpoint has one), so every tap gets a text layer.
    text["num_hidden_layers"] = max(text["num_hidden_layers"], len(taps))
    vocab = rng.choice([384, 512])
    return dict(
        name=f"r{index:02d}",
        seed=1000 + index,
        style=rng.choice(["4.57", "5.x"]),
        vocab=vocab,
        text=text,
        vision=vision,
        tie=rng.random() < 0.5,
        image=rng.choice(["exact", "resized", "wide", "tall", "exact", "resized"]),
    )


def draw_image(rng, kind):
    """(width, height, min_pixels, max_pixels) of one image case."""
    max_tokens = rng.choice([24, 48, 96, 160])
    budget = (4 * 32 * 32, max_tokens * 32 * 32)
    if kind == "exact":
        while True:
            w, h = 32 * rng.randint(2, 16), 32 * rng.randint(2, 12)
            if (w // 32) * (h // 32) <= max_tokens:
                return w, h, budget
    if kind == "resized":
        return rng.randint(90, 700), rng.randint(70, 500), budget
    if kind == "wide":
        return rng.randint(900, 1600), rng.randint(40, 90), budget
    return rng.randint(40, 90), rng.randint(700, 1400), budget  # tall


def make_model(spec):
    torch.manual_seed(spec["seed"])
    vocab = spec["vocab"]
    cfg = Qwen3VLConfig(
        text_config=dict(vocab_size=vocab, **spec["text"]),
        vision_config=spec["vision"],
        tie_word_embeddings=spec["tie"],
        image_token_id=vocab - 1,
        video_token_id=vocab - 2,
        vision_start_token_id=vocab - 3,
        vision_end_token_id=vocab - 4,
    )
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.mul_(WEIGHT_SCALE)
            elif "norm" not in name:
                p.copy_(torch.randn_like(p) * 0.1)
    return model


@torch.no_grad()
def golden(model, ids, image_pad, pixel_values=None, grid=None):
    input_ids = torch.tensor([ids])
    kwargs = {}
    out = {}
    inner = model.model
    if pixel_values is not None:
        kwargs = dict(pixel_values=pixel_values, image_grid_thw=grid,
                      mm_token_type_ids=(input_ids == image_pad).int())
        position_ids, _ = inner.get_rope_index(input_ids, image_grid_thw=grid,
                                               mm_token_type_ids=kwargs["mm_token_type_ids"])
        feats = inner.get_image_features(pixel_values, grid)
        out["image_embeds"] = torch.cat(list(feats.pooler_output)).float()
        for i, ds in enumerate(feats.deepstack_features):
            out[f"deepstack_{i}"] = torch.cat(list(ds)).float()
        out["pixel_values"] = pixel_values.float()
        out["image_grid_thw"] = grid[0].long()
    else:
        position_ids = torch.arange(len(ids)).view(1, 1, -1).expand(3, 1, -1)
    out["position_ids"] = position_ids[:, 0, :].long()
    out["input_ids"] = input_ids[0].long()
    out["logits"] = model(input_ids=input_ids, **kwargs).logits[0].float()
    return {k: v.contiguous() for k, v in out.items()}


@torch.no_grad()
def torchvision_logits(model, ids, image_pad, img, min_px, max_px, grid):
    """The same prompt through transformers' default image processor (`Qwen2VLImageProcessor`,
    torchvision backend in 5.x, what AutoProcessor loads for Qwen3-VL), when torchvision is
    installed: its bicubic resize differs from Pillow's (the PIL backend, which Sightline and
    the goldens above follow), so these logits measure the backends' disagreement, not ours."""
    try:
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
        proc = Qwen2VLImageProcessor(
            size={"shortest_edge": min_px, "longest_edge": max_px},
            patch_size=PATCH, temporal_patch_size=2, merge_size=MERGE,
            image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
        )
        feats = proc(images=[img], return_tensors="pt")
    except ImportError:
        return None
    if feats["image_grid_thw"][0].tolist() != grid[0].tolist():
        return None
    input_ids = torch.tensor([ids])
    pv = feats["pixel_values"].float().contiguous()
    logits = model(input_ids=input_ids, pixel_values=pv, image_grid_thw=feats["image_grid_thw"],
                   mm_token_type_ids=(input_ids == image_pad).int()).logits[0].float()
    return {"pixel_values_torchvision": pv, "logits_torchvision": logits.contiguous()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--only", default="", help="comma-separated names to write (the same draws as without)")
    ap.add_argument("--no-torchvision", action="store_true", help="skip the torchvision comparison")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    rng = random.Random(args.seed)
    for index in range(args.n):
        spec = draw_config(rng, index)
        # Every random draw happens for every configuration, written or not, so that --only
        # writes exactly what a full run writes.
        vocab = spec["vocab"]
        text_ids = lambda n: [rng.randrange(0, vocab - 8) for _ in range(n)]  # noqa: E731
        w, h, (min_px, max_px) = draw_image(rng, spec["image"])
        proc = Qwen2VLImageProcessorPil(
            size={"shortest_edge": min_px, "longest_edge": max_px},
            patch_size=PATCH, temporal_patch_size=2, merge_size=MERGE,
            image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
        )
        img = draw_screen(w, h, spec["seed"], spec["name"])
        feats = proc(images=[img.convert("RGB")], return_tensors="pt")
        pv = feats["pixel_values"].float().contiguous()
        grid = feats["image_grid_thw"].long().contiguous()
        n_img = int(grid.prod()) // (MERGE * MERGE)
        ids = text_ids(rng.randint(2, 6)) + [vocab - 3] + [vocab - 1] * n_img + [vocab - 4] + text_ids(rng.randint(3, 9))
        if only and spec["name"] not in only:
            continue

        ckpt = os.path.join(args.out, spec["name"])
        os.makedirs(ckpt, exist_ok=True)
        model = make_model(spec).to(torch.bfloat16)
        model.save_pretrained(ckpt, safe_serialization=True)
        if spec["style"] == "4.57":
            to_457_style(os.path.join(ckpt, "config.json"))
        gen = os.path.join(ckpt, "generation_config.json")
        if os.path.exists(gen):
            os.remove(gen)
        ref = Qwen3VLForConditionalGeneration.from_pretrained(ckpt, dtype=torch.float32).eval()
        png = os.path.join(ckpt, "image.png")
        img.save(png, optimize=True)
        # The PNG is lossless: what Sightline reads back is what was preprocessed above.
        assert (Image.open(png).convert("RGB").tobytes() == img.convert("RGB").tobytes())
        json.dump({"size": {"shortest_edge": min_px, "longest_edge": max_px}, "patch_size": PATCH,
                   "temporal_patch_size": 2, "merge_size": MERGE, "image_mean": [0.5, 0.5, 0.5],
                   "image_std": [0.5, 0.5, 0.5]},
                  open(os.path.join(ckpt, "preprocessor_config.json"), "w"), indent=1)
        g = golden(ref, ids, vocab - 1, pv, grid)
        if not args.no_torchvision:
            tv = torchvision_logits(ref, ids, vocab - 1, img.convert("RGB"), min_px, max_px, grid)
            if tv is not None:
                g.update(tv)
        save_file(g, os.path.join(ckpt, "golden.safetensors"))
        case = dict(spec, image_size=[w, h], budget_pixels=[min_px, max_px], grid_thw=grid[0].tolist(),
                    tokens=len(ids))
        json.dump(case, open(os.path.join(ckpt, "case.json"), "w"), indent=1)
        print(f"{spec['name']}: {spec['style']} text heads {spec['text']['num_attention_heads']}/"
              f"{spec['text']['num_key_value_heads']}x{spec['text']['head_dim']} vision heads "
              f"{spec['vision']['num_heads']}x{spec['vision']['hidden_size'] // spec['vision']['num_heads']} "
              f"pos grid {int(spec['vision']['num_position_embeddings'] ** 0.5)}^2 deepstack "
              f"{spec['vision']['deepstack_visual_indexes']} image {spec['image']} {w}x{h} -> grid "
              f"{grid[0].tolist()}, {len(ids)} tokens", flush=True)


if __name__ == "__main__":
    main()
