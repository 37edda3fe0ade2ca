#!/usr/bin/env bash
# prefill (256-token prompt) and decode (128 tokens) speed of our cpu runtime and of llama.cpp
# (llama-cpp-python) on the same gguf with the same thread count, side by side in one run.
# usage: bench/cpu_vs_llamacpp.sh [BUILD_DIR] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
THREADS="${2:-2}"
MODEL="${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
cmake --build "$BUILD_DIR" --target cpu_decode_bench -j2 >/dev/null
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); threads $THREADS"
OURS=$("$BUILD_DIR/bin/cpu_decode_bench" --model "$MODEL" --threads "$THREADS")
THEIRS=$(python3 - "$MODEL" "$THREADS" <<'PY'
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
)
python3 - "$OURS" "$THEIRS" <<'PY'
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("| engine | threads | prefill 256 (tok/s) | decode 128 (tok/s) |")
print("|---|---|---|---|")
for r in (ours, theirs):
    print(f"| {r['engine']} | {r['threads']} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.1f} |")
print(f"| ratio ours/llama.cpp | | {ours['prefill_tok_s'] / theirs['prefill_tok_s']:.2f} | "
      f"{ours['decode_tok_s'] / theirs['decode_tok_s']:.2f} |")
PY
