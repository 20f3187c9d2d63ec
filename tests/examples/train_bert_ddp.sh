#!/usr/bin/env bash
# train_bert data parallel: 2 processes at --batch B train what 1 process at --batch 2B trains
# (the same length-grouped batches, every other pair to each rank, the MLM mean weighted by
# each rank's share of the predicted positions). A tiny BERT on the fortunes is trained 8 steps
# by one process; the same run is started with 2 processes, stopped after step 4 and resumed by
# 1 process at 2B: log.csv (loss, lr, held-out loss and MLM/NSP accuracy) must match to float
# rounding, only rank 0 may have printed and written, and a resume at another global batch is
# refused.
#   train_bert_ddp.sh BIN_DIR WORK_DIR <mpirun command...>
set -euo pipefail
source "$(dirname "$0")/ddp_lib.sh" "$@"
flags=(--hidden 32 --layers 1 --heads 2 --intermediate 64 --vocab-size 400 --max-seq-len 32
       --dropout 0 --steps 8 --warmup 2 --log-every 1 --eval-every 4 --eval-pairs 16
       --checkpoint-every 0 --threads 1)

"$bin/train_bert" "${flags[@]}" --batch 4 --out "$work/one" >"$work/one.log"
"${launcher[@]}" "$bin/train_bert" "${flags[@]}" --batch 2 --out "$work/split" --stop-at 4 \
  >"$work/two.log"
printed_once "$work/two.log" "^train_bert: "
grep -q "stopped at step 4" "$work/two.log" || fail "2 processes did not stop at step 4"
[ "$(wc -l <"$work/split/log.csv")" -eq 5 ] || fail "expected a header and 4 rows in log.csv"
if "$bin/train_bert" "${flags[@]}" --batch 2 --out "$work/split" --resume >"$work/refused.log" 2>&1; then
  fail "a resume at another global batch was accepted"
fi
grep -q "global batch of 4 pairs, this run's is 2" "$work/refused.log" ||
  { cat "$work/refused.log"; fail "the refusal does not say why"; }
"$bin/train_bert" "${flags[@]}" --batch 4 --out "$work/split" --resume >"$work/resumed.log"
grep -q "resumed from .* at step 4" "$work/resumed.log" || fail "no resume at step 4"
close <(csv_values "$work/split/log.csv") <(csv_values "$work/one/log.csv") 1e-3 ||
  fail "2 processes + a resume differ from one process (log.csv)"
echo "train_bert: 2 processes then 1 match one process:"
paste <(progress_losses "$work/two.log"; progress_losses "$work/resumed.log") \
  <(progress_losses "$work/one.log")
