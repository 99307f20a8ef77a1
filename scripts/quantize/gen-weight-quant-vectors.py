#!/usr/bin/env python3
"""Generates core/testdata/quant/weights-quantize.bin: f32 rows and the bytes the pinned
llama.cpp's `ggml_quantize_chunk` (libggml-base, through ctypes, no importance matrix: what
llama-quantize runs without --imatrix) writes for them, for every type
`superinfer quantize` writes. Pure Python (no numpy).

    python3 scripts/quantize/gen-weight-quant-vectors.py [LLAMA_CPP_BIN_DIR]

(the directory defaults to what benches/build-llama-cpp.sh prints). Records as in
scripts/gen-quant-vectors.py (kind 1: b"QV", kind u8, type id u32, n u32, n_bytes u32,
f32 input, bytes).
"""
import ctypes
import random
import struct
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent.parent
bin_dir = sys.argv[1] if len(sys.argv) > 1 else subprocess.run(
    ["bash", str(root / "benches/build-llama-cpp.sh")], capture_output=True, text=True, check=True
).stdout.strip().splitlines()[-1]
ggml = ctypes.CDLL(str(Path(bin_dir) / "libggml-base.so"))
ggml.ggml_quantize_chunk.restype = ctypes.c_size_t
ggml.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                     ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]

# type id: (block elements, block bytes)
TYPES = {
    0: (1, 4), 1: (1, 2), 30: (1, 2),  # F32 F16 BF16
    2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),  # Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),  # Q2_K..Q6_K
    20: (32, 18), 23: (256, 136), 39: (32, 17),  # IQ4_NL IQ4_XS MXFP4
}
rng = random.Random(20261128)
out = bytearray()
SCALES = [0.02, 1.0, 30.0, 1e-4, 1.0, 1.0, 0.05]
for t, (bs, ts) in TYPES.items():
    for case, scale in enumerate(SCALES):
        n = 512
        x = [rng.gauss(0.0, 1.0) * scale for _ in range(n)]
        if case == 4:
            for i in rng.sample(range(n), 8):
                x[i] *= 40.0  # outliers
        if case == 5:
            for i in range(256):
                x[i] = 0.0  # all-zero blocks and super-blocks
            for i in range(256, 263):
                x[i] = 1e-20  # tiny values
            x[300] = -0.0
        if case == 6:
            x = [abs(v) + 0.01 for v in x]  # all positive (the k-quants' min clamps to 0)
        src = (ctypes.c_float * n)(*x)
        dst = (ctypes.c_uint8 * (n // bs * ts))()
        size = ggml.ggml_quantize_chunk(t, src, dst, 0, 2, n // 2, None)
        assert size == len(dst), (t, size, len(dst))
        out.extend(b"QV")
        out.extend(struct.pack("<BIII", 1, t, n, len(dst)))
        out.extend(bytes(src))
        out.extend(bytes(dst))

path = root / "core/testdata/quant/weights-quantize.bin"
path.write_bytes(bytes(out))
print(f"wrote {len(out)} bytes to {path}", file=sys.stderr)

# With an importance matrix (kind 2: ... n_per_row u32, f32 input, f32 weights per column,
# bytes), for the types `quantize_rows` takes one for: 2 rows of 512.
out = bytearray()
for t in (2, 3, 6, 7, 8, 12, 13, 14):
    bs, ts = TYPES[t]
    for case, scale in enumerate(SCALES):
        n, npr = 1024, 512
        x = [rng.gauss(0.0, 1.0) * scale for _ in range(n)]
        if case == 5:
            for i in range(256):
                x[i] = 0.0
        if case == 6:
            x = [abs(v) + 0.01 for v in x]
        qw = [rng.expovariate(1.0) * (100.0 if case == 2 else 1.0) for _ in range(npr)]
        src = (ctypes.c_float * n)(*x)
        im = (ctypes.c_float * npr)(*qw)
        dst = (ctypes.c_uint8 * (n // bs * ts))()
        size = ggml.ggml_quantize_chunk(t, src, dst, 0, n // npr, npr, im)
        assert size == len(dst), (t, size, len(dst))
        out.extend(b"QV")
        out.extend(struct.pack("<BIIII", 2, t, n, len(dst), npr))
        out.extend(bytes(src))
        out.extend(bytes(im))
        out.extend(bytes(dst))
path = root / "core/testdata/quant/weights-imatrix.bin"
path.write_bytes(bytes(out))
print(f"wrote {len(out)} bytes to {path}", file=sys.stderr)
