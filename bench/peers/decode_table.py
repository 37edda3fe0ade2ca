#!/usr/bin/env python3
"""One markdown table of decode tokens/s: vqserve (cuda_e2e_decode_bench logs) beside llama.cpp
(llama-batched-bench --output-format jsonl lines tagged with weights and kv by
bench/peers/compare_decode.sh) and the PyTorch step (bench/peers/torch_decode_step.py --jsonl).
Each vqserve cell also gives its ratio to llama.cpp's best row in that cell (any weights, any kv
type); the last rows compare the best of each engine, and vqserve's best (and its best fp16-KV
row) with the PyTorch step's faster attention mode.

  decode_table.py --ours LOG... --llama JSONL [--torch JSONL]
"""
import argparse
import json
import re

# (batch, context) of each column; vqserve's short-context figure of a row is its column at 256.
CELLS = [(1, 256), (16, 256), (16, 32768), (1, 131072)]
TITLES = ["batch 1, ctx 256", "batch 16, ctx 256", "batch 16 x 32K", "batch 1 x 128K"]


def read_ours(paths):
    """{(weights, kv): {cell: tokens/s}} from the markdown rows of cuda_e2e_decode_bench."""
    rows, weights, cell = {}, "?", None
    for path in paths:
        for line in open(path):
            m = re.match(r"### llama8b-(\S+):", line)
            if m:
                weights = m.group(1)
                continue
            m = re.match(r"batch (\d+) x context (\d+),", line)  # a bench of one cell a run
            if m:
                cell = (int(m.group(1)), int(m.group(2)))
                continue
            cols = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cols) >= 7 and re.fullmatch(r"\d+ x \d+", cols[1]):
                batch, ctx = (int(x) for x in cols[1].split(" x "))
                tps, short_tps = float(cols[3]), float(cols[6])
            elif cell and len(cols) >= 5 and re.match(r"[\d.]+ \(min", cols[1]):
                (batch, ctx), tps = cell, float(cols[2])
                short_tps = batch * 1000.0 / float(cols[4])
            else:
                continue
            r = rows.setdefault((weights, cols[0]), {})
            r[(batch, ctx)] = tps
            r[(batch, 256)] = short_tps  # the row's short-context figure
    return rows


def read_llama(path, engine=None):
    """{(weights, kv): {cell: tokens/s}}; engine "torch": {("bf16", mode): ...} of the step."""
    rows = {}
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return rows
    for line in lines:
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        key = ("bf16", j["mode"]) if engine == "torch" else (j["weights"], j["kv"])
        rows.setdefault(key, {})[(j["pl"], j["pp"])] = j["speed_tg"]
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", nargs="*", default=[])
    ap.add_argument("--llama", default="")
    ap.add_argument("--torch", default="")
    a = ap.parse_args()
    ours, llama = read_ours(a.ours), read_llama(a.llama)
    torch_rows = read_llama(a.torch, "torch") if a.torch else {}
    best = {c: max((r[c] for r in llama.values() if c in r), default=0) for c in CELLS}
    print("| decode tokens/s (ratio to llama.cpp's best in the column) | "
          + " | ".join(TITLES) + " |")
    print("|---" * (len(CELLS) + 1) + "|")
    for (w, kv), r in sorted(ours.items()):
        cells = []
        for c in CELLS:
            if c not in r:
                cells.append("—")
            elif best[c]:
                cells.append(f"{r[c]:.0f} ({r[c] / best[c]:.2f}x)")
            else:
                cells.append(f"{r[c]:.0f}")
        print(f"| vqserve, {w} weights, {kv} KV | " + " | ".join(cells) + " |")
    for (w, kv), r in sorted(llama.items()):
        cells = [f"{r[c]:.0f}" if c in r else "—" for c in CELLS]
        print(f"| llama.cpp, {w} weights, {kv} KV | " + " | ".join(cells) + " |")
    for (_, mode), r in sorted(torch_rows.items()):
        cells = [f"{r[c]:.0f}" if c in r else "—" for c in CELLS]
        print(f"| PyTorch step, bf16 weights and KV, SDPA flash ({mode}) | " + " | ".join(cells)
              + " |")
    ours_best = {c: max((r[c] for r in ours.values() if c in r), default=0) for c in CELLS}
    cells = [f"{ours_best[c] / best[c]:.2f}x" if ours_best[c] and best[c] else "—" for c in CELLS]
    print("| vqserve's best / llama.cpp's best | " + " | ".join(cells) + " |")
    if torch_rows:
        step = {c: max((r[c] for r in torch_rows.values() if c in r), default=0) for c in CELLS}
        fp16 = {c: max((r[c] for (w, kv), r in ours.items() if kv == "fp16" and c in r),
                       default=0) for c in CELLS}
        for name, mine in (("vqserve's best", ours_best), ("vqserve's best fp16 KV", fp16)):
            cells = [f"{mine[c] / step[c]:.2f}x" if mine[c] and step[c] else "—" for c in CELLS]
            print(f"| {name} / the PyTorch step | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
