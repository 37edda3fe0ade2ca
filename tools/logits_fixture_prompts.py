"""The prompts and per-step record shared by the logits fixture scripts (llama.cpp, transformers)."""
import numpy as np

PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWrite a short poem about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village at the edge of a great forest, there lived",
]


def step_record(logits, top):
    """The greedy token of one step, its top-`top` logits and statistics of the full vector."""
    token = int(np.argmax(logits))
    order = np.argsort(-logits, kind="stable")[:top]
    return {
        "token": token,
        "top_ids": [int(i) for i in order],
        "top_logits": [float(logits[i]) for i in order],
        "max": float(logits.max()),
        "min": float(logits.min()),
        "mean": float(logits.mean()),
        "std": float(logits.std()),
    }
