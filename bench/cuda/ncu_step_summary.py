#!/usr/bin/env python3
"""Per-kernel time of the last decode step in an ncu csv of cuda_e2e_decode_bench.

The csv is what `ncu --metrics gpu__time_duration.sum --csv --print-units base` prints for a
run with --graphs off (docs/device/runS14a/call.sh). The last step starts at the last
embedding-gather launch; kernels are summed by name, largest first.
usage: ncu_step_summary.py NCU_CSV [NCU_CSV ...]   (.csv or .csv.xz)
"""
import collections
import csv
import io
import lzma
import sys


def summarize(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        rows = [r for r in csv.reader(io.StringIO(f.read())) if len(r) > 10]
    header, rows = rows[0], rows[1:]
    name_i, value_i = header.index("Kernel Name"), header.index("Metric Value")
    starts = [i for i, r in enumerate(rows) if "mbedding" in r[name_i]]
    if not starts:
        sys.exit(f"{path}: no embedding-gather launch")
    step = rows[starts[-1]:]
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for r in step:
        entry = by_name[r[name_i][:100]]
        entry[0] += 1
        entry[1] += float(r[value_i].replace(",", "")) / 1e3  # ns -> us
    total = sum(v for _, v in by_name.values())
    print(f"== {path}: {len(step)} kernels in the last step, {total:.1f} us")
    for name, (count, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"{us:9.1f} us {count:4d}x {us / count:7.2f}  {name}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        summarize(p)
