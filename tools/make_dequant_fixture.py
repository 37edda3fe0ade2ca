#!/usr/bin/env python3
"""Writes tests/data/dequant_fixture.json: values of real tensors of the default model as
dequantized by the independent gguf-py reader (PyPI `gguf`), for tests/gguf_file_test.cc."""
import json
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

model = sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"
out = sys.argv[2] if len(sys.argv) > 2 else "tests/data/dequant_fixture.json"
reader = GGUFReader(model)
want = ["token_embd.weight", "blk.0.attn_q.weight", "blk.7.ffn_down.weight", "blk.0.attn_norm.weight", "output_norm.weight"]
tensors = {t.name: t for t in reader.tensors}
fixture = []
for name in want:
    t = tensors[name]
    values = dequantize(t.data, t.tensor_type).astype(np.float64).reshape(-1)
    fixture.append({
        "name": name,
        "type": t.tensor_type.name,
        "num_elements": int(values.size),
        "first": [float(v) for v in values[:96]],
        "sum": float(values.sum()),
        "sum_abs": float(np.abs(values).sum()),
    })
with open(out, "w") as f:
    json.dump({"model_sha256_file": "scripts/model.sha256", "tensors": fixture}, f, indent=1)
print(f"wrote {out}: {len(fixture)} tensors")
