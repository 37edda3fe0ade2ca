#!/usr/bin/env python3
"""writes the small seed corpora of fuzz/corpus/<target>/ (run once; the seeds are kept in git).

gguf seeds with the `gguf` PyPI package (scripts/requirements.txt); codebook seeds in the .vqcb
layout of runtime/kv/codebook_file.cc; protobuf GenerateRequests from proto/vqserve.proto's
generated python module when present, else hand-encoded wire bytes.
"""
import os
import struct
import tempfile

import gguf
import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(ROOT, "corpus")
M64 = (1 << 64) - 1


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gguf_bytes(build):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "seed.gguf")
        w = gguf.GGUFWriter(path, "llama")
        build(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return open(path, "rb").read()


def tiny_llama(w):
    w.add_name("fuzz-llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(16)
    w.add_feed_forward_length(32)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    toks = ["<s>", "</s>", "a", "b", "c", "ab", "abc", "\u0120", "<|im_start|>", "<|im_end|>"]
    w.add_token_list(toks)
    w.add_token_types([3, 3, 1, 1, 1, 1, 1, 1, 3, 3])
    w.add_token_merges(["a b", "ab c"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{m.role}}\n{{m.content}}<|im_end|>\n{% endfor %}")
    w.add_tensor("token_embd.weight", np.arange(10 * 16, dtype=np.float32).reshape(10, 16))
    w.add_tensor("output_norm.weight", np.ones(16, dtype=np.float16))
    w.add_array("fuzz.nested", [[1, 2], [3]])


def spm_vocab(w):
    w.add_tokenizer_model("llama")
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(4)] + ["\u2581", "\u2581a", "b"]
    w.add_token_list(toks)
    w.add_token_scores([0.0] * 7 + [-1.0, -2.0, -3.0])
    w.add_token_types([2, 3, 3, 6, 6, 6, 6, 1, 1, 1])
    w.add_add_bos_token(True)
    w.add_tensor("blk.0.attn_q.weight", np.zeros((2, 32), dtype=np.float32))


def hash64(data, seed=0):
    p1, p2, p3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
    rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & M64
    h = (seed ^ (len(data) * p1)) & M64
    i = 0
    while i + 8 <= len(data):
        (w,) = struct.unpack_from("<Q", data, i)
        h ^= (rotl((w * p2) & M64, 31) * p1) & M64
        h = (rotl(h, 27) * p1 + p3) & M64
        i += 8
    tail = int.from_bytes(data[i:], "little")
    h ^= (rotl((tail * p2) & M64, 31) * p1) & M64
    h ^= h >> 33
    h = (h * p2) & M64
    h ^= h >> 29
    h = (h * p3) & M64
    h ^= h >> 32
    return h


def vqcb(codec, shape, params, blobs):
    s = lambda b: struct.pack("<Q", len(b)) + b
    out = b"VQCB" + struct.pack("<I", 1) + s(b"fuzz")
    out += struct.pack("<IIII", *shape) + struct.pack("<Q", 0x1234) + s(codec.encode())
    out += struct.pack("<I", len(params)) + b"".join(s(k) + s(v) for k, v in sorted(params.items()))
    out += struct.pack("<I", len(blobs)) + b"".join(s(k) + s(v) for k, v in sorted(blobs.items()))
    return out + struct.pack("<Q", hash64(out))


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def main():
    put("gguf_file", "tiny_llama.gguf", gguf_bytes(tiny_llama))
    put("gguf_file", "spm_vocab.gguf", gguf_bytes(spm_vocab))
    put("gguf_file", "header_only.gguf", struct.pack("<IIQQ", 0x46554747, 2, 0, 0))

    # codebook seeds: the first byte 0 keeps the stored checksum, 1 recomputes it.
    layers, kvh, heads, dim = 1, 1, 1, 8
    lam = np.ones(layers * kvh * dim, dtype=np.float32).tobytes()
    cents = np.linspace(-1, 1, layers * dim * 256, dtype=np.float32).tobytes()
    vi = vqcb("vecinfer-k2v2", (layers, kvh, heads, dim), {b"iters": b"8"},
              {b"lambda": lam, b"k_centroids": cents, b"v_centroids": cents})
    put("codebook_file", "vecinfer_k2v2.bin", b"\0" + vi)
    eye = np.eye(dim, dtype=np.float32).tobytes()
    pca = vqcb("vecinfer-k2v2-pca", (layers, kvh, heads, dim), {b"iters": b"8"},
               {b"lambda": lam, b"k_centroids": cents, b"v_centroids": cents,
                b"k_mean": np.zeros(dim, dtype=np.float32).tobytes(), b"k_transform": eye,
                b"k_inverse": eye, b"k_dims": np.array([3, 5], dtype=np.int32).tobytes()})
    put("codebook_file", "vecinfer_k2v2_pca.bin", b"\0" + pca)
    put("codebook_file", "commvq_empty.bin", b"\1" + vqcb("commvq-2", (1, 1, 1, 64), {}, {b"commvq": b"CVQB"}))
    put("codebook_file", "no_blobs.bin", b"\0" + vqcb("fp16", (2, 1, 2, 64), {b"a": b"b"}, {}))

    put("tokenizer", "bpe_plain.txt", b"\0Hello world, 123 caf\xc3\xa9 \xe4\xb8\x96\xe7\x95\x8c!")
    put("tokenizer", "bpe_special.txt", b"\6<|im_start|>user\nhi<|im_end|>\n\xff\xfe")
    put("tokenizer", "spm_plain.txt", b"\3 ab  ba\tz\x00\xf0\x9f\x98\x80")
    put("tokenizer", "spm_special.txt", b"\7<s>a</s><unk>\xc3(")

    put("chat_template", "chatml.bin", b"\1<|im_start|>system\\nYou are kind.<|im_end|>\0<s>\0</s>\0\1\0hi\0\2\0hello")
    put("chat_template", "llama2.bin", b"\0[INST] <<SYS>>\0<s>\0</s>\0\0\0 sys \0\1\0 q \0\2\0 a \0\1\0q2")
    put("chat_template", "llama3.bin", b"\1<|start_header_id|>\0<|begin_of_text|>\0<|eot_id|>\0\1\0  x  \0tool\0y")

    text = lambda s: field(1, 2, s)  # GenerateRequest.text
    put("request_validation", "text.pb", text(b"What is a cache?") + field(10, 0, varint(16)) + field(11, 2, b"\n\n") + field(17, 2, b"fp16"))
    ids = field(2, 2, field(1, 2, b"".join(varint(i) for i in (1, 504, 2))))
    put("request_validation", "token_ids.pb", ids)
    msg = lambda role, content: field(1, 2, field(1, 2, role) + field(2, 2, content))
    put("request_validation", "chat.pb", field(3, 2, msg(b"system", b"be brief") + msg(b"user", b"hi")))
    put("request_validation", "bad_utf8.pb", text(b"ok \xc0\xaf"))

    put("metrics_exposition", "plain.bin", b"vecinfer-k2v2\0stop\0fp16\0length\0" + struct.pack("<d", 1.5))
    put("metrics_exposition", "escapes.bin", b"q\"u\\o\nte\0\xff\xc3\0" + struct.pack("<dd", -1.0, float("nan")))


if __name__ == "__main__":
    main()
