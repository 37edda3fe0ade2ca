#!/usr/bin/python3
"""load generator for a running vqserve (grpc) or llama.cpp llama-server (http), one script for
both: closed-loop concurrency sweeps and open-loop poisson arrivals, prompts of a given token
length, an optional shared system prompt, client-side ttft and inter-token latency.

cells: for each --codecs entry and each --concurrency value (closed loop: C workers send
requests back to back) or each --rate value (open loop: poisson arrivals at R requests/s,
in-flight requests unbounded), --requests requests. every request asks for --max-tokens tokens
with ignore_eos (greedy), so each produces the same number of tokens. reports per cell: completed
and failed requests, output tokens/s, ttft and inter-token latency p50 / p99 (from message
arrival), and at the end the largest concurrency whose ttft p99 stays within --ttft-slo-s.

prompts: --prompt-tokens N sends N token ids (seeded pseudo-random ids in [--id-low, --id-high),
the same ids for both servers); --shared-prefix-tokens S makes the first S of them the same in
every request (a shared system prompt), the rest different per request. without
--prompt-tokens the prompts are short texts (grpc only).

  # vqserve (python3-grpcio and the stubs of scripts/gen_python_stubs):
  /usr/bin/python3 bench/load_generator.py --target 127.0.0.1:50051 --codecs fp16,vecinfer-k2v2 \\
      --concurrency 1,16,64 --requests 64 --prompt-tokens 4096 --max-tokens 256
  # llama-server (OpenAI-compatible /v1/completions, streamed; --http-api native: /completion):
  /usr/bin/python3 bench/load_generator.py --backend http --target 127.0.0.1:8080 \\
      --concurrency 1,16,64 --requests 64 --prompt-tokens 4096 --max-tokens 256
  # open loop at 2 requests/s with a 2048-token shared system prompt:
  ... --rate 2 --requests 64 --prompt-tokens 2300 --shared-prefix-tokens 2048
options --json FILE (every cell), --plot FILE.png (output tokens/s against concurrency,
matplotlib), --check-free METRICS_URL (vqserve: after the cells, every kv chunk is free and no
request runs or waits; exit 1 otherwise), --max-failed N (exit 1 above N failed requests).
"""
import argparse
import asyncio
import json
import os
import random
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools",
                                "python_client", "gen"))

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


class Prompts:
    """request i's prompt: text, or token ids with an optional shared prefix."""

    def __init__(self, args):
        self.n = args.prompt_tokens
        self.shared = min(args.shared_prefix_tokens, self.n)
        self.low, self.high, self.seed = args.id_low, args.id_high, args.seed
        rng = random.Random(self.seed)
        self.prefix = [rng.randrange(self.low, self.high) for _ in range(self.shared)]
        self.texts = PROMPTS
        if args.context_chars > 0:  # text prompts after their own slice of --context-file
            with open(args.context_file, encoding="utf-8", errors="replace") as f:
                text = " ".join(line.strip() for line in f if line.strip() != "%")
            n = args.context_chars
            self.texts = [text[(i * 7919 * 13) % max(1, len(text) - n):][:n] + "\n\n" + p
                          for i, p in enumerate(PROMPTS)]

    def get(self, i):
        if self.n <= 0:
            return self.texts[i % len(self.texts)]
        rng = random.Random(self.seed * 1000003 + i + 1)
        return self.prefix + [rng.randrange(self.low, self.high) for _ in range(self.n - self.shared)]


class GrpcClient:
    def __init__(self, target):
        import grpc  # noqa: E402
        import vqserve_pb2  # noqa: E402
        import vqserve_pb2_grpc  # noqa: E402
        self.pb = vqserve_pb2
        self.channel = grpc.aio.insecure_channel(target)
        self.stub = vqserve_pb2_grpc.InferenceStub(self.channel)

    async def stream(self, codec, prompt, max_tokens):
        """yields the number of tokens in each streamed message."""
        kw = dict(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        if codec:
            kw["kv_codec"] = codec.encode()
        if isinstance(prompt, str):
            req = self.pb.GenerateRequest(text=prompt.encode(), **kw)  # text fields are bytes
        else:
            req = self.pb.GenerateRequest(token_ids=self.pb.TokenIds(ids=prompt), **kw)
        async for msg in self.stub.Generate(req, timeout=3600):
            yield len(msg.token_ids)

    async def close(self):
        await self.channel.close()


class HttpClient:
    """llama-server: POST /v1/completions (openai) or /completion (native), streamed (sse)."""

    def __init__(self, target, api):
        host, _, port = target.rpartition(":")
        self.host, self.port, self.api = host or "127.0.0.1", int(port), api

    async def stream(self, codec, prompt, max_tokens):
        if self.api == "openai":
            path = "/v1/completions"
            body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
                    "stream": True, "ignore_eos": True}
        else:
            path = "/completion"
            body = {"prompt": prompt, "n_predict": max_tokens, "temperature": 0.0,
                    "stream": True, "ignore_eos": True, "cache_prompt": True}
        data = json.dumps(body).encode()
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            writer.write((f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n"
                          f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                          "Accept: text/event-stream\r\nConnection: close\r\n\r\n").encode() + data)
            await writer.drain()
            status = (await reader.readline()).decode()
            headers = {}
            while True:
                line = (await reader.readline()).decode().strip()
                if not line:
                    break
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip().lower()
            if " 200 " not in status:
                raise RuntimeError("http " + status.strip())
            chunked = headers.get("transfer-encoding") == "chunked"
            buf = b""
            async for piece in self._body(reader, chunked):
                buf += piece
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    line = line.strip()
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        return
                    msg = json.loads(payload)
                    if self.api == "openai":
                        text = "".join(c.get("text", "") for c in msg.get("choices", []))
                        done = any(c.get("finish_reason") for c in msg.get("choices", []))
                    else:
                        text, done = msg.get("content", ""), msg.get("stop", False)
                    if text:
                        yield 1  # llama-server streams one token per event
                    if done and self.api != "openai":
                        return
        finally:
            writer.close()

    @staticmethod
    async def _body(reader, chunked):
        if not chunked:
            while True:
                piece = await reader.read(65536)
                if not piece:
                    return
                yield piece
        while True:
            size = int((await reader.readline()).strip() or b"0", 16)
            if size == 0:
                return
            yield await reader.readexactly(size)
            await reader.readline()

    async def close(self):
        pass


async def one_request(client, codec, prompt, max_tokens, stats):
    start = time.perf_counter()
    last = None
    tokens = 0
    try:
        async for n in client.stream(codec, prompt, max_tokens):
            now = time.perf_counter()
            if n == 0:
                continue
            if last is None:
                stats["ttft"].append(now - start)
            else:
                # coalesced messages: spread the gap over the tokens they carry.
                stats["itl"].extend([(now - last) / n] * n)
            last = now
            tokens += n
    except Exception as e:  # noqa: BLE001 -- any failure counts as a failed request
        stats["failed"] += 1
        stats["errors"].append(str(e)[:200])
        return
    stats["tokens"] += tokens
    if tokens == max_tokens:
        stats["completed"] += 1
    else:
        stats["failed"] += 1
        stats["errors"].append(f"{tokens} of {max_tokens} tokens")


def make_client(args):
    if args.backend == "grpc":
        return GrpcClient(args.target)
    return HttpClient(args.target, args.http_api)


async def run_cell(args, codec, prompts, concurrency=None, rate=None, first=0):
    stats = {"ttft": [], "itl": [], "tokens": 0, "completed": 0, "failed": 0, "errors": []}
    client = make_client(args)
    total = args.requests if rate else max(args.requests, concurrency)
    ids = list(range(first, first + total))
    start = time.perf_counter()
    if rate:  # open loop: poisson arrivals, no bound on requests in flight.
        rng = random.Random(args.seed + 17)
        tasks, t = [], start
        for i in ids:
            t += rng.expovariate(rate)
            delay = t - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(
                one_request(client, codec, prompts.get(i), args.max_tokens, stats)))
        await asyncio.gather(*tasks)
    else:  # closed loop: `concurrency` workers back to back.
        queue = list(reversed(ids))

        async def worker():
            while queue:
                i = queue.pop()
                await one_request(client, codec, prompts.get(i), args.max_tokens, stats)

        await asyncio.gather(*[worker() for _ in range(concurrency)])
    wall = time.perf_counter() - start
    await client.close()
    return {
        "backend": args.backend, "codec": codec or "", "concurrency": concurrency,
        "rate": rate, "requests": total, "completed": stats["completed"],
        "failed": stats["failed"], "errors": stats["errors"][:5], "wall_s": wall,
        "tok_per_s": stats["tokens"] / wall,
        "ttft_p50_ms": 1e3 * percentile(stats["ttft"], 50),
        "ttft_p99_ms": 1e3 * percentile(stats["ttft"], 99),
        "itl_p50_ms": 1e3 * percentile(stats["itl"], 50),
        "itl_p99_ms": 1e3 * percentile(stats["itl"], 99),
        "prompt_tokens": args.prompt_tokens, "shared_prefix_tokens": args.shared_prefix_tokens,
        "max_tokens": args.max_tokens,
    }


def check_free(metrics_url, timeout_s=30.0):
    """vqserve's /metrics: every kv chunk free (kv_cache_usage_perc 0), nothing running or
    waiting. polls until true or timeout (requests finish on the server just after the client
    reads their last message)."""
    end = time.time() + timeout_s
    values = {}
    while time.time() < end:
        body = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
        values = {}
        for line in body.splitlines():
            if line.startswith("vqserve:") and "{" not in line.split()[0]:
                name, val = line.split()[0], float(line.split()[-1])
                values[name] = val
        if (values.get("vqserve:kv_cache_usage_perc", 1) == 0
                and values.get("vqserve:num_requests_running", 1) == 0
                and values.get("vqserve:num_requests_waiting", 1) == 0):
            return True, values
        time.sleep(0.2)
    return False, values


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    series = {}
    for r in rows:
        if r["concurrency"]:
            series.setdefault(f'{r["backend"]} {r["codec"]}'.strip(), []).append(
                (r["concurrency"], r["tok_per_s"]))
    for name, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency (closed loop)")
    ax.set_ylabel("output tokens/s")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["grpc", "http"], default="grpc")
    ap.add_argument("--http-api", choices=["openai", "native"], default="openai")
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--codecs", default="", help="vqserve kv codecs, comma-separated "
                    "(default: the server's)")
    ap.add_argument("--concurrency", default="1,4,16", help="closed-loop cells")
    ap.add_argument("--rate", default="", help="open-loop cells: poisson requests/s, "
                    "comma-separated")
    ap.add_argument("--requests", type=int, default=32, help="requests per cell")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=0)
    ap.add_argument("--shared-prefix-tokens", type=int, default=0)
    ap.add_argument("--context-chars", type=int, default=0,
                    help="text prompts (no --prompt-tokens): prepend this many characters of "
                         "--context-file, each prompt its own slice (no shared prefix)")
    ap.add_argument("--context-file", default="/usr/share/games/fortunes/fortunes")
    ap.add_argument("--id-low", type=int, default=1000)
    ap.add_argument("--id-high", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ttft-slo-s", type=float, default=10.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--plot", default="")
    ap.add_argument("--check-free", default="", metavar="METRICS_URL")
    ap.add_argument("--max-failed", type=int, default=-1)
    ap.add_argument("--no-warmup", action="store_true")
    args = ap.parse_args()
    prompts = Prompts(args)
    codecs = args.codecs.split(",") if args.codecs else [""]
    if args.backend == "http":
        codecs = [""]
    print("| server | codec | mode | requests | completed | failed | output tok/s | TTFT p50 (ms) "
          "| TTFT p99 (ms) | ITL p50 (ms) | ITL p99 (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows, first = [], 0
    cells = [("c", int(x)) for x in args.concurrency.split(",") if x]
    cells += [("r", float(x)) for x in args.rate.split(",") if x]
    for codec in codecs:
        if not args.no_warmup:  # one short request (its own ids) before the timed cells
            saved = args.max_tokens
            args.max_tokens = 2
            asyncio.run(run_cell(args, codec, prompts, concurrency=1, first=10**6))
            args.max_tokens = saved
        for kind, v in cells:
            r = asyncio.run(run_cell(args, codec, prompts, concurrency=v if kind == "c" else None,
                                     rate=v if kind == "r" else None, first=first))
            first += r["requests"]
            rows.append(r)
            mode = f"closed c={v}" if kind == "c" else f"poisson {v}/s"
            print("| %s | %s | %s | %d | %d | %d | %.1f | %.0f | %.0f | %.1f | %.1f |" % (
                r["backend"], r["codec"] or "-", mode, r["requests"], r["completed"], r["failed"],
                r["tok_per_s"], r["ttft_p50_ms"], r["ttft_p99_ms"], r["itl_p50_ms"],
                r["itl_p99_ms"]), flush=True)
            if r["errors"]:
                print("  errors:", "; ".join(r["errors"]), file=sys.stderr)
    for codec in codecs:
        ok = [r["concurrency"] for r in rows if r["codec"] == (codec or "") and r["concurrency"]
              and r["failed"] == 0 and r["ttft_p99_ms"] <= 1e3 * args.ttft_slo_s]
        print(f"largest concurrency within TTFT p99 <= {args.ttft_slo_s:g} s"
              f"{' (' + codec + ')' if codec else ''}: {max(ok) if ok else 'none'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    status = 0
    failed = sum(r["failed"] for r in rows)
    if args.max_failed >= 0 and failed > args.max_failed:
        print(f"FAIL: {failed} failed requests", file=sys.stderr)
        status = 1
    if args.check_free:
        free, values = check_free(args.check_free)
        print("kv memory free at the end:", "yes" if free else f"NO {values}")
        status = status or (0 if free else 1)
    return status


if __name__ == "__main__":
    sys.exit(main())
