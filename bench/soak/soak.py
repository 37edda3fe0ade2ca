#!/usr/bin/python3
"""soak test: a real `vqserve serve` on 127.0.0.1 under a bounded time of hostile, concurrent load.

The server runs on the CPU with the default model, KV memory far below the load (requests queue
and are preempted), api keys, --max-streams-per-client, --max-request-seconds and
--max-request-bytes. Concurrent grpc.aio workers (debian's python3-grpcio, stubs generated from
proto/ when missing) mix: complete greedy streams, slow readers that stop reading for seconds,
client cancels, deadlines that expire mid-stream, Abort calls, bad requests (INVALID_ARGUMENT,
an oversized message) and a client that opens more streams than its key may hold. Then a last
batch is in flight when SIGTERM arrives.

Checks (any failure: exit 1, each named on stderr):
  - the server never dies; every call ends with the status its kind allows;
  - every unaffected greedy stream (complete, slow reader, a deadline or cancel that came too
    late) equals the same request run alone on the same server before the load; aborted
    streams are a prefix of it;
  - after the load: /metrics shows every page free and the waiting/running gauges at 0;
  - resident memory (VmRSS of the server, sampled every 0.25 s) after the warm-up stays within
    --rss-bound-mib of its peak during the warm-up;
  - the drain after SIGTERM finishes every in-flight request (all equal to their references),
    reports 0 aborted, and the server exits 0.
Prints one summary line: requests, cancels, errors by code, mismatches, preemptions, peak RSS.

  /usr/bin/python3 bench/soak/soak.py --binary build/bin/vqserve --duration 600 --workers 16
exits 77 (skipped) when the model or python grpc is missing, unless CI is set (then 1).
"""
import argparse
import asyncio
import collections
import importlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# (prompt, max_tokens): most cross the 32-token fp16 sink, so they need kv pages.
PROMPTS = [
    ("Write a short story about a lighthouse keeper.", 40),
    ("Explain how bread rises.", 24),
    ("List three facts about the moon.", 32),
    ("Describe a walk through a forest in autumn.", 48),
    ("What makes a good cup of tea?", 8),
    ("Why is the sky blue?", 28),
    ("Give advice to someone learning to ride a bicycle.", 16),
    ("Summarize the plot of a detective novel you invent.", 64),
]

HOG_KEYS = 64  # api keys of the hog, one per hog run
# kind -> weight; "hog" runs one at a time (it owns an api key).
KINDS = {"complete": 30, "slow": 12, "cancel": 12, "deadline": 12, "abort": 10, "bad": 14,
         "hog": 4}


def skip(msg):
    print("soak: skipped: " + msg)
    sys.exit(1 if os.environ.get("CI") else 77)


def load_stubs(stub_dir):
    stub_dir = os.path.abspath(stub_dir)
    sys.path.insert(0, stub_dir)
    try:
        import vqserve_pb2  # noqa: F401
    except ImportError:
        os.makedirs(stub_dir, exist_ok=True)
        plugin = subprocess.run(["sh", "-c", "command -v grpc_python_plugin"],
                                capture_output=True, text=True).stdout.strip()
        if not plugin:
            skip("grpc_python_plugin missing (scripts/setup installs python3-grpc-tools)")
        subprocess.run(["protoc", "-I" + os.path.join(ROOT, "proto"), "--python_out=" + stub_dir,
                        "--grpc_out=" + stub_dir, "--plugin=protoc-gen-grpc=" + plugin,
                        os.path.join(ROOT, "proto", "vqserve.proto")], check=True)
        importlib.invalidate_caches()
    import vqserve_pb2
    import vqserve_pb2_grpc
    return vqserve_pb2, vqserve_pb2_grpc


class Soak:
    def __init__(self, args, pb, pb_grpc, grpc):
        self.args, self.pb, self.pb_grpc, self.grpc = args, pb, pb_grpc, grpc
        self.rng = random.Random(args.seed)
        self.failures = []
        self.codes = collections.Counter()     # final status code of every Generate call
        self.kinds = collections.Counter()
        self.compared = 0                      # streams checked against their reference
        self.mismatches = 0
        self.refs = {}
        self.rss = []                          # (seconds since load start, kB)
        self.hog_lock = asyncio.Lock()
        self.hogs = 0
        self.next_id = 0

    def fail(self, msg):
        if len(self.failures) < 50:
            print("soak: FAIL: " + msg, file=sys.stderr)
        self.failures.append(msg)

    def request(self, i, **kw):
        prompt, max_tokens = PROMPTS[i]
        max_tokens = max(1, round(max_tokens * self.args.max_tokens_scale))
        return self.pb.GenerateRequest(text=prompt.encode(), max_tokens=max_tokens,
                                       temperature=0.0, ignore_eos=True, **kw)

    def key(self, w):
        return [("authorization", "Bearer soak-key-%d" % w)]

    async def stream(self, call, stop_after=None, pause=None):
        """reads a Generate call; returns (code name, token ids, finish reason)."""
        tokens, reason, n = [], 0, 0
        try:
            while True:
                msg = await call.read()          # read() only: grpc.aio forbids mixing styles
                if msg is self.grpc.aio.EOF:
                    break
                tokens.extend(msg.token_ids)
                if msg.finish_reason:
                    reason = msg.finish_reason
                n += 1
                if pause is not None and n == 1:
                    await asyncio.sleep(pause)          # a client that stops reading
                if stop_after is not None and n >= stop_after:
                    call.cancel()
                    break
            code = (await call.code()).name
        except self.grpc.aio.AioRpcError as e:
            code = e.code().name
        except asyncio.CancelledError:
            code = "CANCELLED"
        return code, tokens, reason

    def check_equal(self, what, i, tokens):
        self.compared += 1
        if tokens != self.refs[i]:
            self.mismatches += 1
            self.fail("%s: prompt %d: %d tokens differ from the reference run alone "
                      "(first difference at %d)" % (what, i, len(tokens), next(
                          (k for k, (a, b) in enumerate(zip(tokens, self.refs[i])) if a != b),
                          min(len(tokens), len(self.refs[i])))))

    def expect(self, what, code, allowed):
        self.codes[code] += 1
        if code not in allowed:
            self.fail("%s ended %s (allowed: %s)" % (what, code, ", ".join(sorted(allowed))))
            return False
        return True

    async def one(self, stub, w):
        kind = self.rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
        i = self.rng.randrange(len(PROMPTS))
        prio = self.rng.randrange(3)
        self.kinds[kind] += 1
        md = self.key(w)
        if kind == "complete":
            code, toks, _ = await self.stream(stub.Generate(self.request(i, priority=prio),
                                                            metadata=md))
            if self.expect(kind, code, {"OK"}):
                self.check_equal(kind, i, toks)
        elif kind == "slow":
            pause = self.rng.uniform(1.0, 4.0)
            code, toks, _ = await self.stream(
                stub.Generate(self.request(i, priority=prio), metadata=md), pause=pause)
            if self.expect(kind, code, {"OK"}):
                self.check_equal(kind, i, toks)
        elif kind == "cancel":
            stop = self.rng.randrange(1, 4)
            code, toks, reason = await self.stream(
                stub.Generate(self.request(i, priority=prio), metadata=md), stop_after=stop)
            if self.expect(kind, code, {"CANCELLED", "OK"}) and code == "OK":
                self.check_equal(kind + " (finished first)", i, toks)
        elif kind == "deadline":
            timeout = self.rng.uniform(0.2, 2.0)
            code, toks, _ = await self.stream(
                stub.Generate(self.request(i, priority=prio), metadata=md, timeout=timeout))
            if self.expect(kind, code, {"DEADLINE_EXCEEDED", "OK"}) and code == "OK":
                self.check_equal(kind + " (finished in time)", i, toks)
        elif kind == "abort":
            self.next_id += 1
            rid = "soak-%d-%d" % (w, self.next_id)
            call = stub.Generate(self.request(i, priority=prio, request_id=rid.encode()),
                                 metadata=md)
            toks, reason, found = [], 0, None
            try:
                while True:
                    msg = await call.read()
                    if msg is self.grpc.aio.EOF:
                        break
                    toks.extend(msg.token_ids)
                    reason = msg.finish_reason or reason
                    if found is None:
                        found = (await stub.Abort(self.pb.AbortRequest(request_id=rid.encode()),
                                                  metadata=md, timeout=30)).found
                code = (await call.code()).name
            except self.grpc.aio.AioRpcError as e:
                code = e.code().name
            if self.expect(kind, code, {"OK"}):
                if reason == self.pb.FINISH_REASON_ABORT:
                    if toks != self.refs[i][:len(toks)]:
                        self.fail("abort: prompt %d: the aborted stream is not a prefix of the "
                                  "reference" % i)
                else:
                    self.check_equal(kind + " (finished first)", i, toks)
        elif kind == "bad":
            await self.bad(stub, md)
        elif kind == "hog":
            await self.hog(stub)

    async def bad(self, stub, md):
        cases = [
            (self.pb.GenerateRequest(text=b"", max_tokens=4), "text", "INVALID_ARGUMENT"),
            (self.pb.GenerateRequest(text=b"hi", top_p=2.0), "top_p", "INVALID_ARGUMENT"),
            (self.pb.GenerateRequest(text=b"hi", kv_codec=b"nope"), "kv_codec",
             "INVALID_ARGUMENT"),
            (self.pb.GenerateRequest(text=b"caf\xc3(", max_tokens=4), "text: invalid UTF-8",
             "INVALID_ARGUMENT"),
            (self.pb.GenerateRequest(token_ids=self.pb.TokenIds(ids=[1, 1 << 24])), "token_ids",
             "INVALID_ARGUMENT"),
            (self.pb.GenerateRequest(text=b"hi", max_tokens=0), "max_tokens", "INVALID_ARGUMENT"),
            (self.pb.GenerateRequest(text=b"a" * (self.args.max_request_kib * 1024 + 1)),
             "larger than max", "RESOURCE_EXHAUSTED"),
        ]
        req, field, want = self.rng.choice(cases)
        call = stub.Generate(req, metadata=md, timeout=60)
        try:
            async for _ in call:
                self.fail("bad request (%s) streamed a message" % field)
            code, details = (await call.code()).name, await call.details()
        except self.grpc.aio.AioRpcError as e:
            code, details = e.code().name, e.details()
        if self.expect("bad request (%s)" % field, code, {want}) and field not in details:
            self.fail("bad request: '%s' does not name %s" % (details, field))

    async def hog(self, stub):
        """opens the limit's worth of streams with one key, then one more: refused."""
        async with self.hog_lock:
            # a fresh key each time: the server frees a cancelled stream's slot after the
            # client's cancel returns, so a key reused at once could still hold slots.
            if self.hogs >= HOG_KEYS:
                return
            md = [("authorization", "Bearer soak-hog-%d" % self.hogs)]
            self.hogs += 1
            calls = [stub.Generate(self.request(7), metadata=md)
                     for _ in range(self.args.max_streams_per_client)]
            for c in calls:
                try:
                    await c.read()                      # admitted: it streamed a message
                except self.grpc.aio.AioRpcError as e:
                    self.fail("hog stream ended %s before its first message" % e.code().name)
            extra = stub.Generate(self.request(4), metadata=md)
            code, _, _ = await self.stream(extra)
            details = await extra.details()
            ends = []
            for c in calls:
                c.cancel()
                ends.append((await self.stream(c))[0])
                self.expect("hog (cancelled)", ends[-1], {"CANCELLED", "OK"})
            # a held stream (short) may have finished on the server and freed its slot before the
            # extra one arrived, though the client still sees it cancelled: then the extra one may
            # run. tests/server_limits_test.cc checks the bound itself deterministically.
            allowed = {"RESOURCE_EXHAUSTED", "OK"}
            if self.expect("hog (stream %d)" % (len(calls) + 1), code, allowed) and \
                    code != "OK" and "max_streams_per_client" not in details:
                self.fail("hog: '%s' does not name the limit" % details)

    async def worker(self, channel, w, end):
        stub = self.pb_grpc.InferenceStub(channel)
        while time.monotonic() < end and not self.dead.is_set():
            try:
                await self.one(stub, w)
            except Exception as e:  # a client-side surprise is a failure, not a crash
                self.fail("worker %d: %r" % (w, e))

    async def sample_rss(self, pid, start):
        while not self.dead.is_set():
            try:
                with open("/proc/%d/status" % pid) as f:
                    kb = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
                self.rss.append((time.monotonic() - start, kb))
            except (OSError, AttributeError):
                return
            await asyncio.sleep(0.25)

    def scrape(self):
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port,
                                      timeout=10).read().decode()
        out = {}
        for line in body.splitlines():
            if line.startswith("vqserve:"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    async def wait_idle(self):
        """waits (up to 60 s) for no kv held by any sequence and nothing waiting or running.
        pages the prefix cache alone keeps (vqserve:prefix_cache_bytes, reclaimable) are not
        held by a sequence: kv_cache_usage_perc counts only what sequences hold."""
        end = time.monotonic() + 60
        while True:
            m = await asyncio.to_thread(self.scrape)
            idle = (m.get("vqserve:kv_cache_usage_perc") == 0
                    and m.get("vqserve:num_requests_waiting") == 0
                    and m.get("vqserve:num_requests_running") == 0)
            if idle or time.monotonic() > end:
                return idle, m
            await asyncio.sleep(0.1)

    async def run(self):
        a = self.args
        tmp = tempfile.mkdtemp(prefix="vqserve-soak-")
        keys = os.path.join(tmp, "keys")
        with open(keys, "w") as f:
            f.write("".join("soak-key-%d\n" % w for w in range(a.workers + 1)))
            f.write("".join("soak-hog-%d\n" % i for i in range(HOG_KEYS)))
        cmd = [a.binary, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", "0",
               "--metrics-port", "0", "--kv-memory", a.kv_memory, "--max-num-seqs",
               str(a.max_num_seqs), "--max-waiting", "256", "--api-keys-file", keys,
               "--max-streams-per-client", str(a.max_streams_per_client),
               "--max-request-seconds", "300", "--max-request-bytes",
               "%dK" % a.max_request_kib, "--drain-timeout", str(a.drain_timeout), "--threads", str(a.threads)]
        print("soak: " + " ".join(cmd), flush=True)
        log = open(os.path.join(tmp, "server.log"), "w")
        proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                    stderr=log)
        self.dead = asyncio.Event()
        line = (await asyncio.wait_for(proc.stdout.readline(), 300)).decode()
        m = re.search(r" on 127\.0\.0\.1:(\d+) .*metrics on 127\.0\.0\.1:(\d+)/metrics", line)
        if not m:
            raise SystemExit("soak: the server did not start: %r (log %s)" % (line, log.name))
        print("soak: " + line.strip(), flush=True)
        port, self.metrics_port = int(m.group(1)), int(m.group(2))
        stdout_rest = asyncio.ensure_future(proc.stdout.read())

        async def watch():
            rc = await proc.wait()
            if not self.draining:
                self.fail("the server exited with %d during the load" % rc)
            self.dead.set()
        self.draining = False
        watcher = asyncio.ensure_future(watch())

        channels = [self.grpc.aio.insecure_channel("127.0.0.1:%d" % port)
                    for _ in range(a.workers + 1)]
        stub0 = self.pb_grpc.InferenceStub(channels[-1])
        # references: each request alone on the idle server.
        for i in range(len(PROMPTS)):
            code, toks, _ = await self.stream(stub0.Generate(self.request(i),
                                                             metadata=self.key(a.workers)))
            if code != "OK" or len(toks) != self.request(i).max_tokens:
                raise SystemExit("soak: reference %d failed: %s, %d tokens" % (i, code, len(toks)))
            self.refs[i] = toks
        print("soak: %d references computed alone; load for %.0f s" % (len(self.refs),
                                                                      a.duration), flush=True)

        start = time.monotonic()
        sampler = asyncio.ensure_future(self.sample_rss(proc.pid, start))
        end = start + a.duration
        await asyncio.gather(*(self.worker(channels[w], w, end) for w in range(a.workers)))
        load_s = time.monotonic() - start

        print("soak: load done (%d requests); waiting for the server to be idle" %
              sum(self.kinds.values()), flush=True)
        idle, metrics = await self.wait_idle()
        if not idle:
            self.fail("after the load: pages/gauges not back to idle: %s" % {
                k: v for k, v in metrics.items()
                if "pages" in k or "num_requests" in k or "usage_perc" in k
                or "prefix_cache_bytes" in k})
        preemptions = metrics.get("vqserve:num_preemptions_total", 0)
        if preemptions == 0:
            self.fail("no preemption happened: the load did not exceed the kv memory")

        # drain: a batch in flight (each has streamed a message), then SIGTERM.
        drain_calls = [stub0.Generate(self.request(i), metadata=self.key(i % (a.workers + 1)))
                       for i in range(len(PROMPTS))]
        firsts = []
        for c in drain_calls:
            firsts.append(list((await c.read()).token_ids))
        self.draining = True
        proc.send_signal(signal.SIGTERM)
        for i, c in enumerate(drain_calls):
            code, toks, _ = await self.stream(c)
            self.kinds["drain"] += 1
            if self.expect("in flight at SIGTERM", code, {"OK"}):
                self.check_equal("in flight at SIGTERM", i, firsts[i] + toks)
        try:
            rc = await asyncio.wait_for(proc.wait(), a.drain_timeout + 60)
        except asyncio.TimeoutError:
            proc.kill()
            rc = "killed after %d s" % (a.drain_timeout + 60)
        self.dead.set()
        await sampler
        await watcher
        out = (await stdout_rest).decode()
        if rc != 0:
            self.fail("exit status after SIGTERM: %s" % rc)
        if "drained (0 requests aborted" not in out:
            self.fail("the drain aborted requests: %r" % out.strip())
        for ch in channels:
            await ch.close()
        log.close()

        # resident memory: the warm-up's peak vs everything after it.
        warm = [kb for t, kb in self.rss if t < a.warmup * load_s]
        after = [kb for t, kb in self.rss if a.warmup * load_s <= t <= load_s]
        peak = max(kb for _, kb in self.rss) if self.rss else 0
        growth = (max(after) - max(warm)) / 1024 if warm and after else float("nan")
        if not warm or not after:
            self.fail("too few RSS samples (%d)" % len(self.rss))
        elif growth > a.rss_bound_mib:
            self.fail("RSS grew %.1f MiB after the warm-up (bound %d MiB)" % (growth,
                                                                          a.rss_bound_mib))
        requests = sum(self.kinds.values())
        errors = {k: v for k, v in sorted(self.codes.items()) if k != "OK"}
        print("soak: %d requests in %.0f s load (%d workers; %s); %d streams compared, "
              "%d mismatches; errors by code %s; %d preemptions; peak RSS %.0f MiB, growth "
              "after warm-up %+.1f MiB (bound %d); drain: %d in flight finished, exit %s; %s" % (
                  requests, load_s, a.workers,
                  ", ".join("%s %d" % kv for kv in sorted(self.kinds.items())),
                  self.compared, self.mismatches, errors, preemptions, peak / 1024, growth,
                  a.rss_bound_mib, len(drain_calls), rc,
                  "PASS" if not self.failures else "FAIL (%d)" % len(self.failures)),
              flush=True)
        if self.failures:
            print("soak: server log: " + log.name, file=sys.stderr)
        return 0 if not self.failures else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "vqserve"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models",
                                                    "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--duration", type=float, default=60, help="seconds of load")
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kv-memory", default="8M", help="fp16 pool size (far below the load)")
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--max-streams-per-client", type=int, default=3)
    ap.add_argument("--max-request-kib", type=int, default=256)
    ap.add_argument("--max-tokens-scale", type=float, default=1.0,
                    help="scales every request's max_tokens (a quicker run on a slow machine)")
    ap.add_argument("--drain-timeout", type=int, default=300,
                    help="the server's --drain-timeout: long, so that everything in flight can finish")
    ap.add_argument("--threads", type=int, default=1, help="the server's compute threads")
    ap.add_argument("--warmup", type=float, default=0.3, help="fraction of the load")
    ap.add_argument("--rss-bound-mib", type=int, default=24)
    ap.add_argument("--stubs", default=os.path.join(ROOT, "tools", "python_client", "gen"))
    args = ap.parse_args()
    if not os.path.exists(args.model):
        skip(args.model + " missing")
    try:
        import grpc
        import grpc.aio  # noqa: F401
    except ImportError:
        skip("python grpc missing (scripts/setup installs python3-grpcio)")
    pb, pb_grpc = load_stubs(args.stubs)
    sys.exit(asyncio.run(Soak(args, pb, pb_grpc, grpc).run()))


if __name__ == "__main__":
    main()
