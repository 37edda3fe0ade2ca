#!/usr/bin/python3
"""load generator for a running vqserve (grpc) or llama.cpp llama-server (http), one script for
both: closed-loop concurrency sweeps and open-loop poisson arrivals, prompts of a given token
length, an optional shared system prompt, client-side ttft and inter-token latency.

cells: for each --codecs entry and each --concurrency value (closed loop: C workers send
requests back to back) or each --rate value (open loop: poisson arrivals at R requests/s,
in-flight requests unbounded), --requests requests. every request asks for --max-tokens tokens
with ignore_eos, so each produces the same number of tokens; greedy unless --temperature (and
--top-p) ask for sampling. reports per cell: completed
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
time-bounded cells (--duration S): closed-loop workers send requests back to back for S
seconds (poisson: arrivals stop at S); requests still in flight at S are cancelled and counted
as unfinished (neither completed nor failed); output tokens/s counts the tokens that arrived
within S over S. a request that has no first token at S adds its wait so far as a lower bound of
its ttft: a percentile that falls on such a bound prints as ">=X" and fails the ttft slo.
--idle-url URL waits, after each cell, until the server runs and queues nothing (vqserve's
/metrics, or llama-server's /slots), so that cancelled requests do not load the next cell.

options --json FILE (every cell), --plot FILE.png (output tokens/s against concurrency,
matplotlib), --check-free METRICS_URL (vqserve: after the cells, every kv chunk is free and no
request runs or waits; exit 1 otherwise), --max-failed N (exit 1 above N failed requests),
--label NAME (the server's name in the table and json, default the backend).
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
        self.prefix = rng.choices(range(self.low, self.high), k=self.shared)
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
        return self.prefix + rng.choices(range(self.low, self.high), k=self.n - self.shared)


class GrpcClient:
    def __init__(self, target, temperature=0.0, top_p=1.0):
        import grpc  # noqa: E402
        import vqserve_pb2  # noqa: E402
        import vqserve_pb2_grpc  # noqa: E402
        self.pb = vqserve_pb2
        self.channel = grpc.aio.insecure_channel(target)
        self.stub = vqserve_pb2_grpc.InferenceStub(self.channel)
        self.temperature, self.top_p = temperature, top_p

    async def stream(self, codec, prompt, max_tokens):
        """yields the number of tokens in each streamed message."""
        kw = dict(max_tokens=max_tokens, temperature=self.temperature, ignore_eos=True)
        if self.top_p < 1.0:
            kw["top_p"] = self.top_p
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
    """llama-server: POST /completion (native, default) or /v1/completions (openai), streamed
    (server-sent events). native: tokens counted by each event's `tokens_predicted` (an event
    per token, except that a token ending inside a utf-8 character is sent with the next);
    openai: one token per event with text."""

    def __init__(self, target, api, temperature=0.0, top_p=1.0):
        host, _, port = target.rpartition(":")
        self.host, self.port, self.api = host or "127.0.0.1", int(port), api
        self.temperature, self.top_p = temperature, top_p

    async def stream(self, codec, prompt, max_tokens):
        if self.api == "openai":
            path = "/v1/completions"
            body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": self.temperature,
                    "top_p": self.top_p, "stream": True, "ignore_eos": True}
        else:
            path = "/completion"
            body = {"prompt": prompt, "n_predict": max_tokens, "temperature": self.temperature,
                    "top_p": self.top_p, "stream": True, "ignore_eos": True,
                    "cache_prompt": True}
        data = json.dumps(body).encode()
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=1 << 24)
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
                body = (await reader.read(2000)).decode(errors="replace")
                raise RuntimeError("http " + status.strip() + " " + body[:300])
            chunked = headers.get("transfer-encoding") == "chunked"
            buf = b""
            seen = 0
            async for piece in self._body(reader, chunked):
                buf += piece
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    line = line.strip()
                    if line.startswith(b"error:") or line.startswith(b"{\"error\""):
                        raise RuntimeError(line[:300].decode(errors="replace"))
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        return
                    msg = json.loads(payload)
                    if "error" in msg:
                        raise RuntimeError(json.dumps(msg["error"])[:300])
                    if self.api == "openai":
                        text = "".join(c.get("text", "") for c in msg.get("choices", []))
                        done = any(c.get("finish_reason") for c in msg.get("choices", []))
                        if text:
                            yield 1
                        continue
                    n = msg.get("tokens_predicted")
                    if n is None:
                        n = seen + len(msg.get("tokens", []))
                    if n > seen:
                        yield n - seen
                        seen = n
                    if msg.get("stop", False):
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
    """one streamed request; its record in stats["live"] while it runs (start, first token,
    tokens so far), so that a cell's deadline can count what arrived in time."""
    rec = {"start": time.perf_counter(), "first": None, "tokens": 0}
    stats["live"].append(rec)
    last = None
    try:
        async for n in client.stream(codec, prompt, max_tokens):
            now = time.perf_counter()
            if n == 0:
                continue
            if last is None:
                rec["first"] = now
                stats["ttft"].append((now - rec["start"], False))
            else:
                # coalesced messages: spread the gap over the tokens they carry.
                stats["itl"].extend([(now - last) / n] * n)
            last = now
            rec["tokens"] += n
            stats["tokens"] += n
    except asyncio.CancelledError:  # the cell's deadline: unfinished, counted by the caller
        raise
    except Exception as e:  # noqa: BLE001 -- any failure counts as a failed request
        if stats.get("cancelling"):
            # the cell's deadline cancelled it, and the cancel surfaced as another error
            # (debian's grpc 1.51 aio raises UnboundLocalError from _read when the task is
            # cancelled as the call ends): unfinished, like a CancelledError.
            return
        stats["live"].remove(rec)
        stats["failed"] += 1
        stats["errors"].append(str(e)[:300])
        return
    if stats.get("cancelling") and rec["tokens"] < max_tokens:
        return  # cut short by the cell's deadline: unfinished
    stats["live"].remove(rec)
    if rec["tokens"] == max_tokens:
        stats["completed"] += 1
    else:
        stats["failed"] += 1
        stats["errors"].append(f"{rec['tokens']} of {max_tokens} tokens")


def make_client(args):
    if args.backend == "grpc":
        return GrpcClient(args.target, args.temperature, args.top_p)
    return HttpClient(args.target, args.http_api, args.temperature, args.top_p)


def censored_percentile(samples, p):
    """samples: (value, is_lower_bound); returns (value, is_lower_bound) at percentile p."""
    if not samples:
        return float("nan"), False
    xs = sorted(samples)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


async def run_cell(args, codec, prompts, concurrency=None, rate=None, first=0):
    stats = {"ttft": [], "itl": [], "tokens": 0, "completed": 0, "failed": 0, "errors": [],
             "live": []}
    client = make_client(args)
    duration = args.duration if args.duration > 0 else None
    total = args.requests if rate else max(args.requests, concurrency)
    start = time.perf_counter()
    deadline = start + duration if duration else None
    sent = [0]

    def next_id():
        if deadline is None and sent[0] >= total:
            return None
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        sent[0] += 1
        return first + sent[0] - 1

    tasks = []
    if rate:  # open loop: poisson arrivals, no bound on requests in flight.
        rng = random.Random(args.seed + 17)
        t = start

        async def arrivals():
            nonlocal t
            while True:
                t += rng.expovariate(rate)
                delay = t - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                i = next_id()
                if i is None:
                    return
                tasks.append(asyncio.create_task(
                    one_request(client, codec, prompts.get(i), args.max_tokens, stats)))

        main_task = asyncio.create_task(arrivals())
    else:  # closed loop: `concurrency` workers back to back.
        async def worker():
            while True:
                i = next_id()
                if i is None:
                    return
                await one_request(client, codec, prompts.get(i), args.max_tokens, stats)

        main_task = asyncio.ensure_future(asyncio.gather(*[worker() for _ in range(concurrency)]))
    if deadline is None:
        await main_task
        if tasks:
            await asyncio.gather(*tasks)
        wall = time.perf_counter() - start
        tokens = stats["tokens"]
    else:
        await asyncio.wait([main_task], timeout=max(0.0, deadline - time.perf_counter()))
        end = time.perf_counter()
        tokens = stats["tokens"]  # what arrived by the deadline
        unfinished = list(stats["live"])
        for rec in unfinished:  # no first token by the deadline: a lower bound of its ttft
            if rec["first"] is None:
                stats["ttft"].append((end - rec["start"], True))
        stats["cancelling"] = True
        main_task.cancel()
        for tk in tasks:
            tk.cancel()
        await asyncio.gather(main_task, *tasks, return_exceptions=True)
        wall = end - start
    await client.close()
    unfinished_n = len(stats["live"]) if deadline is not None else 0
    ttft50, c50 = censored_percentile(stats["ttft"], 50)
    ttft99, c99 = censored_percentile(stats["ttft"], 99)
    return {
        "server": args.label or args.backend, "backend": args.backend, "codec": codec or "",
        "concurrency": concurrency, "rate": rate, "duration_s": duration,
        "requests": sent[0], "completed": stats["completed"], "failed": stats["failed"],
        "unfinished": unfinished_n, "errors": stats["errors"][:5], "wall_s": wall,
        "tokens": tokens, "tok_per_s": tokens / wall,
        "ttft_p50_ms": 1e3 * ttft50, "ttft_p50_lower_bound": c50,
        "ttft_p99_ms": 1e3 * ttft99, "ttft_p99_lower_bound": c99,
        "itl_p50_ms": 1e3 * percentile(stats["itl"], 50),
        "itl_p99_ms": 1e3 * percentile(stats["itl"], 99),
        "prompt_tokens": args.prompt_tokens, "shared_prefix_tokens": args.shared_prefix_tokens,
        "max_tokens": args.max_tokens, "temperature": args.temperature, "top_p": args.top_p,
    }


def server_idle(url):
    """vqserve /metrics: nothing running or waiting; llama-server /slots: no slot processing."""
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    if url.rstrip("/").endswith("/slots"):
        return not any(s.get("is_processing") for s in json.loads(body))
    values = {}
    for line in body.splitlines():
        if line.startswith("vqserve:") and "{" not in line.split()[0]:
            values[line.split()[0]] = float(line.split()[-1])
    return (values.get("vqserve:num_requests_running", 1) == 0
            and values.get("vqserve:num_requests_waiting", 1) == 0)


def wait_idle(url, timeout_s):
    """seconds until the server is idle (polled), or -1 at the timeout."""
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        try:
            if server_idle(url):
                return time.time() - t0
        except Exception:  # noqa: BLE001 -- a busy server may not answer at once
            pass
        time.sleep(0.2)
    return -1.0


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


def plot(rows, path, title=""):
    """output tokens/s against concurrency, one line per server, codec and prompt length."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = {}
    for r in rows:
        if r["concurrency"]:
            name = " ".join(x for x in (r.get("server") or r["backend"], r["codec"]) if x)
            name += f', {r["prompt_tokens"]}-token prompt'
            if r.get("shared_prefix_tokens"):
                name += f' ({r["shared_prefix_tokens"]} shared)'
            series.setdefault(name, []).append((r["concurrency"], r["tok_per_s"]))
    for name, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency (closed loop)")
    ax.set_ylabel("output tokens/s")
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def fmt_ms(v, lower_bound):
    return (">=" if lower_bound else "") + ("%.0f" % v)


def sustains(r, slo_s):
    """the cell meets the ttft slo: no failed request, ttft p99 known and within it."""
    return (r["failed"] == 0 and not r.get("ttft_p99_lower_bound")
            and r["ttft_p99_ms"] <= 1e3 * slo_s)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["grpc", "http"], default="grpc")
    ap.add_argument("--http-api", choices=["openai", "native"], default="native")
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--label", default="", help="the server's name in the table and json")
    ap.add_argument("--codecs", default="", help="vqserve kv codecs, comma-separated "
                    "(default: the server's)")
    ap.add_argument("--concurrency", default="1,4,16", help="closed-loop cells")
    ap.add_argument("--rate", default="", help="open-loop cells: poisson requests/s, "
                    "comma-separated")
    ap.add_argument("--requests", type=int, default=32, help="requests per cell (without "
                    "--duration)")
    ap.add_argument("--duration", type=float, default=0, help="seconds per cell: a "
                    "time-bounded cell (see above)")
    ap.add_argument("--idle-url", default="", help="after each cell, wait until the server "
                    "at this url (vqserve /metrics, llama-server /slots) is idle")
    ap.add_argument("--idle-timeout", type=float, default=120)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="0: greedy (the default); else sampled, with --top-p")
    ap.add_argument("--top-p", type=float, default=1.0)
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
    if args.backend == "http":  # a name only (the kv type llama-server was started with)
        codecs = [args.codecs] if args.codecs else [""]
    print("| server | codec | prompt | mode | requests | completed | unfinished | failed "
          "| output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | ITL p50 (ms) | ITL p99 (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows, first = [], 0
    cells = [("c", int(x)) for x in args.concurrency.split(",") if x]
    cells += [("r", float(x)) for x in args.rate.split(",") if x]
    for codec in codecs:
        if not args.no_warmup:  # one short request (its own ids) before the timed cells
            saved, saved_d = args.max_tokens, args.duration
            args.max_tokens, args.duration = 2, 0
            asyncio.run(run_cell(args, codec, prompts, concurrency=1, first=10**6))
            args.max_tokens, args.duration = saved, saved_d
        for kind, v in cells:
            r = asyncio.run(run_cell(args, codec, prompts, concurrency=v if kind == "c" else None,
                                     rate=v if kind == "r" else None, first=first))
            first += r["requests"]
            if args.idle_url:
                r["idle_wait_s"] = wait_idle(args.idle_url, args.idle_timeout)
            rows.append(r)
            mode = f"closed c={v}" if kind == "c" else f"poisson {v}/s"
            prompt = str(args.prompt_tokens) + (f" ({args.shared_prefix_tokens} shared)"
                                                if args.shared_prefix_tokens else "")
            print("| %s | %s | %s | %s | %d | %d | %d | %d | %.1f | %s | %s | %.1f | %.1f |" % (
                r["server"], r["codec"] or "-", prompt, mode, r["requests"], r["completed"],
                r["unfinished"], r["failed"], r["tok_per_s"],
                fmt_ms(r["ttft_p50_ms"], r["ttft_p50_lower_bound"]),
                fmt_ms(r["ttft_p99_ms"], r["ttft_p99_lower_bound"]), r["itl_p50_ms"],
                r["itl_p99_ms"]), flush=True)
            if r["errors"]:
                print("  errors:", "; ".join(r["errors"]), file=sys.stderr)
            if r.get("idle_wait_s", 0) < 0:
                print(f"  the server was not idle {args.idle_timeout:g} s after the cell",
                      file=sys.stderr)
    for codec in codecs:
        ok = [r["concurrency"] for r in rows if r["codec"] == (codec or "") and r["concurrency"]
              and sustains(r, args.ttft_slo_s)]
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
