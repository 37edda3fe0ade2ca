#!/usr/bin/env bash
# writes data/calib.txt (calibration), data/eval.txt and data/eval2.txt (evaluation) from three
# unrelated real texts shipped by debian packages (installed by scripts/setup):
#   calibration: fortune cookie files of package `fortunes` (/usr/share/games/fortunes)
#   evaluation:  the king james bible of package `bible-kjv` (Genesis and Exodus, via `bible -f`)
#   evaluation:  the Debian Reference of package `debian-reference-en` (GPL-2+; technical prose:
#                the plain-text edition with its box-drawn tables and rule lines dropped)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
FORTUNES=/usr/share/games/fortunes
if [ ! -d "$FORTUNES" ]; then echo "prepare_texts: $FORTUNES missing (apt-get install fortunes)" >&2; exit 1; fi
if ! command -v bible > /dev/null; then echo "prepare_texts: 'bible' missing (apt-get install bible-kjv)" >&2; exit 1; fi
DEBREF=/usr/share/debian-reference/debian-reference.en.txt.gz
if [ ! -f "$DEBREF" ]; then echo "prepare_texts: $DEBREF missing (apt-get install debian-reference-en)" >&2; exit 1; fi
# fortunes: plain-text files (not .dat/.u8 indexes), '%' separator lines dropped, sorted order.
for f in $(ls "$FORTUNES" | grep -v -e '\.dat$' -e '\.u8$' | sort); do
  [ -f "$FORTUNES/$f" ] && grep -v '^%$' "$FORTUNES/$f" || true
done > data/calib.txt
# bible: verse references ("Ge1:1 ") removed, one verse per line.
bible -f Genesis1:1-50:26 Exodus1:1-40:38 | sed -E 's/^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ //' | grep -v '^$' > data/eval.txt
# debian reference: runs of (unicode) blanks squeezed to one space, empty lines, table rows
# ('|' or '+' first) and rule lines dropped.
zcat "$DEBREF" | perl -CSD -ne 's/[\s\x{a0}\x{2000}-\x{200b}]+/ /g; s/^ //; s/ $//;
  next if /^$/ || /^[|+]/ || /^[-=_~*]+$/; print "$_\n"' > data/eval2.txt
echo "prepare_texts: data/calib.txt $(wc -c < data/calib.txt) bytes, data/eval.txt $(wc -c < data/eval.txt) bytes, data/eval2.txt $(wc -c < data/eval2.txt) bytes"
