#!/usr/bin/env python3
"""Records Hugging Face transformers' greedy decode of the default model as a reference fixture.

transformers reads the same GGUF file (dequantizing every tensor to float32 with gguf-py) and
runs its own Llama implementation in float32, with a float32 KV cache. The prompts and the
fixture format are those of tools/make_logits_fixture.py (the llama.cpp reference); the prompt
ids are transformers' tokenization of the same texts. tests/llama_model_test.cc replays them.

Needs torch and transformers, which the project does not install (only this script uses them):
  python3 -m venv /tmp/hfenv && /tmp/hfenv/bin/pip install torch transformers accelerate gguf==0.19.0 numpy
usage: /tmp/hfenv/bin/python tools/make_hf_logits_fixture.py [--model PATH] [--out PATH]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from logits_fixture_prompts import PROMPTS, step_record  # noqa: E402


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(root, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(root, "tests/data/hf_logits_fixture.json"))
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(2)
    folder, name = os.path.split(os.path.abspath(args.model))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    cases = []
    for text in PROMPTS:
        ids = tok(text, add_special_tokens=True)["input_ids"]
        steps = []
        with torch.no_grad():
            out = model(torch.tensor([ids]), use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1].double().numpy()
            for _ in range(args.steps):
                rec = step_record(np.asarray(logits, dtype=np.float64), args.top)
                steps.append(rec)
                out = model(torch.tensor([[rec["token"]]]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[0, -1].double().numpy()
        cases.append({"prompt": text, "prompt_ids": [int(i) for i in ids], "steps": steps})
        print(f"{len(ids)} prompt tokens -> {tok.decode([s['token'] for s in steps])!r}")

    fixture = {
        "model": os.path.basename(args.model),
        "reference": (f"transformers {transformers.__version__}, torch {torch.__version__}, "
                      "float32 weights dequantized from the gguf, float32 kv cache, eager "
                      "attention, greedy"),
        "vocab_size": int(model.config.vocab_size),
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
