#!/usr/bin/env bash
# char_lstm end to end on the fortunes database, in seconds: a tiny LSTM trained for 12 steps in
# one go, and the same run stopped after step 6 (--stop-at) and continued (--resume), must print
# the same losses for steps 8-12, the same final validation loss and the same sampled text.
# Then a run on fortunes made only of bytes above 127 (UTF-8 text), with such a prompt: every
# byte is a token in [0, 256), none read as a negative char.
#   char_lstm_resume.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
flags=(--embed 8 --hidden 16 --layers 2 --dropout 0.1 --context 16 --steps 12 --batch 4
       --warmup 2 --log-every 2 --eval-every 6 --eval-windows 8 --checkpoint-every 0
       --sample-bytes 40 --threads 1)

"$bin/char_lstm" --help | grep -q -- "--resume" || { echo "FAIL: --help lacks --resume"; exit 1; }
"$bin/char_lstm" "${flags[@]}" --out "$work/whole" >"$work/whole.log"
"$bin/char_lstm" "${flags[@]}" --out "$work/split" --stop-at 6 >"$work/first.log"
"$bin/char_lstm" "${flags[@]}" --out "$work/split" --resume >"$work/second.log"

grep -q "stopped at step 6" "$work/first.log" || { echo "FAIL: --stop-at 6 did not stop"; exit 1; }
grep -q "resumed from" "$work/second.log" || { echo "FAIL: --resume did not resume"; exit 1; }
steps() { grep -oE 'step +(8|10|12)/12 \| loss [0-9.]+' "$1"; }
final() { sed -n '/^final/,$p' "$1" | sed -E 's/\(step ([0-9]+), [^)]*\)/(step \1)/; /^saved /d'; }
diff <(steps "$work/whole.log") <(steps "$work/second.log") ||
  { echo "FAIL: losses after the resume differ from the uninterrupted run"; exit 1; }
[ "$(steps "$work/whole.log" | wc -l)" -eq 3 ] || { echo "FAIL: expected 3 step lines"; exit 1; }
diff <(final "$work/whole.log") <(final "$work/second.log") ||
  { echo "FAIL: final validation or sample differ after the resume"; exit 1; }
grep -q -- "--- temperature" "$work/whole.log" || { echo "FAIL: no sample"; exit 1; }

mkdir -p "$work/utf8"
for i in $(seq 1 200); do printf 'Ça coûte %d€ — naïve Ünïcödé ©\n%%\n' "$i"; done \
  >"$work/utf8/fortunes"
"$bin/char_lstm" "${flags[@]}" --fortunes "$work/utf8" --prompt "Ça" --out "$work/utf8-run" \
  >"$work/utf8.log" 2>&1 || { cat "$work/utf8.log"; echo "FAIL: bytes above 127"; exit 1; }
grep -q '^final' "$work/utf8.log" || { echo "FAIL: no final line on UTF-8 fortunes"; exit 1; }
echo "char_lstm: resume exact; $(grep '^final' "$work/whole.log")"
