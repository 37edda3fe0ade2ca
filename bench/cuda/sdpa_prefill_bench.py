"""PyTorch SDPA (flash backend, fp16) causal attention of one sequence's chunk of new tokens
behind a cached prefix (the lower-right causal mask), on the attention shapes of
bench/cuda/prefill_bench.cu: the reference rate for our tensor-core prefill kernel.

usage: python3 sdpa_prefill_bench.py   (env CHUNK, default 512)
"""
import os
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

SHAPES = (("llama8b", 32, 8, 128), ("smollm2", 9, 3, 64))


def median_ms(fn, reps=10, warm=3):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warm + reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        if i >= warm:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    chunk = int(os.environ.get("CHUNK", "512"))
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| shape | cached | chunk | SDPA µs | backend | TFLOP/s |\n|---|---|---|---|---|---|")
    for name, heads, kv_heads, d in SHAPES:
        for cached in (0, 2048, 8192, 32256):
            n = cached + chunk
            q = torch.randn(1, heads, chunk, d, device="cuda", dtype=torch.float16)
            # grouped heads expanded: the flash backend takes equal head counts here.
            g = heads // kv_heads
            k = torch.randn(1, kv_heads, n, d, device="cuda", dtype=torch.float16).repeat_interleave(g, 1)
            v = torch.randn(1, kv_heads, n, d, device="cuda", dtype=torch.float16).repeat_interleave(g, 1)
            mask = causal_lower_right(chunk, n)
            used = "flash"
            try:
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
            except RuntimeError:
                used = "efficient"
                with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
            pairs = (cached * chunk + chunk * (chunk + 1) / 2) * heads
            tflops = 4 * d * pairs / (ms * 1e-3) / 1e12
            print(f"| {name} | {cached} | {chunk} | {ms * 1e3:.1f} | {used} | {tflops:.1f} |")
            del q, k, v
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
