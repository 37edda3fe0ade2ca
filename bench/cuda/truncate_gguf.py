#!/usr/bin/env python3
"""writes a copy of a llama gguf that keeps only its first N transformer blocks (block_count
set to N), so that a model fits what may be carried to the lent gpu machine.
usage: truncate_gguf.py IN.gguf OUT.gguf N"""
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def main(src, dst, keep):
    b = open(src, "rb").read()
    at = 0

    def take(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, b, at)
        at += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal at
        n = take("Q")
        s = b[at:at + n]
        at += n
        return s

    def skip_value(t):
        nonlocal at
        if t in SIZES:
            at += SIZES[t]
        elif t == 8:
            string()
        elif t == 9:
            et, n = take("I"), take("Q")
            for _ in range(n):
                skip_value(et)
        else:
            raise ValueError(f"unknown gguf type {t}")

    assert b[:4] == b"GGUF"
    at = 4
    version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    out = bytearray(b[:4]) + struct.pack("<IQQ", version, 0, n_kv)  # tensor count patched below
    alignment = 32
    for _ in range(n_kv):
        start = at
        key = string().decode()
        t = take("I")
        value_at = at
        skip_value(t)
        chunk = bytearray(b[start:at])
        if key.endswith(".block_count"):
            struct.pack_into("<I", chunk, value_at - start, keep)
        if key == "general.alignment":
            alignment = struct.unpack_from("<I", b, value_at)[0]
        out += chunk
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        dims = [take("Q") for _ in range(nd)]
        ttype, offset = take("I"), take("Q")
        infos.append((name, dims, ttype, offset))
    data_start = (at + alignment - 1) // alignment * alignment
    offsets = sorted(o for _, _, _, o in infos)
    kept = []
    for name, dims, ttype, offset in infos:
        s = name.decode()
        if s.startswith("blk.") and int(s.split(".")[1]) >= keep:
            continue
        nxt = next((o for o in offsets if o > offset), len(b) - data_start)
        kept.append((name, dims, ttype, b[data_start + offset:data_start + nxt]))
    struct.pack_into("<Q", out, 8, len(kept))
    data = bytearray()
    for name, dims, ttype, blob in kept:
        data += b"\0" * (-len(data) % alignment)
        out += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, len(data))
        data += blob
    out += b"\0" * (-len(out) % alignment)
    open(dst, "wb").write(bytes(out + data))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
