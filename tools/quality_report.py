#!/usr/bin/env python3
"""runs `vqserve calibrate` + `vqserve eval` for codec rows on the default model and writes
docs/quality.md and docs/quality_bits_vs_dppl.png.

perplexity stage (default): every row not yet cached is evaluated on the same windows of
every evaluation text (--windows per text, --ctx tokens each) in ONE `vqserve eval` call per
sink setting (the fp16 baseline is computed once and kept in data/quality/fp16.baseline, so
later calls reuse it); each codec's line is cached as soon as it arrives in
data/quality/<row>.json (delete to re-run). The report gives per codec the mean per-window
relative perplexity change against fp16 on the SAME windows (paired), its standard error and a
95% t interval, overall and per text.
passkey stage (`--passkey-stage 1024,2048,4096,8192 [--passkey-trials 10]`): `vqserve eval
--passkey-only` for the main rows, cached in data/quality/<row>.passkey.<lengths>.<trials>.json,
fp16's trials in the same baseline file.
hand-written sections of the report (between KEPT_BEGIN and KEPT_END) survive a rewrite.
usage: tools/quality_report.py [--build build] [--ctx 2048] [--windows 8] [--calib-tokens 4096]
                               [--iterations 15] [--only row,row] [--report-only]
                               [--passkey-stage LENGTHS [--passkey-trials N]]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
TEXTS = [("data/eval.txt", "King James Bible, Genesis and Exodus", "bible-kjv"),
         ("data/eval2.txt", "Debian Reference (technical prose)", "debian-reference-en")]

# (row name, calibrate arguments or None, group). a row name "<codec>+nosink" evaluates
# <codec> with the whole sequence coded (--sink-tokens 0); every other row keeps the first 32
# tokens fp16, as `vqserve serve` does. "+calib..." rows have codebooks of their own.
RUNS = [
    ("fp16", None, "fp16"),
    ("vecinfer-k2v2", ["vecinfer", "2", "2"], "vecinfer"),
    ("commvq-2", ["commvq", "2", "2"], "commvq"),
    ("vecinfer-k4v4", ["vecinfer", "4", "4"], "vecinfer"),
    ("kivi-k2v2", None, "kivi"),
    ("kivi-k4v4", None, "kivi"),
    ("vecinfer-k4v2", ["vecinfer", "4", "2"], "vecinfer"),
    ("vecinfer-k3v3", ["vecinfer", "3", "3"], "vecinfer"),
    ("vecinfer-k1.5v1.5", ["vecinfer", "1.5", "1.5"], "vecinfer"),
    ("vecinfer-k1v1", ["vecinfer", "1", "1"], "vecinfer"),
    ("commvq-1", ["commvq", "1", "1"], "commvq"),
    # vecinfer ablation at 2 bits: vq alone, + smoothing, + hadamard (+ both is vecinfer-k2v2).
    ("vecinfer-k2v2-nosmooth-nohadamard", ["vecinfer", "2", "2", "--no-smooth", "--no-hadamard"], "ablation"),
    ("vecinfer-k2v2-nohadamard", ["vecinfer", "2", "2", "--no-hadamard"], "ablation"),
    ("vecinfer-k2v2-nosmooth", ["vecinfer", "2", "2", "--no-smooth"], "ablation"),
    # the attention sink: the same codecs with the first page coded too.
    ("kivi-k2v2+nosink", None, "nosink"),
    ("vecinfer-k2v2+nosink", ["vecinfer", "2", "2"], "nosink"),
    ("commvq-2+nosink", ["commvq", "2", "2"], "nosink"),
    ("vecinfer-k4v4+nosink", ["vecinfer", "4", "4"], "nosink"),
    # calibration size: 4x the tokens and the paper's 30 lloyd iterations (own codebooks).
    ("vecinfer-k2v2+calib16k", ["vecinfer", "2", "2", "--tokens", "16384", "--iterations", "30"],
     "calibration"),
    ("vecinfer-k2v2-perhead+calib16k",
     ["vecinfer", "2", "2", "--per-head", "--tokens", "16384", "--iterations", "30"], "calibration"),
]
GROUP = {name: group for name, _, group in RUNS}
CALIB = {name: calib for name, calib, _ in RUNS}
# rows of the passkey stage (ablation and sink studies are perplexity-only).
PASSKEY_GROUPS = ("fp16", "vecinfer", "commvq", "kivi", "calibration")


def codec_of(row):
    """the codec a row evaluates, and whether it keeps the sink."""
    if row.endswith("+nosink"):
        return row[: -len("+nosink")], False
    return row.split("+")[0], True


def codebooks_of(qdir, row):
    """a row's codebook artifact: its own for calibration variants, else its codec's."""
    own = "+calib" in row
    return os.path.join(qdir, (row if own else codec_of(row)[0]) + ".vqcb")


def log_line(log, text):
    with open(log, "a") as f:
        f.write(text + "\n")


def run(cmd, log):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    log_line(log, "+ " + " ".join(cmd))
    t = time.time()
    with open(log, "a") as f:
        out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=f, text=True, errors="replace")
    if out.returncode != 0:
        print(f"  failed ({out.returncode}), see {log}", file=sys.stderr)
        return None
    print(f"  done in {time.time() - t:.0f}s", file=sys.stderr)
    return out.stdout


def stream(cmd, log, on_line):
    """runs cmd, its stderr to the log (and ours), calling on_line for each stdout line."""
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    log_line(log, "+ " + " ".join(cmd))
    with open(log, "a") as f:
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=f, text=True, errors="replace")
        for line in p.stdout:
            line = line.strip()
            if line.startswith("{"):
                on_line(json.loads(line))
        return p.wait()


def ensure_codebooks(vq, qdir, log, rows, args):
    ok = []
    for name in rows:
        calib = CALIB[name]
        if calib:
            art = codebooks_of(qdir, name)
            if not os.path.exists(art):
                c = [vq, "calibrate", "--model", MODEL, "--text", "data/calib.txt", "--codec", calib[0],
                     "--k-bits", calib[1], "--v-bits", calib[2], "--tokens", str(args.calib_tokens),
                     "--iterations", str(args.iterations), "-o", art] + calib[3:]
                if run(c, log) is None:
                    continue
        ok.append(name)
    return ok


def entry_of(qdir, name):
    codec, _ = codec_of(name)
    return codec + ("@" + codebooks_of(qdir, name) if CALIB[name] else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--windows", type=int, default=8, help="windows per text")
    ap.add_argument("--calib-tokens", type=int, default=4096)
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--only", default="")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--passkey-stage", default="", help="lengths: run only the passkey stage")
    ap.add_argument("--passkey-trials", type=int, default=10)
    ap.add_argument("--no-errors", action="store_true", help="skip the K/V/attention error columns")
    args = ap.parse_args()
    vq = os.path.join(ROOT, args.build, "bin", "vqserve")
    qdir = os.path.join(ROOT, "data", "quality")
    os.makedirs(qdir, exist_ok=True)
    log = os.path.join(qdir, "run.log")
    if not args.report_only and not all(os.path.exists(os.path.join(ROOT, t)) for t, _, _ in TEXTS):
        subprocess.run([os.path.join(ROOT, "tools", "prepare_texts.sh")], check=True)
    only = [n for n in args.only.split(",") if n] or [n for n, _, _ in RUNS]
    texts = ",".join(t for t, _, _ in TEXTS)
    baseline = os.path.join(qdir, "fp16.baseline")
    settings = dict(ctx=args.ctx, windows_per_text=args.windows, calib_tokens=args.calib_tokens,
                    iterations=args.iterations)
    if args.passkey_stage and not args.report_only:
        rows = [n for n in only if GROUP[n] in PASSKEY_GROUPS and n != "fp16"
                and not os.path.exists(passkey_json(qdir, n, args.passkey_stage, args.passkey_trials))]
        rows = ensure_codebooks(vq, qdir, log, rows, args)
        entries = {entry_of(qdir, n): n for n in rows}
        cmd = [vq, "eval", "--model", MODEL, "--text", texts, "--json", "--passkey-only",
               "--passkey-lengths", args.passkey_stage, "--passkey-trials", str(args.passkey_trials),
               "--baseline-file", baseline, "--codec", ",".join(["fp16"] + list(entries))]

        def save_pk(r):
            name = "fp16" if r["entry"] == "fp16" else entries[r["entry"]]
            r["lengths"], r["trials_per_length"] = args.passkey_stage, args.passkey_trials
            json.dump(r, open(passkey_json(qdir, name, args.passkey_stage, args.passkey_trials), "w"))
            print(f"  {name}: passkey {r['passkey_accuracy']:.2f} ({r['seconds']:.0f}s)", file=sys.stderr)
        stream(cmd, log, save_pk)
    elif not args.report_only:
        todo = [n for n in only if not os.path.exists(os.path.join(qdir, n + ".json"))]
        todo = ensure_codebooks(vq, qdir, log, todo, args)
        # one call per sink setting; the fp16 row comes from the baseline of the first call.
        for sink in (True, False):
            rows = [n for n in todo if codec_of(n)[1] == sink and n != "fp16"]
            if not rows and not (sink and "fp16" in todo):
                continue
            entries = {entry_of(qdir, n): n for n in rows}
            cmd = [vq, "eval", "--model", MODEL, "--text", texts, "--json", "--no-passkey",
                   "--ctx", str(args.ctx), "--windows", str(args.windows), "--baseline-file", baseline,
                   "--sink-tokens", "32" if sink else "0"] + (["--no-errors"] if args.no_errors else []) + ["--codec", ",".join(["fp16"] + list(entries))]

            def save(r):
                name = "fp16" if r["entry"] == "fp16" else entries[r["entry"]]
                if name == "fp16" and (not sink or "fp16" not in todo):
                    return  # the baseline row is written once, by the call that computed it
                r["settings"] = settings
                json.dump(r, open(os.path.join(qdir, name + ".json"), "w"))
                d = r.get("delta_pct", {})
                print(f"  {name}: ppl {r['perplexity']:.4f}, per-window delta {d.get('mean', 0):+.3f}% "
                      f"[{d.get('lo', 0):+.3f}, {d.get('hi', 0):+.3f}] ({r['seconds']:.0f}s)", file=sys.stderr)
            stream(cmd, log, save)
    write_report(qdir)


def passkey_json(qdir, name, lengths, trials):
    return os.path.join(qdir, f"{name}.passkey.{lengths}.{trials}.json")


def fmt_ci(d):
    return f"{d['mean']:+.2f} ± {d['se']:.2f} [{d['lo']:+.2f}, {d['hi']:+.2f}]"


def wilson(k, n, z=1.959963984540054):
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, c - h), min(1.0, c + h)


def load_passkey(qdir):
    """{row: {target length: [trials]}} from every passkey stage file."""
    out = {}
    for f in sorted(os.listdir(qdir)):
        if ".passkey." in f and f.endswith(".json"):
            name = f.split(".passkey.")[0]
            for t in json.load(open(os.path.join(qdir, f)))["passkey"]:
                out.setdefault(name, {}).setdefault(t["target"], []).append(t)
    return out


# hand-written sections of docs/quality.md (the GPU evaluation, what was tried) lie between
# these markers; a regenerated report keeps them, in order, after its main table.
KEPT_BEGIN = "<!-- kept by tools/quality_report.py: hand-written, not regenerated -->"
KEPT_END = "<!-- /kept -->"


def kept_blocks(text, name="docs/quality.md"):
    """the hand-written blocks of an earlier report, markers included, in order."""
    blocks, at = [], 0
    while True:
        b = text.find(KEPT_BEGIN, at)
        if b < 0:
            stray = text.find(KEPT_END, at)
            if stray >= 0:
                raise SystemExit(f"{name}: {KEPT_END!r} without {KEPT_BEGIN!r} before it")
            return blocks
        e = text.find(KEPT_END, b)
        if e < 0:
            raise SystemExit(f"{name}: {KEPT_BEGIN!r} without {KEPT_END!r} after it")
        blocks.append(text[b:e + len(KEPT_END)])
        at = e + len(KEPT_END)


def write_report(qdir):
    results = {}
    for name, _, group in RUNS:
        p = os.path.join(qdir, name + ".json")
        if os.path.exists(p):
            r = json.load(open(p))
            r["group"] = group
            results[name] = r
    passkey = load_passkey(qdir)
    if not results and not passkey:
        print("no results", file=sys.stderr)
        return
    any_r = next((r for r in results.values() if r.get("codec") != "fp16"), None) or \
        next(iter(results.values()), {})
    s = any_r.get("settings", {})
    nwin = any_r.get("windows", 0)
    ctx = any_r.get("ctx", 0)
    per_text = {}
    for t in any_r.get("window_text", []):
        per_text[t] = per_text.get(t, 0) + 1
    text_desc = "; ".join(f"{TEXTS[i][1]} (Debian package `{TEXTS[i][2]}`, `{TEXTS[i][0]}`): "
                          f"{per_text.get(i, 0)} windows" for i in range(len(TEXTS)))
    lines = [
        "# KV-cache codec quality on SmolLM2-135M-Instruct (Q4_1)", "",
        "Generated by `tools/quality_report.py` from `vqserve calibrate` + `vqserve eval` runs on the "
        "CPU backend (the reference; results cached in `data/quality/`).", "",
        f"- perplexity: {nwin} windows of {ctx} tokens ({nwin * (ctx - 1)} predicted tokens per codec), "
        f"spread evenly over two unrelated texts, none overlapping — {text_desc}. The KV cache is in "
        "the codec for the whole window (newest 128 tokens fp16, the first 32 tokens fp16 as the "
        "attention sink unless the row says `+nosink`, all other tokens coded), fed in chunks of 512 "
        "through `LlamaModel::Forward`; each query sees exactly what token-by-token decoding would."
        + ("" if nwin * (ctx - 1) >= 32000 else
           f" **This run is smaller than the evaluation asks for** (≥ 32K predicted tokens per codec: "
           f"`--windows 8` per text); CPU time on the shared 2-core machine allowed {nwin} windows."),
        "- statistics: fp16 is evaluated once on the same windows. Per window w, "
        "Δ_w = 100 (PPL_codec,w / PPL_fp16,w − 1); the table gives the mean of Δ_w ± its standard "
        "error (sd/√n) and the 95% Student-t interval [mean ± t(0.975, n−1)·se] — a paired "
        "comparison, so the text-to-text spread of perplexity cancels. `pooled` is the change of "
        "the perplexity over all windows together.",
        f"- calibration: {s.get('calib_tokens')} tokens of Debian `fortunes` cookie files (sequences "
        f"of 512), k-means++ (seed 1) + at most {s.get('iterations')} Lloyd iterations per codebook "
        "(rows `+calib16k`: 16384 tokens, 30 iterations).",
        "- errors: relative L2 error of K and V after encode/decode, and mean relative error of "
        "attention outputs (coded pages + fp16 residual vs exact fp32) at 8 positions per layer, on "
        "the first 1024 tokens of the Bible text.", "",
        "| codec | bits/elem | compression | PPL | pooled ΔPPL % | mean Δ % ± se [95% CI] | Bible Δ % [95% CI] | "
        "Debian Ref. Δ % [95% CI] | K err | V err | attn err | CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        if name == "fp16":
            lines.append(f"| fp16 | 16 | 1.00x | {r['perplexity']:.4f} | 0 | (reference) | | | 0 | 0 | 0 | "
                         f"{r.get('seconds', 0):.0f} |")
            continue
        d = r["delta_pct"]
        bt = r.get("delta_pct_by_text", [])
        cells = [f"{x['mean']:+.2f} [{x['lo']:+.2f}, {x['hi']:+.2f}]" if x.get("n") else ""
                 for x in bt] + ["", ""]
        errs = (f"{r['k_rel_error']:.3f} | {r['v_rel_error']:.3f} | {r['attn_rel_error']:.3f}"
                if r['k_rel_error'] > 0 else "not run | not run | not run")
        lines.append(f"| {name} | {r['bits_per_element']:.3g} | {r['compression']:.2f}x | "
                     f"{r['perplexity']:.4f} | {r['delta_ppl_pct']:+.2f} | {fmt_ci(d)} | {cells[0]} | "
                     f"{cells[1]} | {errs} | {r.get('seconds', 0):.0f} |")
    if "fp16" in results:
        f = results["fp16"]
        lines += ["", f"fp16 perplexity by window: min {math.exp(min(f['window_nll'])):.3f}, max "
                  f"{math.exp(max(f['window_nll'])):.3f} — the spread that pairing removes. CPU s: "
                  "seconds of the row's windows on the 2 shared cores of the build machine "
                  "(fp16: the baseline, computed once for all rows)."]
    lines.append("")
    report = os.path.join(ROOT, "docs", "quality.md")
    for block in kept_blocks(open(report).read() if os.path.exists(report) else ""):
        lines += [block, ""]
    # passkey.
    if passkey:
        lengths = sorted({L for v in passkey.values() for L in v})
        lines += ["## Passkey retrieval", "",
                  "A 5-digit key hidden in filler text; the first number in the greedy 8-token answer "
                  "must be exactly the key (prefill in chunks of 512; tokens older than the 128-token "
                  "window are read as codes). Trials per (length, codec) at depths (i + 0.5)/n of the "
                  "prompt, the same keys and depths for every codec (paired with fp16). Cells: correct/"
                  "trials [95% Wilson interval]; `Δ` counts trials fp16 got and the codec missed "
                  "(−) / missed and the codec got (+).", "",
                  "| codec | " + " | ".join(f"{L // 1024}K" for L in lengths) + " |",
                  "|---|" + "---|" * len(lengths)]
        order = [n for n, _, _ in RUNS if n in passkey]
        for name in order:
            cells = []
            for L in lengths:
                ts = passkey[name].get(L, [])
                if not ts:
                    cells.append("not run")
                    continue
                k = sum(t["correct"] for t in ts)
                lo, hi = wilson(k, len(ts))
                cell = f"{k}/{len(ts)} [{lo:.2f}, {hi:.2f}]"
                if name != "fp16" and all("fp16_correct" in t for t in ts):
                    lost = sum(t["fp16_correct"] and not t["correct"] for t in ts)
                    won = sum(t["correct"] and not t["fp16_correct"] for t in ts)
                    cell += f" Δ −{lost}/+{won}"
                cells.append(cell)
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    # ablation and studies from the rows.
    abl = [n for n in ("vecinfer-k2v2-nosmooth-nohadamard", "vecinfer-k2v2-nohadamard",
                       "vecinfer-k2v2-nosmooth", "vecinfer-k2v2") if n in results]
    if len(abl) > 1:
        label = {"vecinfer-k2v2-nosmooth-nohadamard": "VQ alone", "vecinfer-k2v2-nohadamard": "+ smoothing",
                 "vecinfer-k2v2-nosmooth": "+ Hadamard", "vecinfer-k2v2": "+ both (VecInfer)"}
        lines += ["## VecInfer ablation (2-bit K and V)", "", "| variant | mean Δ % ± se [95% CI] | K err | attn err |",
                  "|---|---|---|---|"]
        for n in abl:
            r = results[n]
            lines.append(f"| {label[n]} | {fmt_ci(r['delta_pct'])} | {r['k_rel_error']:.3f} | {r['attn_rel_error']:.3f} |")
        lines.append("")
    lines += paired_section(results)
    lines += targets_section(results)
    missing = [n for n, _, _ in RUNS if n not in results]
    if missing:
        lines += ["Not run with this evaluation (CPU time on the 2-core build machine; run "
                  "`tools/quality_report.py --only ROW` to add a row): " + ", ".join(missing) + ".", ""]
    pk_missing = [n for n, _, g in RUNS if g in PASSKEY_GROUPS and n not in passkey]
    if passkey and pk_missing:
        lines += ["Passkey not run for: " + ", ".join(pk_missing) + ".", ""]
    lines += ["Reports before issue 27 used one 2048-token Bible window (2047 predictions) and 1–5 "
              "passkey trials per cell, without intervals; their numbers are not comparable with these.", "",
              "![bits per element vs ΔPPL](quality_bits_vs_dppl.png)", ""]
    open(report, "w").write("\n".join(lines))
    plot(results)


def _betacf(a, b, x):
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 10000):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1 + aa / c
            c = c if abs(c) > 1e-300 else 1e-300
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def t_quantile(p, dof):
    """the p-quantile (p > 0.5) of Student's t (the same maths as eval_metrics.cc)."""
    def tail(t):
        x = dof / (dof + t * t)
        a, b = dof / 2, 0.5
        bt = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
        ib = bt * _betacf(a, b, x) / a if x < (a + 1) / (a + b + 2) else 1 - bt * _betacf(b, a, 1 - x) / b
        return 0.5 * ib
    lo, hi = 0.0, 1.0
    while tail(hi) > 1 - p:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if tail(mid) > 1 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def mean_ci(x):
    n = len(x)
    m = sum(x) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in x) / (n - 1))
    se = sd / math.sqrt(n)
    t = t_quantile(0.975, n - 1)
    return dict(n=n, mean=m, se=se, lo=m - t * se, hi=m + t * se)


def paired_section(results):
    """codec against codec on the same windows: 100 (PPL_a,w / PPL_b,w - 1)."""
    pairs = [("vecinfer-k2v2+calib16k", "vecinfer-k2v2"), ("vecinfer-k2v2+attnw", "vecinfer-k2v2"),
             ("vecinfer-k2v2+calib16k-mixed", "vecinfer-k2v2+calib16k"),
             ("commvq-2", "vecinfer-k2v2"), ("vecinfer-k4v4", "kivi-k4v4"), ("vecinfer-k2v2", "kivi-k2v2")]
    out = []
    for a, b in pairs:
        if a in results and b in results and results[a].get("window_nll") and \
                results[a].get("window_text") == results[b].get("window_text"):
            d = [100 * math.expm1(x - y) for x, y in zip(results[a]["window_nll"], results[b]["window_nll"])]
            out.append(f"| {a} vs {b} | {fmt_ci(mean_ci(d))} |")
    if not out:
        return []
    return (["## Codec against codec (paired, same windows)", "",
             "Per window 100 (PPL_a / PPL_b − 1); mean ± se [95% t interval]. Below zero: a is better.", "",
             "| a vs b | mean Δ % ± se [95% CI] |", "|---|---|"] + out + [""])


def targets_section(results):
    """the issue's quality targets against the interval of what this run reached."""
    targets = [("vecinfer-k4v4", "VecInfer 4-bit", 0.5), ("vecinfer-k2v2", "VecInfer 2-bit", 3.0),
               ("vecinfer-k2v2+calib16k", "VecInfer 2-bit, 16K-token calibration", 3.0),
               ("commvq-2", "CommVQ ≈2-bit", 3.0), ("commvq-1", "CommVQ ≈1-bit", 10.0)]
    out = ["## Targets", "",
           "Met when the whole 95% interval of the mean per-window Δ lies at or below the target, "
           "not met when it lies above, undecided when it straddles it.", "",
           "| target | mean Δ % [95% CI] | target Δ % | met |", "|---|---|---|---|"]
    for row, label, target in targets:
        if row not in results:
            out.append(f"| {label} ({row}) | not run | ≤ {target} | — |")
            continue
        d = results[row]["delta_pct"]
        verdict = "yes" if d["hi"] <= target else ("no" if d["lo"] > target else "undecided")
        out.append(f"| {label} ({row}) | {d['mean']:+.2f} [{d['lo']:+.2f}, {d['hi']:+.2f}] | ≤ {target} | {verdict} |")
    return out + [""]


def plot(results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for group in ("kivi", "vecinfer", "commvq", "calibration"):
        pts = sorted((r["bits_per_element"], r["delta_pct"]["mean"], r["delta_pct"]["lo"],
                      r["delta_pct"]["hi"], n) for n, r in results.items()
                     if r["group"] == group and "delta_pct" in r)
        if pts:
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                        yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]],
                        fmt="o-" if group != "calibration" else "s", capsize=3, label=group)
            for p in pts:
                ax.annotate(p[4], (p[0], p[1]), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("bits per element")
    ax.set_ylabel("mean per-window ΔPPL % vs fp16 (95% CI)")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(ROOT, "docs", "quality_bits_vs_dppl.png"), dpi=120)


if __name__ == "__main__":
    main()
