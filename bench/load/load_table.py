#!/usr/bin/env python3
"""merges the cells of bench/load/h200_load.sh (one json per cell, bench/load_generator.py's rows)
into one markdown table, the largest concurrency each server sustains within the ttft slo, the
issue-29 targets (met or not, with the numbers) and a plot of output tokens/s against concurrency.

  load_table.py --cells DIR [--kv-note TEXT] [--free FILE] [--plot FILE.png] [--slo-s 10]
"""
import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def ms(r, key):
    v = r[key]
    if v != v:  # nan: no sample
        return "-"
    fmt = "%.1f" if key.startswith("itl") else "%.0f"
    return (">=" if r.get(key.replace("_ms", "_lower_bound")) else "") + fmt % v


def sustains(r, slo_s):
    return (r["failed"] == 0 and not r.get("ttft_p99_lower_bound")
            and r["ttft_p99_ms"] <= 1e3 * slo_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", required=True)
    ap.add_argument("--free", default="", help="file with the vqserve end-of-run checks")
    ap.add_argument("--plot", default="")
    ap.add_argument("--title", default="")
    ap.add_argument("--slo-s", type=float, default=10.0)
    args = ap.parse_args()
    rows = []
    for path in sorted(glob.glob(os.path.join(args.cells, "*.json"))):
        with open(path) as f:
            for r in json.load(f):
                r["cell"] = os.path.basename(path)[:-5]
                rows.append(r)
    if not rows:
        print("no cells yet")
        return 0

    def key(r):
        return (r["server"], r["codec"], r["prompt_tokens"], r.get("shared_prefix_tokens", 0),
                r["concurrency"] or 0)

    rows.sort(key=key)
    print("| server | codec / KV type | prompt tokens | concurrency | output tok/s | TTFT p50 (ms) "
          "| TTFT p99 (ms) | ITL p50 (ms) | ITL p99 (ms) | requests | completed | unfinished "
          "| failed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        prompt = str(r["prompt_tokens"])
        if r.get("shared_prefix_tokens"):
            prompt += " (%d shared)" % r["shared_prefix_tokens"]
        print("| %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %d | %d | %d | %d |" % (
            r["server"], r["codec"] or "-", prompt, r["concurrency"], r["tok_per_s"],
            ms(r, "ttft_p50_ms"), ms(r, "ttft_p99_ms"), ms(r, "itl_p50_ms"), ms(r, "itl_p99_ms"),
            r["requests"], r["completed"], r.get("unfinished", 0), r["failed"]))
    print()
    groups = {}
    for r in rows:
        groups.setdefault(key(r)[:4], []).append(r)
    print(f"Largest concurrency with 0 failed and TTFT p99 <= {args.slo_s:g} s (of the cells run):")
    print()
    for g, rs in groups.items():
        ok = [r["concurrency"] for r in rs if r["concurrency"] and sustains(r, args.slo_s)]
        ran = ",".join(str(r["concurrency"]) for r in rs)
        shared = f" ({g[3]} shared)" if g[3] else ""
        print(f"- {g[0]} {g[1] or ''} {g[2]}-token prompts{shared}: "
              f"{max(ok) if ok else 'none'} (ran c = {ran})")
    print()
    # the targets of issue 29 (part 4).
    print("Targets:")
    print()

    def best(server_pred, prompt, shared=0):
        rs = [r for r in rows if server_pred(r) and r["prompt_tokens"] == prompt
              and r.get("shared_prefix_tokens", 0) == shared]
        return max(rs, key=lambda r: r["tok_per_s"]) if rs else None

    long_prompt = max(r["prompt_tokens"] for r in rows)
    ours = best(lambda r: r["codec"] == "vecinfer-k2v2", long_prompt)
    peer = best(lambda r: r["server"].startswith("llama-server"), long_prompt)
    if ours and peer:
        ratio = ours["tok_per_s"] / max(peer["tok_per_s"], 1e-9)
        print(f"- vecinfer-k2v2 >= 4x llama-server's best output tokens/s at {long_prompt}-token "
              f"prompts: {'met' if ratio >= 4 else 'NOT met'}: {ours['tok_per_s']:.1f} "
              f"(c={ours['concurrency']}) vs {peer['tok_per_s']:.1f} (c={peer['concurrency']}), "
              f"{ratio:.2f}x")
    else:
        print(f"- vecinfer-k2v2 vs llama-server at {long_prompt}-token prompts: not measured "
              f"({'no vqserve cell' if not ours else 'no llama-server cell'})")
    on = {r["concurrency"]: r for r in rows if r["server"].endswith("prefix-on")
          and r.get("shared_prefix_tokens") and r["codec"] == "vecinfer-k2v2"}
    off = {r["concurrency"]: r for r in rows if r["server"].endswith("prefix-off")
           and r.get("shared_prefix_tokens") and r["codec"] == "vecinfer-k2v2"}
    both = sorted(set(on) & set(off))
    if both:
        for c in both:
            a, b = on[c]["ttft_p50_ms"], off[c]["ttft_p50_ms"]
            ratio = b / max(a, 1e-9)
            print(f"- TTFT p50 >= 3x lower with the prefix cache (shared "
                  f"{on[c]['shared_prefix_tokens']}-token system prompt, c={c}): "
                  f"{'met' if ratio >= 3 else 'NOT met'}: {a:.0f} ms on vs {b:.0f} ms off, "
                  f"{ratio:.2f}x")
    else:
        print("- prefix cache on/off: not measured (no matching cells)")
    failed = sum(r["failed"] for r in rows)
    print(f"- 0 failed requests in every cell: {'met' if failed == 0 else 'NOT met'} "
          f"({failed} failed over {len(rows)} cells; requests in flight at a cell's end are "
          f"unfinished, not failed)")
    if args.free and os.path.exists(args.free):
        with open(args.free) as f:
            lines = [x.strip() for x in f if x.strip()]
        ok = lines and all("yes" in x for x in lines)
        print(f"- all pages free at the end (vqserve): {'met' if ok else 'NOT met'}: "
              + "; ".join(lines))
    if args.plot:
        try:
            import load_generator
            load_generator.plot([r for r in rows if not r.get("shared_prefix_tokens")],
                                args.plot, args.title)
        except ImportError as e:  # no matplotlib here: the table only
            print(f"no plot: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
