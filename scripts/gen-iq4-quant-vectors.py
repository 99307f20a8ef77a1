#!/usr/bin/env python3
"""Generates core/testdata/quant/iq4-quantize.bin: f32 rows and their IQ4_NL / IQ4_XS bytes as
ggml's own quantizers write them (`ggml_quantize_chunk` of the pinned llama.cpp's
libggml-base, through ctypes, no importance matrix: what llama-quantize runs without
--imatrix). gguf-py has no IQ4 quantizers, so these come from the C library itself.

    python3 scripts/gen-iq4-quant-vectors.py [LLAMA_CPP_BIN_DIR]

(the directory defaults to what benches/build-llama-cpp.sh prints). Records as in
gen-quant-vectors.py (kind 1: b"QV", kind u8, type id u32, n u32, n_bytes u32, f32 input,
bytes).
"""
import ctypes
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

root = Path(__file__).resolve().parent.parent
bin_dir = sys.argv[1] if len(sys.argv) > 1 else subprocess.run(
    ["bash", str(root / "benches/build-llama-cpp.sh")], capture_output=True, text=True, check=True
).stdout.strip().splitlines()[-1]
ggml = ctypes.CDLL(str(Path(bin_dir) / "libggml-base.so"))
ggml.ggml_quantize_chunk.restype = ctypes.c_size_t
ggml.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                     ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]

IQ4_NL, IQ4_XS = 20, 23
SIZES = {IQ4_NL: (32, 18), IQ4_XS: (256, 136)}
rng = np.random.default_rng(20261127)
out = bytearray()

for t in (IQ4_NL, IQ4_XS):
    bs, ts = SIZES[t]
    for case in range(6):
        n = 1024 if t == IQ4_XS else 512
        x = rng.standard_normal(n).astype(np.float32) * [0.01, 1.0, 30.0, 1e-4, 1.0, 1.0][case]
        if case == 4:
            x[rng.integers(0, n, 8)] *= 40.0  # outliers
        if case == 5:
            x[: bs * 2] = 0.0  # all-zero blocks (and a zero super-block)
            x[bs * 2: bs * 2 + 7] = 1e-20  # tiny values
        x = np.ascontiguousarray(x)
        dst = np.zeros(n // bs * ts, dtype=np.uint8)
        size = ggml.ggml_quantize_chunk(t, x.ctypes.data, dst.ctypes.data, 0, 1, n, None)
        assert size == dst.size, (size, dst.size)
        out.extend(b"QV")
        out.extend(struct.pack("<BIII", 1, t, n, dst.size))
        out.extend(x.tobytes())
        out.extend(dst.tobytes())

path = root / "core/testdata/quant/iq4-quantize.bin"
path.write_bytes(bytes(out))
print(f"wrote {len(out)} bytes to {path}", file=sys.stderr)
