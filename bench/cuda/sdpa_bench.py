"""PyTorch SDPA (flash backend, fp16) decode attention on the Llama-3.1-8B shape (or the default
model's: BENCH_SHAPE=smollm2), and the
device-to-device copy ceiling; merges our attention_bench csv into one markdown table.

usage: python3 sdpa_bench.py --ours ours.csv --csv sdpa.csv --md combined.md
"""
import argparse
import os
import csv
import os
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# env BENCH_SHAPE=smollm2: SmolLM2-135M's (9, 3, 64; the default model), as attention_bench.
HEADS, KV_HEADS, DIM = (9, 3, 64) if os.environ.get("BENCH_SHAPE") == "smollm2" else (32, 8, 128)
# env BENCH_BATCHES=1,16: only these batch sizes (as attention_bench).
BATCHES = tuple(int(b) for b in os.environ["BENCH_BATCHES"].split(",")) if os.environ.get("BENCH_BATCHES") else (1, 8, 16, 32)
CONTEXTS = (8192, 32768, 131072)


def median_ms(fn, reps=20, warm=5):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warm + reps):
        start.record()
        fn(i)
        end.record()
        end.synchronize()
        if i >= warm:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_ceiling(nbytes=4 << 30):
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    b = torch.empty_like(a)
    ms = median_ms(lambda i: b.copy_(a), reps=10, warm=3)
    del a, b
    return 2 * nbytes / (ms * 1e-3)


def sdpa_decode(q, k, v, mode):
    if mode == "gqa":
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    # the query heads of one kv head as query rows (no mask): the same math as gqa decode.
    b = q.shape[0]
    qr = q.view(b, KV_HEADS, HEADS // KV_HEADS, DIM)
    return F.scaled_dot_product_attention(qr, k, v).view(b, HEADS, 1, DIM)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", default=None)
    ap.add_argument("--csv", default="sdpa.csv")
    ap.add_argument("--md", default="combined.md")
    args = ap.parse_args()
    torch.manual_seed(0)
    ceiling = copy_ceiling()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, copy ceiling {ceiling / 1e9:.1f} GB/s")
    rows = {}
    mode = "gqa"
    sizes = os.environ.get("BENCH_SIZES")  # e.g. 16x32768,1x131072: only these sizes
    wanted = set(sizes.split(",")) if sizes else None
    for batch in BATCHES:
        for ctx in CONTEXTS:
            if wanted is not None and f"{batch}x{ctx}" not in wanted:
                continue
            kv_bytes = 2 * batch * KV_HEADS * ctx * DIM * 2
            copies = min(16, (256 << 20) // kv_bytes + 1)
            try:
                kvs = [(torch.randn(batch, KV_HEADS, ctx, DIM, device="cuda", dtype=torch.float16),
                        torch.randn(batch, KV_HEADS, ctx, DIM, device="cuda", dtype=torch.float16))
                       for _ in range(copies)]
            except torch.OutOfMemoryError:
                print(f"sdpa batch {batch} ctx {ctx}: out of memory, skipped")
                continue
            q = torch.randn(batch, HEADS, 1, DIM, device="cuda", dtype=torch.float16)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                try:
                    sdpa_decode(q, *kvs[0], mode)
                except RuntimeError as e:
                    print(f"flash with enable_gqa failed ({str(e).splitlines()[0]}); using grouped query rows")
                    mode = "rows"
                ms = median_ms(lambda i: sdpa_decode(q, *kvs[i % copies], mode))
            nbytes = kv_bytes + 2 * q.numel() * 2
            gbps = nbytes / (ms * 1e-3) / 1e9
            rows[(batch, ctx)] = (ms * 1e3, gbps)
            print(f"sdpa-flash {batch:5d} {ctx:7d} {ms * 1e3:10.1f} us {gbps:9.1f} GB/s {100 * gbps * 1e9 / ceiling:6.1f} %copy ({mode})")
            del kvs, q
            torch.cuda.empty_cache()
    with open(args.csv, "w") as f:
        f.write("kernel,batch,context,time_us,bytes,gbps,pct_of_copy\n")
        f.write(f"copy,0,0,0,0,{ceiling / 1e9:.1f},100\n")
        for (batch, ctx), (us, gbps) in rows.items():
            f.write(f"sdpa-flash,{batch},{ctx},{us:.2f},{2 * batch * KV_HEADS * ctx * DIM * 2},{gbps:.1f},{100 * gbps * 1e9 / ceiling:.1f}\n")
    if not args.ours:
        return
    ours = {}
    kernels = []
    with open(args.ours) as f:
        for r in csv.DictReader(f):
            if r["kernel"] == "copy":
                continue
            if r["kernel"] not in kernels:
                kernels.append(r["kernel"])
            ours[(r["kernel"], int(r["batch"]), int(r["context"]))] = (float(r["time_us"]), float(r["pct_of_copy"]))
    lines = ["| batch | context | SDPA flash µs (%copy) | " + " | ".join(f"{k} µs (%copy, ×SDPA)" for k in kernels) + " |",
             "|---|---|---|" + "---|" * len(kernels)]
    for batch in BATCHES:
        for ctx in CONTEXTS:
            s = rows.get((batch, ctx))
            cells = [str(batch), f"{ctx // 1024}K", f"{s[0]:.1f} ({100 * s[1] * 1e9 / ceiling:.0f}%)" if s else "—"]
            for k in kernels:
                o = ours.get((k, batch, ctx))
                if o is None:
                    cells.append("—")
                else:
                    speed = f", {s[0] / o[0]:.2f}×" if s else ""
                    cells.append(f"{o[0]:.1f} ({o[1]:.0f}%{speed})")
            lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    with open(args.md, "w") as f:
        f.write(f"copy ceiling (torch, read+write): {ceiling / 1e9:.1f} GB/s\n\n{table}\n")


if __name__ == "__main__":
    main()
