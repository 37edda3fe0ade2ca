#!/usr/bin/env python3
"""bench/peers/decode_table.py reads the three engines' logs of compare_decode.sh into one table:
vqserve's rows with ratios to llama.cpp's best cell, llama.cpp's rows, the PyTorch step's rows
(torch_decode_step.py --jsonl) and the ratios of vqserve's best and best fp16-KV rows to the
faster PyTorch attention mode. The inputs are small logs in each program's format."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "bench", "peers", "decode_table.py")

OURS = """### llama8b-F16: 32 layers
| codec | batch x ctx | ms/step | tokens/s | vs fp16 | ms/step at ctx 256 | tokens/s at ctx 256 |
|---|---|---|---|---|---|---|
| fp16 | 16 x 32768 | 22.0 (min 21.9, max 22.1) | 720.0 | 1.00x | 6.0 | 2600.0 |
| vecinfer-k2v2 | 16 x 32768 | 10.0 (min 9.9, max 10.1) | 1600.0 | 2.22x | 6.4 | 2500.0 |
| fp16 | 1 x 131072 | 9.0 (min 8.9, max 9.1) | 110.0 | 1.00x | 5.1 | 195.0 |
"""


def main():
    with tempfile.TemporaryDirectory() as d:
        ours, llama, torch = (os.path.join(d, n) for n in ("ours_F16.log", "llama.jsonl", "torch.jsonl"))
        open(ours, "w").write(OURS)
        with open(llama, "w") as f:
            for pl, pp, s in ((16, 32768, 600.0), (1, 256, 200.0), (16, 256, 2000.0)):
                f.write(json.dumps({"weights": "F16", "kv": "f16", "pl": pl, "pp": pp, "speed_tg": s}) + "\n")
        with open(torch, "w") as f:
            for mode, tps in (("rows", 700.0), ("gqa", 650.0)):
                f.write(json.dumps({"engine": "torch", "mode": mode, "pl": 16, "pp": 32768,
                                    "ms_step": 16000.0 / tps, "speed_tg": tps}) + "\n")
            f.write(json.dumps({"engine": "torch", "mode": "rows", "pl": 1, "pp": 131072,
                                "ms_step": 10.0, "speed_tg": 100.0}) + "\n")
        run = lambda *extra: subprocess.run([sys.executable, TOOL, "--ours", ours, "--llama", llama,
                                             *extra], check=True, capture_output=True, text=True).stdout
        out, bare = run("--torch", torch), run()
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")[1:]]
            for line in out.splitlines() if line.startswith("| ") and not line.startswith("|---")}
    assert rows["vqserve, F16 weights, vecinfer-k2v2 KV"][2] == "1600 (2.67x)", rows
    assert rows["PyTorch step, bf16 weights and KV, SDPA flash (rows)"][2:4] == ["700", "100"], rows
    assert rows["PyTorch step, bf16 weights and KV, SDPA flash (gqa)"][2] == "650", rows
    # the faster mode (rows, 700) is the step; 128K: only rows ran.
    assert rows["vqserve's best / the PyTorch step"][2:4] == ["2.29x", "1.10x"], rows
    assert rows["vqserve's best fp16 KV / the PyTorch step"][2:4] == ["1.03x", "1.10x"], rows
    assert "PyTorch" not in bare and "vqserve, F16 weights, fp16 KV" in bare, bare
    print("decode_table: ok")


if __name__ == "__main__":
    main()
