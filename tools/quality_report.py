#!/usr/bin/env python3
"""runs `vqserve calibrate` + `vqserve eval` for every codec x bit width on the default model and
writes docs/quality.md and docs/quality_bits_vs_dppl.png.

results are cached per run in data/quality/<codec>.json (delete to re-run); the markdown is
built from whatever results exist, so a partial run still yields a (partial) report.
passkey retrieval at longer lengths is a separate stage (`--passkey-stage 1024,4096,8192`):
`vqserve eval --passkey-only` for every row but the ablation variants, cached in
data/quality/<codec>.passkey.json; the report's passkey column then reads from it.
usage: tools/quality_report.py [--build build] [--ctx 2048] [--windows 1] [--calib-tokens 2048]
                               [--iterations 10] [--only codec,codec] [--report-only]
                               [--passkey-stage LENGTHS [--passkey-depths D,D]]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"

# (row name, calibrate arguments or None, passkey in the main stage, group); passkey runs
# for every row in the passkey stage instead. a row name "<codec>+nosink" evaluates <codec>
# with the whole sequence coded (--sink-tokens 0); every other row keeps the first 32 tokens
# fp16, as `vqserve serve` does.
RUNS = [
    ("fp16", None, False, "fp16"),
    ("kivi-k2v2", None, False, "kivi"),
    ("vecinfer-k2v2", ["vecinfer", "2", "2"], False, "vecinfer"),
    ("kivi-k4v4", None, False, "kivi"),
    ("vecinfer-k4v4", ["vecinfer", "4", "4"], False, "vecinfer"),
    # vecinfer ablation at 2 bits: vq alone, + smoothing, + hadamard (+ both is vecinfer-k2v2).
    ("vecinfer-k2v2-nosmooth-nohadamard", ["vecinfer", "2", "2", "--no-smooth", "--no-hadamard"], False, "ablation"),
    ("vecinfer-k2v2-nohadamard", ["vecinfer", "2", "2", "--no-hadamard"], False, "ablation"),
    ("vecinfer-k2v2-nosmooth", ["vecinfer", "2", "2", "--no-smooth"], False, "ablation"),
    ("vecinfer-k4v2", ["vecinfer", "4", "2"], False, "vecinfer"),
    ("vecinfer-k1v1", ["vecinfer", "1", "1"], False, "vecinfer"),
    ("commvq-2", ["commvq", "2", "2"], False, "commvq"),
    ("commvq-1", ["commvq", "1", "1"], False, "commvq"),
    ("vecinfer-k3v3", ["vecinfer", "3", "3"], False, "vecinfer"),
    ("vecinfer-k1.5v1.5", ["vecinfer", "1.5", "1.5"], False, "vecinfer"),
    # the attention sink: the same codecs with the first page coded too.
    ("kivi-k2v2+nosink", None, False, "nosink"),
    ("vecinfer-k2v2+nosink", ["vecinfer", "2", "2"], False, "nosink"),
    ("commvq-2+nosink", ["commvq", "2", "2"], False, "nosink"),
    ("vecinfer-k4v4+nosink", ["vecinfer", "4", "4"], False, "nosink"),
    # calibration size: 4x the tokens and the paper's 30 lloyd iterations (own codebooks).
    ("vecinfer-k2v2+calib16k", ["vecinfer", "2", "2", "--tokens", "16384", "--iterations", "30"],
     False, "calibration"),
    # per-head codebooks (one per kv head and layer) from the same 16K-token calibration.
    ("vecinfer-k2v2-perhead+calib16k",
     ["vecinfer", "2", "2", "--per-head", "--tokens", "16384", "--iterations", "30"],
     False, "calibration"),
]


def codec_of(row):
    """the codec a row evaluates, and its extra eval arguments."""
    if row.endswith("+nosink"):
        return row[: -len("+nosink")], ["--sink-tokens", "0"]
    return row.split("+")[0], []


def codebooks_of(qdir, row):
    """a row's codebook artifact: its own for calibration variants, else its codec's."""
    own = "+calib" in row
    return os.path.join(qdir, (row if own else codec_of(row)[0]) + ".vqcb")


def run(cmd, log):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    t = time.time()
    with open(log, "a") as f:
        out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=f, text=True, errors="replace")
    if out.returncode != 0:
        print(f"  failed ({out.returncode}), see {log}", file=sys.stderr)
        return None
    print(f"  done in {time.time() - t:.0f}s", file=sys.stderr)
    return out.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--windows", type=int, default=1)
    ap.add_argument("--calib-tokens", type=int, default=2048)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--passkey-lengths", default="1024")
    ap.add_argument("--passkey-depths", default="0.25,0.75")
    ap.add_argument("--only", default="")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--passkey-stage", default="",
                    help="lengths: run only the passkey stage (needs the rows' codebooks)")
    args = ap.parse_args()
    vq = os.path.join(ROOT, args.build, "bin", "vqserve")
    qdir = os.path.join(ROOT, "data", "quality")
    os.makedirs(qdir, exist_ok=True)
    log = os.path.join(qdir, "run.log")
    if not os.path.exists(os.path.join(ROOT, "data", "eval.txt")):
        subprocess.run([os.path.join(ROOT, "tools", "prepare_texts.sh")], check=True)
    only = set(filter(None, args.only.split(",")))
    settings = dict(ctx=args.ctx, windows=args.windows, calib_tokens=args.calib_tokens,
                    iterations=args.iterations, passkey_lengths=args.passkey_lengths,
                    passkey_depths=args.passkey_depths)
    base_ppl = None
    fp16_json = os.path.join(qdir, "fp16.json")
    if os.path.exists(fp16_json):
        base_ppl = json.load(open(fp16_json))["perplexity"]
    if args.passkey_stage:
        passkey_stage(vq, qdir, log, only, args.passkey_stage, args.passkey_depths)
    for name, calib, passkey, _ in RUNS:
        if args.report_only or args.passkey_stage or (only and name not in only):
            continue
        out_json = os.path.join(qdir, name + ".json")
        if os.path.exists(out_json):
            continue
        codec, extra = codec_of(name)
        cmd = [vq, "eval", "--model", MODEL, "--text", "data/eval.txt", "--codec", codec,
               "--ctx", str(args.ctx), "--windows", str(args.windows), "--json"] + extra
        if calib:
            art = codebooks_of(qdir, name)
            if not os.path.exists(art):
                c = [vq, "calibrate", "--model", MODEL, "--text", "data/calib.txt", "--codec", calib[0],
                     "--k-bits", calib[1], "--v-bits", calib[2], "--tokens", str(args.calib_tokens),
                     "--iterations", str(args.iterations), "-o", art] + calib[3:]
                if run(c, log) is None:
                    continue
            cmd += ["--codebooks", art]
        if passkey:
            cmd += ["--passkey-lengths", args.passkey_lengths, "--passkey-depths", args.passkey_depths]
        else:
            cmd += ["--no-passkey"]
        if name == "fp16":
            cmd += ["--no-baseline"]
        elif base_ppl is not None:
            cmd += ["--baseline-ppl", repr(base_ppl)]
        out = run(cmd, log)
        if out is None:
            continue
        result = json.loads(out.strip().splitlines()[-1])
        result["settings"] = settings
        result["passkey_run"] = passkey
        if name == "fp16":
            base_ppl = result["perplexity"]
            result["fp16_perplexity"] = base_ppl
            result["delta_ppl_pct"] = 0.0
        json.dump(result, open(out_json, "w"), indent=1)
    write_report(qdir)


def passkey_stage(vq, qdir, log, only, lengths, depths):
    """passkey retrieval at `lengths` for every main row (not the ablation or study rows)."""
    for name, calib, _, group in RUNS:
        if group in ("ablation", "nosink") or (only and name not in only):
            continue
        out_json = os.path.join(qdir, f"{name}.passkey.{lengths}.{depths}.json")
        if os.path.exists(out_json):
            continue
        codec, extra = codec_of(name)
        cmd = [vq, "eval", "--model", MODEL, "--text", "data/eval.txt", "--codec", codec, "--json",
               "--passkey-only", "--passkey-lengths", lengths, "--passkey-depths", depths] + extra
        if calib:
            art = codebooks_of(qdir, name)
            if not os.path.exists(art):
                print(f"{name}: no codebooks ({art}); run the main stage first", file=sys.stderr)
                continue
            cmd += ["--codebooks", art]
        out = run(cmd, log)
        if out is None:
            continue
        result = json.loads(out.strip().splitlines()[-1])
        json.dump({"lengths": lengths, "depths": depths, "passkey": result["passkey"],
                   "seconds": result["seconds"]}, open(out_json, "w"), indent=1)


def answer_correct(answer, key):
    """the first run of digits in the answer is exactly the key (PasskeyAnswerCorrect in
    tools/vqserve/eval_metrics.cc; recomputed here for results cached before that rule)."""
    m = re.search(r"[0-9]+", answer)
    return m is not None and m.group(0) == key


def passkey_cell(qdir, name, r):
    """'1K 2/2 · 4K 1/2' from the passkey stages, else the main run's accuracy, else ''."""
    files = [f for f in os.listdir(qdir) if f.startswith(name + ".passkey.") and f.endswith(".json")]
    if files:
        trials = [t for f in files for t in json.load(open(os.path.join(qdir, f)))["passkey"]]
        by_len = {}
        for t in trials:
            # the stage asks for a length; the prompt's token count lands within a few tokens.
            key = int(round(t["tokens"] / 1024.0))
            ok, n = by_len.get(key, (0, 0))
            by_len[key] = (ok + int(answer_correct(t["answer"], t["key"])), n + 1)
        return " · ".join(f"{k}K {ok}/{n}" for k, (ok, n) in sorted(by_len.items()))
    return f"{100 * r['passkey_accuracy']:.0f}%" if r.get("passkey_run") else ""


def passkey_line(qdir, s):
    """the settings line for the passkey column."""
    runs = {}
    for f in sorted(os.listdir(qdir)):
        if ".passkey." in f and f.endswith(".json"):
            d = json.load(open(os.path.join(qdir, f)))
            runs.setdefault((d["lengths"], d["depths"]), []).append(f.split(".passkey.")[0])
    if runs:
        parts = [f"lengths {l} at depths {d} for {', '.join(sorted(set(n)))}"
                 for (l, d), n in sorted(runs.items())]
        return ("- passkey: a 5-digit key hidden in filler text; the first number in the greedy "
                "8-token answer must be exactly the key (prefill in chunks of 512; tokens older than the 128-token window are read "
                "as codes). "
                "Cells: correct / trials per length in K tokens. Runs (`--passkey-stage`): "
                + "; ".join(parts) + ".")
    return (f"- passkey: a 5-digit key in filler text of {s.get('passkey_lengths')} tokens at depths "
            f"{s.get('passkey_depths')}, the first number in the greedy 8-token answer must be the key (only for the rows "
            "with a value).")


# the 2-bit rows whose passkey accuracy is held against fp16's (the issue's passkey target).
TWO_BIT_PASSKEY_ROWS = ("vecinfer-k2v2", "vecinfer-k2v2+calib16k", "vecinfer-k2v2-perhead+calib16k",
                        "commvq-2")


def targets_section(qdir, results):
    """the issue's quality targets against what this run reached (computed, not typed in)."""
    targets = [("vecinfer-k4v4", "VecInfer 4-bit", 0.5), ("vecinfer-k2v2", "VecInfer 2-bit", 3.0),
               ("vecinfer-k2v2+calib16k", "VecInfer 2-bit, 16K-token calibration", 3.0),
               ("vecinfer-k2v2-perhead+calib16k", "VecInfer 2-bit, per-head codebooks, 16K tokens", 3.0),
               ("commvq-2", "CommVQ ≈2-bit", 3.0), ("commvq-1", "CommVQ ≈1-bit", 10.0)]
    out = ["## Targets and what was reached", "",
           "| target | ΔPPL % reached | target ΔPPL % | met |", "|---|---|---|---|"]
    for name, label, goal in targets:
        if name in results:
            d = results[name]["delta_ppl_pct"]
            out.append(f"| {label} ({name}) | {d:+.2f} | ≤ {goal} | {'yes' if d <= goal else 'no'} |")
    def dppl(n):
        return results[n]["delta_ppl_pct"] if n in results else None
    cmp = []
    for ours, kivi in (("vecinfer-k2v2", "kivi-k2v2"), ("commvq-2", "kivi-k2v2"),
                       ("vecinfer-k4v4", "kivi-k4v4")):
        if dppl(ours) is not None and dppl(kivi) is not None:
            b_o, b_k = results[ours]["bits_per_element"], results[kivi]["bits_per_element"]
            cmp.append(f"{ours} ({b_o:.3g} bits) {dppl(ours):+.1f}% vs {kivi} ({b_k:.3g} bits) "
                       f"{dppl(kivi):+.1f}%")
    out += ["", "Against KIVI (its scales make `kivi-kBvB` cost B + 1 bits per element): "
            + "; ".join(cmp) + ".", ""]
    fp16_pk = passkey_cell(qdir, "fp16", results.get("fp16", {}))
    two_bit = [f"{n} {passkey_cell(qdir, n, results[n]) or 'not run'}"
               for n in TWO_BIT_PASSKEY_ROWS + ("kivi-k2v2",) if n in results]
    out += [f"Passkey at 2 bits: fp16 {fp16_pk}; " + "; ".join(two_bit) + ".", ""]
    # the passkey target: a 2-bit row equals fp16 at every length it was run at.
    def by_len(cell):
        return dict(p.split(" ", 1) for p in cell.split(" · ")) if cell else {}
    fp16_cells = by_len(fp16_pk)
    verdict = []
    for n in TWO_BIT_PASSKEY_ROWS:
        cells = by_len(passkey_cell(qdir, n, results[n])) if n in results else {}
        if cells:
            same = all(fp16_cells.get(k) == v for k, v in cells.items())
            verdict.append(f"{n} {'yes' if same else 'no'}")
    if verdict:
        out += ["Passkey target (2-bit accuracy equal to fp16's at the same lengths): "
                + "; ".join(verdict) + ".", ""]
    # the attention sink and calibration-size studies, from their rows.
    sink = []
    for n in sorted(results):
        if n.endswith("+nosink") and n[: -len("+nosink")] in results:
            base = n[: -len("+nosink")]
            sink.append(f"{base} {dppl(base):+.2f}% with the sink, {dppl(n):+.2f}% without")
    if sink:
        out += ["**Attention sink.** Keeping the first 32 tokens (one page) in fp16 for the whole "
                "sequence, at a cost of 32 fp16 tokens per sequence: " + "; ".join(sink) + ".", ""]
    if "vecinfer-k2v2+calib16k" in results and "vecinfer-k2v2" in results:
        out += [f"**Calibration size.** vecinfer-k2v2 calibrated on 16384 tokens with 30 Lloyd "
                f"iterations: {dppl('vecinfer-k2v2+calib16k'):+.2f}%, against "
                f"{dppl('vecinfer-k2v2'):+.2f}% from {results['vecinfer-k2v2']['settings'].get('calib_tokens')} "
                "tokens." + (f" With per-head codebooks (one per kv head and layer) from the same 16K "
                f"tokens: {dppl('vecinfer-k2v2-perhead+calib16k'):+.2f}% (attention-output error "
                f"{results['vecinfer-k2v2-perhead+calib16k']['attn_rel_error']:.3f} against "
                f"{results['vecinfer-k2v2+calib16k']['attn_rel_error']:.3f} shared)."
                if "vecinfer-k2v2-perhead+calib16k" in results else ""), ""]
    out += ["Earlier versions of this report (up to 2026-11-30 03:00 UTC) showed ΔPPL several "
            "times larger (vecinfer-k2v2 +195%, kivi-k4v4 +3.4%) because of two faults since "
            "fixed: within a 512-token prefill chunk, queries read their own recent neighbours "
            "as codes once the chunk had flushed them (decoding never does; now a step attends "
            "exactly as token-by-token decoding, tested to 0 logit difference on the real model), "
            "and the attention-sink tokens were coded.", ""]
    return out


def write_report(qdir):
    results = {}
    for name, _, _, group in RUNS:
        p = os.path.join(qdir, name + ".json")
        if os.path.exists(p):
            r = json.load(open(p))
            r["group"] = group
            results[name] = r
    if not results:
        print("no results", file=sys.stderr)
        return
    s = next(iter(results.values())).get("settings", {})
    # ΔPPL against this run's fp16 perplexity (rows may have been measured with --baseline-ppl of
    # an older fp16 run).
    if "fp16" in results:
        base = results["fp16"]["perplexity"]
        for r in results.values():
            r["delta_ppl_pct"] = 100.0 * (r["perplexity"] - base) / base
    lines = ["# KV-cache codec quality on SmolLM2-135M-Instruct (Q4_1)", "",
             "Generated by `tools/quality_report.py` from `vqserve calibrate` + `vqserve eval` runs "
             "(results cached in `data/quality/`). CPU time on the build machine is scarce (2 shared "
             "cores), so the settings are modest:", "",
             f"- perplexity: {s.get('windows')} window(s) of {s.get('ctx')} tokens of the King James "
             "Bible (Genesis/Exodus, Debian package `bible-kjv`, `tools/prepare_texts.sh`), the KV cache "
             "in the codec for the whole window (newest 128 tokens fp16, the first 32 tokens fp16 as the "
             "attention sink unless the row says `+nosink`, all other tokens coded), fed in chunks "
             "of 512 through `LlamaModel::Forward`; each query sees exactly what token-by-token "
             "decoding would.",
             f"- calibration: {s.get('calib_tokens')} tokens of Debian `fortunes` cookie files "
             f"(sequences of 512), k-means++ (seed 1) + at most {s.get('iterations')} Lloyd "
             "iterations per codebook.",
             passkey_line(qdir, s),
             "- errors: relative L2 error of K and V after encode/decode, and mean relative error of "
             "attention outputs (coded pages + fp16 residual vs exact fp32) at 8 positions per layer, "
             "on the first 1024 tokens of the evaluation text.", "",
             "| codec | bits/elem | bytes/token | compression | perplexity | ΔPPL % | passkey | K err | V err | attn err |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        pk = passkey_cell(qdir, name, r)
        lines.append(f"| {name} | {r['bits_per_element']:.3g} | {r['bytes_per_token']:.0f} | "
                     f"{r['compression']:.2f}x | {r['perplexity']:.4f} | {r['delta_ppl_pct']:+.2f} | {pk} | "
                     f"{r['k_rel_error']:.3f} | {r['v_rel_error']:.3f} | {r['attn_rel_error']:.3f} |")
    lines += ["", "Bytes per token count the coded pages only (all 30 layers, K and V, including "
              "per-group fp16 scalars); each sequence also holds a 128+32-token fp16 ring and each "
              "codec its codebooks (the `fixed_bytes` of the JSON).", ""]
    abl = [n for n in ("vecinfer-k2v2-nosmooth-nohadamard", "vecinfer-k2v2-nohadamard",
                       "vecinfer-k2v2-nosmooth", "vecinfer-k2v2") if n in results]
    if abl:
        label = {"vecinfer-k2v2-nosmooth-nohadamard": "VQ alone", "vecinfer-k2v2-nohadamard": "+ smoothing",
                 "vecinfer-k2v2-nosmooth": "+ Hadamard", "vecinfer-k2v2": "+ both (VecInfer)"}
        lines += ["## VecInfer ablation (2-bit K and V)", "", "| variant | perplexity | ΔPPL % | K err | attn err |",
                  "|---|---|---|---|---|"]
        for n in abl:
            r = results[n]
            lines.append(f"| {label[n]} | {r['perplexity']:.4f} | {r['delta_ppl_pct']:+.2f} | "
                         f"{r['k_rel_error']:.3f} | {r['attn_rel_error']:.3f} |")
        lines.append("")
    lines += targets_section(qdir, results)
    missing = [n for n, _, _, _ in RUNS if n not in results]
    if missing:
        lines += ["Not measured in this run (CPU time ran out): " + ", ".join(missing) + ".", ""]
    lines += ["![bits per element vs ΔPPL](quality_bits_vs_dppl.png)", ""]
    open(os.path.join(ROOT, "docs", "quality.md"), "w").write("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for group in ("kivi", "vecinfer", "commvq"):
            pts = sorted((r["bits_per_element"], r["delta_ppl_pct"]) for r in results.values()
                         if r["group"] == group)
            if pts:
                ax.plot([p[0] for p in pts], [max(p[1], 1e-2) for p in pts], "o-", label=group)
        ax.set_xlabel("bits per element")
        ax.set_ylabel("ΔPPL % vs fp16 (log)")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(ROOT, "docs", "quality_bits_vs_dppl.png"), dpi=120)
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)


if __name__ == "__main__":
    main()
