#!/usr/bin/env python3
"""Records llama.cpp's greedy decode of the default model as a reference fixture.

For each prompt: the prompt token ids (llama.cpp's tokenizer), 64 greedy tokens, and for every
step the top-20 logits of the distribution that chose the token plus statistics of the full
logit vector. tests/llama_model_test.cc replays the prompt ids and checks our logits against it.

usage: python3 tools/make_logits_fixture.py [--model PATH] [--out tests/data/logits_fixture.json]
"""
import argparse
import json
import os
import sys

import numpy as np
from llama_cpp import Llama

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from logits_fixture_prompts import PROMPTS, step_record  # noqa: E402


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(root, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(root, "tests/data/logits_fixture.json"))
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()

    llm = Llama(model_path=args.model, n_ctx=512, n_batch=512, n_threads=2, logits_all=True,
                seed=0, verbose=False)
    cases = []
    for text in PROMPTS:
        llm.reset()
        ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        llm.eval(ids)
        steps = []
        for _ in range(args.steps):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            rec = step_record(logits, args.top)
            token = rec["token"]
            steps.append(rec)
            llm.eval([token])
        cases.append({"prompt": text, "prompt_ids": [int(i) for i in ids], "steps": steps})
        print(f"{len(ids)} prompt tokens -> {llm.detokenize([s['token'] for s in steps])!r}")

    import llama_cpp
    fixture = {
        "model": os.path.basename(args.model),
        "reference": f"llama-cpp-python {llama_cpp.__version__}, n_threads=2, greedy",
        "vocab_size": int(llm.n_vocab()),
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
