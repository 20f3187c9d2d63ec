#!/usr/bin/env bash
# train_detr data parallel. What is exact: with --overfit-one every rank trains the one scene,
# so 2 processes (stopped after step 3, resumed by 1 process) must log what one process logs
# (log.csv to float rounding, the same final AP): the DDP plumbing, the global loss, the
# checkpoint and the stop are the trainer's. What is not: on scene streams each rank's
# BatchNorm normalises by its own 2 scenes' statistics, so 2 processes x --batch 2 only
# approach 1 process x --batch 4: there the run must stop and resume across world sizes, print
# and log once, and start from the same loss to within BatchNorm's difference.
#   train_detr_ddp.sh BIN_DIR WORK_DIR <mpirun command...>
set -euo pipefail
source "$(dirname "$0")/ddp_lib.sh" "$@"
skip_without_fashion_mnist
final_ap() { grep -oE '^final .*AP [0-9.]+ \| AP50 [0-9.]+ \| AP75 [0-9.]+' "$1" | sed 's/([^)]*)//'; }

# ---- exact: --overfit-one
flags=(--overfit-one --steps 6 --log-every 1 --eval-every 0 --checkpoint-every 0 --threads 1
       --draw-scenes 0 --seed 5)
"$bin/train_detr" "${flags[@]}" --out "$work/one" >"$work/one.log"
"${launcher[@]}" "$bin/train_detr" "${flags[@]}" --out "$work/split" --stop-at 3 >"$work/two.log"
printed_once "$work/two.log" "^train_detr: "
grep -q "stopped at step 3" "$work/two.log" || fail "2 processes did not stop at step 3"
[ "$(wc -l <"$work/split/log.csv")" -eq 4 ] || fail "expected a header and 3 rows in log.csv"
"$bin/train_detr" "${flags[@]}" --out "$work/split" --resume >"$work/resumed.log"
grep -q "resumed from .* at step 3" "$work/resumed.log" || fail "no resume at step 3"
close <(csv_values "$work/split/log.csv") <(csv_values "$work/one/log.csv") 1e-4 ||
  fail "--overfit-one: 2 processes + a resume differ from one process (log.csv)"
[ -n "$(final_ap "$work/one.log")" ] && [ "$(final_ap "$work/one.log")" = "$(final_ap "$work/resumed.log")" ] ||
  fail "final AP '$(final_ap "$work/resumed.log")' vs '$(final_ap "$work/one.log")'"
echo "overfit-one: 2 processes then 1 match one process: $(final_ap "$work/one.log")"

# ---- scene streams: 2 x --batch 2 vs 1 x --batch 4
flags=(--steps 4 --log-every 1 --eval-every 0 --checkpoint-every 0 --eval-scenes 10
       --curve-scenes 10 --draw-scenes 1 --threads 1 --seed 5)
"$bin/train_detr" "${flags[@]}" --batch 4 --out "$work/stream-one" >"$work/stream-one.log"
"${launcher[@]}" "$bin/train_detr" "${flags[@]}" --batch 2 --out "$work/stream" --stop-at 2 \
  >"$work/stream-two.log"
printed_once "$work/stream-two.log" "^train_detr: "
[ "$(wc -l <"$work/stream/log.csv")" -eq 3 ] || fail "expected a header and 2 rows in log.csv"
"$bin/train_detr" "${flags[@]}" --batch 4 --out "$work/stream" --resume >"$work/stream-resumed.log"
grep -q "resumed from .* at step 2" "$work/stream-resumed.log" || fail "no resume at step 2"
[ "$(wc -l <"$work/stream/log.csv")" -eq 6 ] || fail "expected 4 step rows and the final row"
[ -n "$(final_ap "$work/stream-resumed.log")" ] || fail "the resumed run reported no AP"
first() { sed -n 2p "$1" | cut -d, -f2; }
awk -v a="$(first "$work/stream/log.csv")" -v b="$(first "$work/stream-one/log.csv")" \
  'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d < 0.02) }' ||
  fail "step 1: loss $(first "$work/stream/log.csv") vs one process $(first "$work/stream-one/log.csv")"
echo "scene streams: step 1 loss $(first "$work/stream/log.csv") (2 x 2) vs" \
  "$(first "$work/stream-one/log.csv") (1 x 4); resumed: $(final_ap "$work/stream-resumed.log")"
echo "train_detr data parallel: ok"
