#!/usr/bin/python3
"""load generator for a running vqserve: closed-loop concurrency sweep per kv codec.

each of C workers sends requests back to back (fixed prompt set, fixed max_tokens, ignore_eos
so every request produces the same number of tokens) for --requests requests in total per
(codec, concurrency) cell; reports request and token throughput, ttft and inter-token latency
p50 / p99 (client side, from grpc message arrival). uses debian's python3-grpcio (grpc.aio)
and the stubs from scripts/gen_python_stubs.

  /usr/bin/python3 bench/load_generator.py --target 127.0.0.1:50051 \
      --codecs fp16,kivi-k2v2,vecinfer-k2v2 --concurrency 1,4,16 --requests 32 --max-tokens 32
  add --context-chars N to put N characters of real text (debian fortunes) before each prompt,
  each worker's request starting at a different offset (no shared prefix).
"""
import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools",
                                "python_client", "gen"))

import grpc  # noqa: E402

import vqserve_pb2  # noqa: E402
import vqserve_pb2_grpc  # noqa: E402

PROMPTS = [
    "Write a short story about a lighthouse keeper.",
    "Explain how bread rises.",
    "List three facts about the moon.",
    "Describe a walk through a forest in autumn.",
    "What makes a good cup of tea?",
    "Summarize the plot of a detective novel you invent.",
    "Give advice to someone learning to ride a bicycle.",
    "Why is the sky blue?",
]


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


async def one_request(stub, codec, prompt, max_tokens, stats):
    # request text fields are proto bytes: encode str.
    req = vqserve_pb2.GenerateRequest(text=prompt.encode(), max_tokens=max_tokens,
                                      temperature=0.0, ignore_eos=True, kv_codec=codec.encode())
    start = time.perf_counter()
    last = None
    tokens = 0
    async for msg in stub.Generate(req, timeout=3600):
        now = time.perf_counter()
        n = len(msg.token_ids)
        if n == 0:
            continue
        if last is None:
            stats["ttft"].append(now - start)
        else:
            # coalesced messages: spread the gap over the tokens they carry.
            stats["itl"].extend([(now - last) / n] * n)
        last = now
        tokens += n
    stats["tokens"] += tokens
    stats["requests"] += 1


def make_prompts(context_file, context_chars):
    """the prompt set, each with its own context_chars-long slice of context_file in front."""
    if context_chars <= 0:
        return PROMPTS
    with open(context_file, encoding="utf-8", errors="replace") as f:
        text = " ".join(line.strip() for line in f if line.strip() != "%")
    out = []
    for i, p in enumerate(PROMPTS):
        start = (i * 7919 * 13) % max(1, len(text) - context_chars)
        out.append(text[start:start + context_chars] + "\n\n" + p)
    return out


async def run_cell(target, codec, concurrency, total, max_tokens, prompts):
    stats = {"ttft": [], "itl": [], "tokens": 0, "requests": 0}
    async with grpc.aio.insecure_channel(target) as channel:
        stub = vqserve_pb2_grpc.InferenceStub(channel)
        await one_request(stub, codec, PROMPTS[0], 2, {"ttft": [], "itl": [], "tokens": 0,
                                                       "requests": 0})  # warm-up
        queue = list(range(total))

        async def worker():
            while queue:
                i = queue.pop()
                await one_request(stub, codec, prompts[i % len(prompts)], max_tokens, stats)

        start = time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(concurrency)])
        wall = time.perf_counter() - start
    return {
        "codec": codec, "concurrency": concurrency, "requests": stats["requests"],
        "wall_s": wall, "req_per_s": stats["requests"] / wall, "tok_per_s": stats["tokens"] / wall,
        "ttft_p50_ms": 1e3 * percentile(stats["ttft"], 50),
        "ttft_p99_ms": 1e3 * percentile(stats["ttft"], 99),
        "itl_p50_ms": 1e3 * percentile(stats["itl"], 50),
        "itl_p99_ms": 1e3 * percentile(stats["itl"], 99),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--codecs", default="fp16")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--requests", type=int, default=32, help="requests per cell")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--context-chars", type=int, default=0,
                    help="prepend this many characters of --context-file to every prompt "
                         "(a long context whose older tokens the compressed codecs code)")
    ap.add_argument("--context-file", default="/usr/share/games/fortunes/fortunes")
    args = ap.parse_args()
    prompts = make_prompts(args.context_file, args.context_chars)
    print("| codec | concurrency | requests | req/s | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) "
          "| ITL p50 (ms) | ITL p99 (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for codec in args.codecs.split(","):
        for c in [int(x) for x in args.concurrency.split(",")]:
            r = asyncio.run(run_cell(args.target, codec, c, max(args.requests, c), args.max_tokens,
                                     prompts))
            print("| %s | %d | %d | %.2f | %.1f | %.0f | %.0f | %.0f | %.0f |" % (
                r["codec"], r["concurrency"], r["requests"], r["req_per_s"], r["tok_per_s"],
                r["ttft_p50_ms"], r["ttft_p99_ms"], r["itl_p50_ms"], r["itl_p99_ms"]), flush=True)


if __name__ == "__main__":
    main()
