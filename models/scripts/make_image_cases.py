"""Make models/fixtures/image_cases.safetensors: Pillow reference cases for image preprocessing.

The screenshots under fixtures/screens/ pin the whole pipeline on three RGB images. These
cases pin the parts those cannot reach, each against Pillow / transformers as the reference
runs them (fixed seed, deterministic):

  conv_<name>.png        (n,) u8       a PNG in an unusual pixel format, written byte by byte
  conv_<name>.rgb        (h, w, 3) u8  transformers' convert_to_rgb on Image.open(png)
        names: gray8, gray_alpha8, gray16, gray_alpha16, rgb16, rgba16, rgba8, palette_trns,
               gray_trns, rgb_trns
  resize_<i>.src         (h, w, 3) u8  random RGB noise (the hardest input for a resampler)
  resize_<i>.out         (H, W, 3) u8  Pillow's Image.resize((W, H), BICUBIC): downscales,
                                       upscales, one side only, extreme ratios, both pass
                                       orders, then random small sizes
  rgba_pipeline.png      (n,) u8       a random RGBA PNG with every alpha level
  rgba_pipeline.pixel_values  (k, 1536) f32   Qwen2VLImageProcessorPil output (budget in metadata)
  rgba_pipeline.image_grid_thw (3,) i64

Usage: /opt/fixvenv/bin/python models/scripts/make_image_cases.py models/fixtures/image_cases.safetensors
"""

import io
import struct
import sys
import zlib

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers.image_transforms import convert_to_rgb
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

SEED = 20261130
# Pipeline budget for rgba_pipeline: 4 to 16 visual tokens, so the file stays small.
MIN_PIXELS = 4 * 32 * 32
MAX_PIXELS = 16 * 32 * 32

# (source w, h) -> (target w, h)
RESIZES = [
    ((300, 220), (256, 160)),   # the ui_resize downscale, on noise
    ((97, 61), (64, 32)),       # non-integer downscale both ways
    ((20, 15), (64, 32)),       # upscale
    ((50, 30), (50, 64)),       # vertical only (Pillow skips the horizontal pass)
    ((50, 30), (96, 30)),       # horizontal only
    ((700, 30), (528, 32)),     # a ui_wide-like ratio, down one way and up the other
    ((7, 300), (32, 96)),       # tall and thin, upscale one way, downscale the other
    ((640, 8), (32, 32)),       # strong downscale: support 40 taps
    ((93, 65), (81, 3)),        # height shrinks far more: Pillow 13 runs the vertical pass first
]
N_RANDOM_RESIZES = 8            # then random small sizes, both pass orders


def png_bytes(width, height, color_type, bit_depth, rows, extra_chunks=()):
    """A PNG written chunk by chunk, so any colour type / bit depth can be made."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + r for r in rows)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0))
    for kind, data in extra_chunks:
        out += chunk(kind, data)
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def conversion_cases(rng):
    w, h = 13, 9
    cases = {}

    def rows8(arr):
        return [arr[y].astype(np.uint8).tobytes() for y in range(arr.shape[0])]

    def rows16(arr):
        return [arr[y].astype(">u2").tobytes() for y in range(arr.shape[0])]

    u8 = lambda *s: rng.integers(0, 256, size=s, dtype=np.uint16)  # noqa: E731
    u16 = lambda *s: rng.integers(0, 65536, size=s, dtype=np.uint32)  # noqa: E731

    cases["gray8"] = png_bytes(w, h, 0, 8, rows8(u8(h, w)))
    ga = u8(h, w, 2)
    ga[0, :, 1] = 0
    ga[1, :, 1] = 255
    cases["gray_alpha8"] = png_bytes(w, h, 4, 8, rows8(ga.reshape(h, w * 2)))
    g16 = u16(h, w)
    g16[0] = rng.integers(0, 256, size=w)  # some values a byte can hold: Pillow keeps them
    cases["gray16"] = png_bytes(w, h, 0, 16, rows16(g16))
    cases["gray_alpha16"] = png_bytes(w, h, 4, 16, rows16(u16(h, w * 2)))
    cases["rgb16"] = png_bytes(w, h, 2, 16, rows16(u16(h, w * 3)))
    rgba16 = u16(h, w, 4)
    rgba16[0, :, 3] = 65535
    cases["rgba16"] = png_bytes(w, h, 6, 16, rows16(rgba16.reshape(h, w * 4)))
    rgba8 = u8(h, w, 4)
    rgba8[0, :, 3] = 255
    rgba8[1, :, 3] = 0
    cases["rgba8"] = png_bytes(w, h, 6, 8, rows8(rgba8.reshape(h, w * 4)))
    palette = u8(16, 3).astype(np.uint8).tobytes()
    trns = u8(16).astype(np.uint8).tobytes()
    cases["palette_trns"] = png_bytes(w, h, 3, 8, rows8(rng.integers(0, 16, size=(h, w))),
                                      [(b"PLTE", palette), (b"tRNS", trns)])
    gray = u8(h, w)
    gray[::2, ::3] = 77
    cases["gray_trns"] = png_bytes(w, h, 0, 8, rows8(gray), [(b"tRNS", struct.pack(">H", 77))])
    rgb = u8(h, w, 3)
    rgb[::3, ::2] = (10, 20, 30)
    cases["rgb_trns"] = png_bytes(w, h, 2, 8, rows8(rgb.reshape(h, w * 3)),
                                  [(b"tRNS", struct.pack(">HHH", 10, 20, 30))])

    tensors = {}
    for name, data in cases.items():
        img = Image.open(io.BytesIO(data))
        ref = convert_to_rgb(img, return_numpy=True)
        assert ref.shape == (h, w, 3) and ref.dtype == np.uint8, (name, ref.shape, ref.dtype)
        tensors[f"conv_{name}.png"] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        tensors[f"conv_{name}.rgb"] = torch.from_numpy(np.ascontiguousarray(ref))
        print(f"conv_{name}: Pillow mode {img.mode}, {len(data)} bytes")
    return tensors


def resize_cases(rng):
    tensors = {}
    sizes = list(RESIZES)
    for _ in range(N_RANDOM_RESIZES):
        sw, sh, tw, th = (int(v) for v in rng.integers(2, 64, size=4))
        sizes.append(((sw, sh), (tw, th)))
    for i, ((sw, sh), (tw, th)) in enumerate(sizes):
        src = rng.integers(0, 256, size=(sh, sw, 3), dtype=np.uint8)
        out = np.array(Image.fromarray(src).resize((tw, th), resample=Image.BICUBIC))
        tensors[f"resize_{i}.src"] = torch.from_numpy(src)
        tensors[f"resize_{i}.out"] = torch.from_numpy(np.ascontiguousarray(out))
        print(f"resize_{i}: {sw}x{sh} -> {tw}x{th}")
    return tensors


def pipeline_case(rng):
    w, h = 150, 70
    rgba = rng.integers(0, 256, size=(h, w, 4), dtype=np.uint8)
    rgba[:, :, 3] = (np.arange(w * h).reshape(h, w) % 256).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buf, "PNG")
    data = buf.getvalue()
    proc = Qwen2VLImageProcessorPil(
        size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
        patch_size=16, temporal_patch_size=2, merge_size=2,
        image_mean=[0.48145466, 0.4578275, 0.40821073], image_std=[0.26862954, 0.26130258, 0.27577711],
    )
    feats = proc(images=[Image.open(io.BytesIO(data))], return_tensors="pt")
    grid = feats["image_grid_thw"].long()[0].contiguous()
    print(f"rgba_pipeline: {w}x{h} -> grid {grid.tolist()}")
    return {
        "rgba_pipeline.png": torch.frombuffer(bytearray(data), dtype=torch.uint8),
        "rgba_pipeline.pixel_values": feats["pixel_values"].float().contiguous(),
        "rgba_pipeline.image_grid_thw": grid,
    }


def main(out):
    rng = np.random.default_rng(SEED)
    tensors = {}
    tensors.update(conversion_cases(rng))
    tensors.update(resize_cases(rng))
    tensors.update(pipeline_case(rng))
    save_file(tensors, out, metadata={
        "min_pixels": str(MIN_PIXELS), "max_pixels": str(MAX_PIXELS),
        "image_mean": "0.48145466,0.4578275,0.40821073",
        "image_std": "0.26862954,0.26130258,0.27577711",
        "pillow": Image.__version__ if hasattr(Image, "__version__") else "",
    })


if __name__ == "__main__":
    main(sys.argv[1])
