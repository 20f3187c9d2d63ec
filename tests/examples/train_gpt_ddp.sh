#!/usr/bin/env bash
# train_gpt data parallel: 2 processes at --batch 2 train what 1 process at --batch 4 trains.
# A tiny GPT is trained 12 steps by one process (the reference); the same run is started with
# 2 processes, stopped after step 6, and resumed by 1 process at --batch 4 (the same global
# batch): its losses and final validation loss must match the reference to float tolerance,
# and only rank 0 may have printed.
#   train_gpt_ddp.sh BIN_DIR WORK_DIR <mpirun command...>
set -euo pipefail
source "$(dirname "$0")/ddp_lib.sh" "$@"  # $bin, $work (emptied), launcher
flags=(--n-layer 1 --n-head 2 --d-model 32 --context 32 --tokenizer bpe --bpe-vocab 300
       --steps 12 --warmup 2 --log-every 2 --eval-every 6 --eval-windows 8
       --checkpoint-every 0 --dropout 0 --sample-tokens 8 --threads 1)

"$bin/train_gpt" "${flags[@]}" --batch 4 --out "$work/one" >"$work/one.log"
"${launcher[@]}" "$bin/train_gpt" "${flags[@]}" --batch 2 --out "$work/split" --stop-at 6 \
  >"$work/two.log"
"$bin/train_gpt" "${flags[@]}" --batch 4 --out "$work/split" --resume >"$work/resumed.log"

[ "$(grep -c '^train_gpt: ' "$work/two.log")" -eq 1 ] ||
  { echo "FAIL: more than rank 0 printed"; cat "$work/two.log"; exit 1; }
grep -q "stopped at step 6" "$work/two.log" || { echo "FAIL: 2 ranks did not stop at 6"; exit 1; }
grep -q "resumed from .* at step 6" "$work/resumed.log" ||
  { echo "FAIL: 1 rank did not resume at step 6"; exit 1; }

# "step     4/12 | loss 5.1234 | ..." -> "4 5.1234"; the final line -> "final 5.1234".
losses() { grep -oE 'step +[0-9]+/12 \| loss [0-9.]+' "$1" | awk '{print $2, $5}' | sed 's|/12||'; }
final() { grep -oE '^final .* val loss [0-9.]+' "$1" | awk '{print "final", $NF}'; }
# Same keys, values within 2e-3 (float rounding of a mean over 2 processes vs over one batch).
close() {
  join <(sort "$1") <(sort "$2") | awk -v want="$(wc -l <"$1")" '
    { d = $2 - $3; if (d < 0) d = -d; if (d > 2e-3) { print "FAIL: " $0; bad = 1 } n++ }
    END { if (n != want || n == 0) { print "FAIL: " n " of " want " lines matched"; bad = 1 }
          exit bad }'
}
{ losses "$work/two.log"; losses "$work/resumed.log"; final "$work/resumed.log"; } >"$work/ddp.txt"
{ losses "$work/one.log"; final "$work/one.log"; } >"$work/ref.txt"
close "$work/ddp.txt" "$work/ref.txt" ||
  { echo "FAIL: data parallel + resume differs from one process"; paste "$work/ddp.txt" \
    "$work/ref.txt"; exit 1; }
echo "train_gpt: 2 processes then a resume with 1 match one process:"
paste "$work/ddp.txt" "$work/ref.txt"
