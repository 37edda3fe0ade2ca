#!/usr/bin/env python3
"""tools/quality_report.py keeps the hand-written blocks of docs/quality.md when it rewrites the
report: kept_blocks finds them in order, markers included, and names the file and the problem
for a marker without its pair; the repo's report has its blocks."""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("quality_report",
                                              os.path.join(ROOT, "tools", "quality_report.py"))
qr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(qr)

B, E = qr.KEPT_BEGIN, qr.KEPT_END
text = f"# t\n\ngenerated\n{B}\n## one\nmine\n{E}\nmore generated\n{B}\n## two\n{E}\n"
blocks = qr.kept_blocks(text)
assert blocks == [f"{B}\n## one\nmine\n{E}", f"{B}\n## two\n{E}"], blocks
assert qr.kept_blocks("no markers") == []
for bad, want in ((f"x {B} y", "without"), (f"x {E} y", "without")):
    try:
        qr.kept_blocks(bad, "q.md")
    except SystemExit as e:
        assert str(e).startswith("q.md: ") and want in str(e), e
    else:
        raise AssertionError(f"no error for {bad!r}")
report = open(os.path.join(ROOT, "docs", "quality.md")).read()
kept = qr.kept_blocks(report)
assert len(kept) == 1 and "## What we tried for a faithful 2-bit codec (issue 27)" in kept[0], len(kept)
print("quality_report kept blocks: ok")
