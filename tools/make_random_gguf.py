#!/usr/bin/env python3
"""Writes a random-weight llama GGUF of a named shape with the default model's tokenizer.

The weights are F16 (norms F32), pseudo-random and scaled so that activations stay O(1) through
every block: the model runs without NaN or overflow in fp16 on both engines (vqserve and
llama.cpp). Its speed is a real model's of that shape; its text is noise. With --type Q4_K_M or
Q8_0 the weights are written directly as random ggml blocks of those types (numpy, seconds; no
F16 file): random quant bytes with the blocks' scale fields set so that the weights have the F16
writer's standard deviations, in llama.cpp's Q4_K_M recipe (Q4_K; Q6_K for output.weight and, in
the layers its use_more_bits rule picks, attn_v and ffn_down; token_embd Q4_K; norms F32) or
Q8_0 throughout. With --quantize, the F16 file is also converted by llama.cpp's `llama-quantize`
(bench/peers/build_llama_cpp.sh builds it) into each named type (Q8_0, Q4_K_M, ...).

  make_random_gguf.py --shape llama8b|smollm2|tiny [--layers N] [--tokenizer GGUF]
      --out-dir DIR [--name NAME] [--type F16|Q8_0|Q4_K_M]
      [--quantize Q4_K_M,Q8_0 --llama-quantize BIN] [--seed 1]
  make_random_gguf.py --vocab-only --tokenizer GGUF --out FILE
      (a tensor-free GGUF holding only the tokenizer keys: 2 MB to carry where the model is not)

Writes DIR/NAME-TYPE.gguf (NAME defaults to random-SHAPE, TYPE to F16) and DIR/NAME-QTYPE.gguf
per --quantize type; prints each path. Q4_K_M needs rows of whole 256-element super-blocks
(llama8b and tiny; not smollm2, whose hidden size is 576). Shapes: llama8b = Llama-3.1-8B (32 layers, hidden 4096, 32 q / 8 kv
heads, ffn 14336, vocab 128256, rope base 500000, 128K context); smollm2 = the default model's;
tiny = 2 layers, hidden 256, ffn 512, for tests. The tokenizer's vocabulary (49152 tokens) is
padded with unused tokens up to the shape's vocabulary, so that the embedding and output matrices
have the shape's size.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

DEFAULT_TOKENIZER = "models/SmolLM2-135M-Instruct.Q4_1.gguf"

SHAPES = {
    # layers, hidden, ffn, q heads, kv heads, head_dim, vocab (0: the tokenizer's), rope base, ctx
    "llama8b": (32, 4096, 14336, 32, 8, 128, 128256, 500000.0, 131072),
    "smollm2": (30, 576, 1536, 9, 3, 64, 0, 100000.0, 8192),
    "tiny": (2, 256, 512, 4, 2, 64, 0, 10000.0, 2048),
}

# a prime number of pool values (fewer for small shapes): a tensor longer than the pool wraps
# with a shift that differs per row, so no two rows of a matrix are equal.
POOL, SMALL_POOL = 16777259, 1048583


def tokenizer_fields(path):
    """[(key, value, type, subtype)] of the tokenizer.* keys of a GGUF, in file order."""
    reader = GGUFReader(path)
    out = []
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == GGUFValueType.ARRAY else None
        out.append((key, field.contents(), vtype, sub))
    if not any(k == "tokenizer.ggml.tokens" for k, *_ in out):
        sys.exit(f"{path}: no tokenizer.ggml.tokens key")
    return out


def pad_vocab(fields, vocab):
    """pads tokens (with unique unused tokens, type 5), token_type and scores to `vocab`."""
    out = []
    n = next(len(v) for k, v, *_ in fields if k == "tokenizer.ggml.tokens")
    if vocab < n:
        sys.exit(f"the shape's vocabulary {vocab} is smaller than the tokenizer's {n}")
    extra = vocab - n
    for key, value, vtype, sub in fields:
        if key == "tokenizer.ggml.tokens":
            value = list(value) + [f"<|vq_unused_{i}|>" for i in range(extra)]
        elif key == "tokenizer.ggml.token_type":
            value = list(value) + [5] * extra  # UNUSED
        elif key == "tokenizer.ggml.scores":
            value = list(value) + [-1e4] * extra
        out.append((key, value, vtype, sub))
    return out, vocab


def write_vocab_only(tokenizer, out):
    w = GGUFWriter(out, "llama")
    for key, value, vtype, sub in tokenizer_fields(tokenizer):
        w.add_key_value(key, value, vtype, sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    print(out)


def tiled(pool, n, rng):
    """n values read from `pool` from a random offset, wrapping around."""
    out = np.empty(n, dtype=pool.dtype)
    off, i = int(rng.integers(len(pool))), 0
    while i < n:
        k = min(n - i, len(pool) - off)
        out[i:i + k] = pool[off:off + k]
        i, off = i + k, 0
    return out


# ggml block types written directly: (ggml type id, elements a block, bytes a block).
BLOCKS = {"Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210)}
# llama.cpp's file types (general.file_type) of the --type values.
FILE_TYPES = {"F16": 1, "Q8_0": 7, "Q4_K_M": 15}


def use_more_bits(i_layer, n_layers):
    """llama.cpp's rule (llama-quant.cpp) for the Q4_K_M layers whose attn_v and ffn_down
    get Q6_K: the first and last eighth of the layers and every third one between."""
    return (i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or
            (i_layer - n_layers // 8) % 3 == 2)


def block_type(ftype, tname, layers):
    """the ggml block type of 2-d tensor `tname` in a file of type `ftype` (not F16)."""
    if ftype == "Q8_0":
        return "Q8_0"
    if tname == "output.weight":
        return "Q6_K"
    if tname.endswith(("attn_v.weight", "ffn_down.weight")):
        return "Q6_K" if use_more_bits(int(tname.split(".")[1]), layers) else "Q4_K"
    return "Q4_K"


def put_half(blocks, offset, value):
    """sets the fp16 field at byte `offset` of every block (rows of a uint8 array) to value."""
    blocks[:, offset:offset + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)


def random_blocks(btype, rows, cols, std, byte_pool, rng):
    """(rows, row bytes) uint8: random blocks of `btype` whose weights have standard deviation
    `std` and mean 0, their bytes read from `byte_pool` at a random offset. every scale field
    is one value a tensor (as the gpu's FillRandomBlocksKernel sets them); the random bytes
    give the spread: q8_0 d * q (q int8: rms 73.9); q6_k d * scale * (q - 32) (scale int8,
    q 6 bits: rms 1365.7); q4_k d * sc * q - dmin * m (sc, m 6 bits, q 4 bits) with
    d = 2a / 945, dmin = a / 63: mean 0, rms 0.5467 a."""
    _, per_block, nbytes = BLOCKS[btype]
    blocks = tiled(byte_pool, rows * cols // per_block * nbytes, rng).reshape(-1, nbytes)
    if btype == "Q8_0":
        put_half(blocks, 0, std / 73.9)
    elif btype == "Q6_K":
        put_half(blocks, 208, std / 1365.7)
    else:
        a = std / 0.5467
        put_half(blocks, 0, 2.0 * a / 945.0)
        put_half(blocks, 2, a / 63.0)
    return blocks.reshape(rows, -1)


def write_random(args):
    layers, hid, ffn, nh, nkv, hd, vocab, rope_base, ctx = SHAPES[args.shape]
    if args.layers:
        layers = args.layers
    fields = tokenizer_fields(args.tokenizer)
    fields, vocab = pad_vocab(fields, vocab or next(
        len(v) for k, v, *_ in fields if k == "tokenizer.ggml.tokens"))
    rng = np.random.default_rng(args.seed)
    unit = rng.standard_normal(POOL if hid * ffn >= POOL else SMALL_POOL, dtype=np.float32)
    pools = {}

    def pool(std):  # unit normals * std, fp16
        if std not in pools:
            pools[std] = (unit * std).astype(np.float16)
        return pools[std]

    # (name, numpy shape (out, in), std or None for ones (f32 norms)). std 1/sqrt(fan_in) keeps
    # each projection's outputs at unit scale; the residual writes (attn_output, ffn_down) are
    # scaled by 1/sqrt(2 layers) so that the residual stream stays O(1) after all blocks.
    res = 1.0 / np.sqrt(2.0 * layers)
    tensors = [("token_embd.weight", (vocab, hid), 1.0)]
    for b in range(layers):
        p = f"blk.{b}."
        tensors += [(p + "attn_norm.weight", (hid,), None),
                    (p + "attn_q.weight", (nh * hd, hid), hid ** -0.5),
                    (p + "attn_k.weight", (nkv * hd, hid), hid ** -0.5),
                    (p + "attn_v.weight", (nkv * hd, hid), hid ** -0.5),
                    (p + "attn_output.weight", (hid, nh * hd), (nh * hd) ** -0.5 * res),
                    (p + "ffn_norm.weight", (hid,), None),
                    (p + "ffn_gate.weight", (ffn, hid), hid ** -0.5),
                    (p + "ffn_up.weight", (ffn, hid), hid ** -0.5),
                    (p + "ffn_down.weight", (hid, ffn), ffn ** -0.5 * res)]
    tensors += [("output_norm.weight", (hid,), None), ("output.weight", (vocab, hid), hid ** -0.5)]

    os.makedirs(args.out_dir, exist_ok=True)
    name = args.name or f"random-{args.shape}"
    ftype = args.type
    path = os.path.join(args.out_dir, f"{name}-{ftype}.gguf")
    byte_pool = None
    if ftype != "F16":
        byte_pool = rng.integers(0, 256, POOL if hid * ffn >= POOL else SMALL_POOL, np.uint8)

    def kind(tname, std):  # None (f32 ones), "F16" or a BLOCKS type
        if std is None:
            return None
        return "F16" if ftype == "F16" else block_type(ftype, tname, layers)
    for tname, shape, std in tensors:
        k = kind(tname, std)
        if k in BLOCKS and shape[1] % BLOCKS[k][1]:
            sys.exit(f"--type {ftype}: {tname} has rows of {shape[1]} elements, not whole "
                     f"{k} blocks of {BLOCKS[k][1]} (shape {args.shape})")
    w = GGUFWriter(path, "llama")
    w.add_name(name)
    w.add_context_length(ctx)
    w.add_embedding_length(hid)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_rope_freq_base(rope_base)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hd)
    w.add_vocab_size(vocab)
    w.add_file_type(FILE_TYPES[ftype])
    if ftype != "F16":
        w.add_quantization_version(2)
    for key, value, vtype, sub in fields:
        w.add_key_value(key, value, vtype, sub)
    for tname, shape, std in tensors:
        k = kind(tname, std)
        if k in BLOCKS:
            gtype, per_block, nbytes = BLOCKS[k]
            size = int(np.prod(shape)) // per_block * nbytes
            w.add_tensor_info(tname, (shape[0], size // shape[0]), np.dtype(np.uint8), size,
                              raw_dtype=GGMLQuantizationType(gtype))
        else:
            dtype = np.float32 if k is None else np.float16
            w.add_tensor_info(tname, shape, np.dtype(dtype), int(np.prod(shape)) * dtype().itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    t0 = time.time()
    for tname, shape, std in tensors:
        n = int(np.prod(shape))
        k = kind(tname, std)
        if k is None:
            data = np.ones(shape, np.float32)
        elif k == "F16":
            data = tiled(pool(std), n, rng).reshape(shape)
        else:
            data = random_blocks(k, shape[0], shape[1], std, byte_pool, rng)
        w.write_tensor_data(data)
    w.close()
    print(f"{path}: {layers} layers, hidden {hid}, vocab {vocab}, "
          f"{os.path.getsize(path) / 1e9:.2f} GB in {time.time() - t0:.1f} s", file=sys.stderr)
    print(path)
    for qtype in filter(None, args.quantize.split(",")):
        if ftype != "F16":
            sys.exit("--quantize converts the F16 file: not with --type")
        if not args.llama_quantize:
            sys.exit("--quantize needs --llama-quantize (bench/peers/build_llama_cpp.sh builds it)")
        qpath = os.path.join(args.out_dir, f"{name}-{qtype}.gguf")
        t0 = time.time()
        r = subprocess.run([args.llama_quantize, path, qpath, qtype, str(os.cpu_count())],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"llama-quantize {qtype} failed ({r.returncode}):\n{r.stderr[-2000:]}")
        print(f"{qpath}: {os.path.getsize(qpath) / 1e9:.2f} GB in {time.time() - t0:.1f} s",
              file=sys.stderr)
        print(qpath)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--layers", type=int, default=0, help="override the shape's layer count")
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER,
                    help="a GGUF whose tokenizer.* keys are copied")
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--name", default="")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--type", default="F16", type=str.upper, choices=sorted(FILE_TYPES),
                    help="the weights' type: F16, or random blocks of Q8_0 or Q4_K_M")
    ap.add_argument("--quantize", default="", help="comma-separated llama-quantize types")
    ap.add_argument("--llama-quantize", default="", help="path of llama.cpp's llama-quantize")
    ap.add_argument("--vocab-only", action="store_true")
    ap.add_argument("--out", default="", help="the output file of --vocab-only")
    args = ap.parse_args()
    if not os.path.isfile(args.tokenizer):
        sys.exit(f"{args.tokenizer}: no such file (--tokenizer)")
    if args.vocab_only:
        if not args.out:
            sys.exit("--vocab-only needs --out")
        write_vocab_only(args.tokenizer, args.out)
    else:
        write_random(args)


if __name__ == "__main__":
    main()
