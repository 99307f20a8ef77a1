#!/usr/bin/env python3
"""Generates core/testdata/quant/vectors.bin: blocks of every format with their dequantized
values (and, where gguf-py implements it, the quantized bytes of random f32 input), computed
by the `gguf` Python package's reference numpy code, independent of our Rust code.

    pip install gguf==0.19.0 numpy && python3 scripts/gen-quant-vectors.py

(MXFP4, then IQ4_NL and IQ4_XS, come last, so adding them left every earlier record's bytes
as they were. gguf-py has no IQ4 quantizers: those two have dequantization records only.)

Record layout (little-endian): b"QV", kind u8 (0 = dequant, 1 = quant), type id u32,
n_elements u32, n_bytes u32, then for kind 0: bytes, f32 values; for kind 1: f32 input, bytes.
"""
import struct
import sys
from pathlib import Path

import numpy as np
import gguf
import gguf.quants as q
from gguf import GGMLQuantizationType as T

rng = np.random.default_rng(20261122)
out = bytearray()

# byte offsets of f16 scale fields inside each block (kept finite and sane)
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}


def blocks_for(t, n_blocks, mode):
    bs, ts = gguf.GGML_QUANT_SIZES[t]
    if t in (T.F32, T.F16, T.BF16):
        vals = rng.standard_normal(n_blocks * bs).astype(np.float32) * (1000.0 if mode == "extreme" else 1.0)
        if mode == "zero":
            vals[:] = 0
        return q.quantize(vals, t).view(np.uint8).tobytes()
    raw = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    if mode == "zero":
        raw[:] = 0
    if t == T.MXFP4:
        # the E8M0 exponent byte: 2^(e-128) times the doubled E2M1 values (up to 12); 0 and 1
        # are the subnormal scales, 252 the largest whose values stay finite (255 is NaN)
        if mode == "extreme":
            e = rng.choice([0, 1, 2, 127, 252], size=n_blocks)
        elif mode == "random":
            e = rng.integers(100, 140, size=n_blocks)
        else:
            e = np.zeros(n_blocks)
        raw[:, 0] = e.astype(np.uint8)
        return raw.tobytes()
    for off in F16_FIELDS[t]:
        if mode == "extreme":
            scale = rng.choice([65504.0, -65504.0, 6.1e-5, 1e-7, 0.0], size=n_blocks)
        else:
            scale = rng.standard_normal(n_blocks) * 0.05
        raw[:, off:off + 2] = np.asarray(scale, dtype=np.float16).view(np.uint8).reshape(n_blocks, 2)
    return raw.tobytes()


def record(kind, t, n, payload_a, payload_b, n_bytes):
    out.extend(b"QV")
    out.extend(struct.pack("<BIII", kind, int(t), n, n_bytes))
    out.extend(payload_a)
    out.extend(payload_b)


for t in [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
          T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.MXFP4, T.IQ4_NL, T.IQ4_XS]:
    bs, ts = gguf.GGML_QUANT_SIZES[t]
    n_blocks = max(1, 2048 // bs) if bs > 1 else 64
    for mode in ["random", "zero", "extreme"]:
        data = blocks_for(t, n_blocks if mode == "random" else 2, mode)
        nb = len(data) // ts
        vals = q.dequantize(np.frombuffer(data, dtype=np.uint8), t).astype(np.float32).reshape(-1)
        assert vals.size == nb * bs
        record(0, t, vals.size, data, vals.tobytes(), len(data))
    if t in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.F16, T.BF16, T.MXFP4):
        x = (rng.standard_normal(bs * 64) * rng.choice([0.01, 1.0, 30.0])).astype(np.float32)
        qb = q.quantize(x.reshape(1, -1), t).view(np.uint8).tobytes()
        record(1, t, x.size, x.tobytes(), qb, len(qb))

path = Path(__file__).resolve().parent.parent / "core/testdata/quant/vectors.bin"
path.write_bytes(bytes(out))
print(f"wrote {len(out)} bytes to {path}", file=sys.stderr)
