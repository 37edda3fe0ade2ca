#!/usr/bin/env python3
"""Writes tests/data/kquant_fixture.json: random q4_k, q5_k and q6_k blocks (sane fp16 scales,
every other byte random) and their values as dequantized by the independent gguf-py reader
(PyPI `gguf`), for tests/dequantize_test.cc. usage: make_kquant_fixture.py [OUT]"""
import json
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/kquant_fixture.json"
rng = np.random.default_rng(28)
BLOCKS = 3
# (type, block bytes, offsets of its fp16 scale fields)
TYPES = [(T.Q4_K, 144, [0, 2]), (T.Q5_K, 176, [0, 2]), (T.Q6_K, 210, [208])]
fixture = []
for t, size, halves in TYPES:
    raw = bytearray(rng.integers(0, 256, BLOCKS * size, dtype=np.uint8).tobytes())
    for k in range(BLOCKS):
        for off in halves:
            h = np.float16(rng.uniform(-0.1, 0.1)).tobytes()
            raw[k * size + off:k * size + off + 2] = h
    values = dequantize(np.frombuffer(bytes(raw), dtype=np.uint8), t).astype(np.float64).reshape(-1)
    fixture.append({"type": t.name, "blocks_hex": bytes(raw).hex(),
                    "values": [float(v) for v in values]})
with open(out, "w") as f:
    json.dump({"generator": "gguf-py dequantize", "cases": fixture}, f, indent=0)
print(f"wrote {out}: {len(fixture)} types x {BLOCKS} blocks")
