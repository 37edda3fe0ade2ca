#!/usr/bin/env python3
"""The PyTorch decode step: what a user would write instead of an inference server, timed on the
same cells as cuda_e2e_decode_bench and llama-batched-bench (bench/peers/compare_decode.sh).

A Llama-3.1-8B-shaped model (random bf16 weights, fused qkv and gate/up projections, cuBLAS
through F.linear), a contiguous bf16 KV cache per layer [batch, kv heads, context, head_dim],
RoPE, RMSNorm, SDPA with the flash backend, greedy argmax fed back as the next token, the whole
step captured in one CUDA graph. Each step appends one token per sequence (at position ctx - 1,
so the graph's shapes stay static) and attends over all ctx tokens.

Attention modes (both timed; the table takes the faster):
  rows  the 4 query heads of a kv head as 4 query rows of one SDPA call (no mask needed at
        decode): each kv head's keys are read once.
  gqa   F.scaled_dot_product_attention(..., enable_gqa=True) with one query row per head.

usage: torch_decode_step.py [--cells 1x256,16x256,16x32768,1x131072] [--steps 32] [--warmup 4]
                            [--modes rows,gqa] [--shape llama8b|tiny] [--jsonl OUT]
Prints one line per (cell, mode) and, with --jsonl, appends {"engine": "torch", ...} lines with
llama-batched-bench's keys (pl = batch, pp = context, speed_tg = tokens/s).
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {
    # layers, hidden, heads, kv heads, head_dim, ffn, vocab
    "llama8b": (32, 4096, 32, 8, 128, 14336, 128256),
    "tiny": (2, 256, 8, 2, 32, 512, 1024),
}
ROPE_THETA = 500000.0
EPS = 1e-5


class DecodeStep:
    """Random weights and one batch's cache; step() is the graph's body."""

    def __init__(self, shape, batch, ctx, mode, dtype=torch.bfloat16):
        L, H, NH, NKV, D, FF, V = shape
        self.L, self.H, self.NH, self.NKV, self.D = L, H, NH, NKV, D
        self.batch, self.ctx, self.mode = batch, ctx, mode
        dev = "cuda"

        def w(out_f, in_f):  # well-scaled random weights: activations stay O(1)
            return torch.randn(out_f, in_f, device=dev, dtype=dtype) / math.sqrt(in_f)

        self.layers = []
        for _ in range(L):
            self.layers.append(dict(
                norm1=torch.ones(H, device=dev, dtype=dtype),
                wqkv=w((NH + 2 * NKV) * D, H),
                wo=w(H, NH * D),
                norm2=torch.ones(H, device=dev, dtype=dtype),
                wgu=w(2 * FF, H),
                wd=w(H, FF),
                k=torch.randn(batch, NKV, ctx, D, device=dev, dtype=dtype),
                v=torch.randn(batch, NKV, ctx, D, device=dev, dtype=dtype),
            ))
        self.emb = torch.randn(V, H, device=dev, dtype=dtype)
        self.norm_out = torch.ones(H, device=dev, dtype=dtype)
        self.head = w(V, H)
        self.tok = torch.zeros(batch, dtype=torch.long, device=dev)
        self.pos = torch.full((1,), ctx - 1, dtype=torch.long, device=dev)
        self.inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, D, 2, device=dev).float() / D))

    def weight_bytes(self):
        n = sum(t.numel() * t.element_size() for l in self.layers for k, t in l.items()
                if k not in ("k", "v"))
        return n + (self.emb.numel() + self.head.numel()) * self.emb.element_size()

    def rope(self, x, cos, sin):  # x [B, heads, D], rotate-half (Llama's HF layout)
        x1, x2 = x[..., : self.D // 2], x[..., self.D // 2:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def step(self):
        B, NH, NKV, D = self.batch, self.NH, self.NKV, self.D
        ang = self.pos.float()[:, None] * self.inv_freq[None, :]  # [1, D/2]
        cos, sin = ang.cos().to(self.emb.dtype), ang.sin().to(self.emb.dtype)
        x = self.emb[self.tok]  # [B, H]
        for l in self.layers:
            h = F.rms_norm(x, (self.H,), l["norm1"], EPS)
            qkv = F.linear(h, l["wqkv"])
            q = qkv[:, : NH * D].view(B, NH, D)
            k = qkv[:, NH * D: (NH + NKV) * D].view(B, NKV, D)
            v = qkv[:, (NH + NKV) * D:].view(B, NKV, D)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            l["k"].index_copy_(2, self.pos, k.unsqueeze(2))
            l["v"].index_copy_(2, self.pos, v.unsqueeze(2))
            if self.mode == "rows":
                o = F.scaled_dot_product_attention(q.view(B, NKV, NH // NKV, D), l["k"], l["v"])
            else:
                o = F.scaled_dot_product_attention(q.view(B, NH, 1, D), l["k"], l["v"],
                                                   enable_gqa=True)
            x = x + F.linear(o.reshape(B, NH * D), l["wo"])
            h = F.rms_norm(x, (self.H,), l["norm2"], EPS)
            g, u = F.linear(h, l["wgu"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(g) * u, l["wd"])
        logits = F.linear(F.rms_norm(x, (self.H,), self.norm_out, EPS), self.head)
        self.tok.copy_(logits.argmax(dim=-1))


def time_cell(shape, batch, ctx, mode, steps, warmup):
    """tokens/s of the graph-replayed step (mean over `steps` replays after `warmup`)."""
    m = DecodeStep(shape, batch, ctx, mode)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                m.step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            m.step()
    for _ in range(warmup):
        g.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(steps):
        g.replay()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end) / steps
    wbytes = m.weight_bytes()
    del g, m
    torch.cuda.empty_cache()
    return ms, wbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", default="1x256,16x256,16x32768,1x131072")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--modes", default="rows,gqa")
    ap.add_argument("--shape", default="llama8b", choices=sorted(SHAPES))
    ap.add_argument("--jsonl", default="")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, shape {a.shape}, "
          f"bf16 weights and kv, SDPA flash, one CUDA graph a step", flush=True)
    for cell in a.cells.split(","):
        batch, ctx = (int(x) for x in cell.split("x"))
        for mode in a.modes.split(","):
            t0 = time.time()
            try:
                ms, wbytes = time_cell(SHAPES[a.shape], batch, ctx, mode, a.steps, a.warmup)
            except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                print(f"batch {batch} x ctx {ctx} {mode}: failed: {str(e).splitlines()[0]}",
                      flush=True)
                torch.cuda.empty_cache()
                continue
            tps = batch * 1000.0 / ms
            print(f"batch {batch} x ctx {ctx} {mode}: {ms:.3f} ms/step, {tps:.1f} tokens/s "
                  f"(weights {wbytes / 2**30:.2f} GiB; {time.time() - t0:.0f} s with setup)",
                  flush=True)
            if a.jsonl:
                with open(a.jsonl, "a") as f:
                    f.write(json.dumps({"engine": "torch", "mode": mode, "pl": batch, "pp": ctx,
                                        "ms_step": ms, "speed_tg": tps}) + "\n")


if __name__ == "__main__":
    main()
