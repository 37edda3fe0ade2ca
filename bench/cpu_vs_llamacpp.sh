#!/usr/bin/env bash
# prefill (256-token prompt) and decode (128 tokens) speed of our cpu runtime and of llama.cpp
# (llama-cpp-python) on the same gguf with the same thread count, side by side in one run:
# ROUNDS alternations (ours, llama.cpp, ours, ...) so that a change of machine load hits both;
# the table gives each engine's median and the ratio of medians.
# usage: [ROUNDS=3] bench/cpu_vs_llamacpp.sh [BUILD_DIR] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
THREADS="${2:-2}"
ROUNDS="${ROUNDS:-3}"
MODEL="${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
cmake --build "$BUILD_DIR" --target cpu_decode_bench -j2 >/dev/null
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); threads $THREADS; rounds $ROUNDS"
RESULTS=()
for ((r = 0; r < ROUNDS; ++r)); do
  RESULTS+=("$("$BUILD_DIR/bin/cpu_decode_bench" --model "$MODEL" --threads "$THREADS")")
  RESULTS+=("$(python3 - "$MODEL" "$THREADS" <<'PY'
import json, sys, time
import numpy as np
from llama_cpp import Llama
model, threads = sys.argv[1], int(sys.argv[2])
llm = Llama(model_path=model, n_ctx=512, n_batch=512, n_threads=threads,
            n_threads_batch=threads, verbose=False)
text = ""
while len(text) < 256 * 8:
    text += "The history of the city is long and full of surprising turns, wars and trade. "
ids = llm.tokenize(text.encode(), add_bos=True)[:256]
llm.eval(ids[:16]); llm.reset()  # warm-up
t0 = time.perf_counter(); llm.eval(ids); t1 = time.perf_counter()
for _ in range(128):
    llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
t2 = time.perf_counter()
print(json.dumps({"engine": "llama.cpp", "threads": threads,
                  "prefill_tok_s": round(256 / (t1 - t0), 1),
                  "decode_tok_s": round(128 / (t2 - t1), 1)}))
PY
)")
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${RESULTS[@]}" <<'PY'
import json, statistics, sys
runs = [json.loads(a) for a in sys.argv[1:]]
med = {}
for eng in ("vqserve-cpu", "llama.cpp"):
    rs = [r for r in runs if r["engine"] == eng]
    med[eng] = {k: statistics.median(r[k] for r in rs) for k in ("prefill_tok_s", "decode_tok_s")}
    med[eng]["runs"] = " / ".join(f"{r['decode_tok_s']:.1f}" for r in rs)
threads = runs[0]["threads"]
print("| engine | threads | prefill 256 (tok/s, median) | decode 128 (tok/s, median) | decode per round |")
print("|---|---|---|---|---|")
for eng, m in med.items():
    print(f"| {eng} | {threads} | {m['prefill_tok_s']:.1f} | {m['decode_tok_s']:.1f} | {m['runs']} |")
o, t = med["vqserve-cpu"], med["llama.cpp"]
print(f"| ratio ours/llama.cpp | | {o['prefill_tok_s'] / t['prefill_tok_s']:.2f} | "
      f"{o['decode_tok_s'] / t['decode_tok_s']:.2f} | |")
PY
