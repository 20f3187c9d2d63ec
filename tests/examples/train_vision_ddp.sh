#!/usr/bin/env bash
# train_vision data parallel, ViT and Swin: 2 processes at --batch B train what 1 process at
# --batch 2B trains. Each case is trained 6 steps by one process (the reference); the same run is
# started with 2 processes, stopped after step 3, and resumed by 1 process at --batch 2B (the
# same global batch): log.csv (loss, lr; flips and crops drawn for the whole global batch) and
# the final test accuracy must match the reference to float rounding, and only rank 0 may have
# printed and logged. A resume whose global batch does not divide the position is refused.
#   train_vision_ddp.sh BIN_DIR WORK_DIR <mpirun command...>
set -euo pipefail
source "$(dirname "$0")/ddp_lib.sh" "$@"
skip_without_fashion_mnist

run_case() {  # name, per-process batch, then the flags of the case
  local name=$1 batch=$2; shift 2
  local flags=("$@" --steps 6 --log-every 1 --checkpoint-every 0 --threads 1 --seed 5
               --test-images 100 --crop-padding 2 --attention-images 0)
  local double=$((2 * batch)) w=$work/$name
  "$bin/train_vision" "${flags[@]}" --batch "$double" --out "$w-one" >"$w-one.log"
  "${launcher[@]}" "$bin/train_vision" "${flags[@]}" --batch "$batch" --out "$w-split" \
    --stop-at 3 >"$w-two.log"
  printed_once "$w-two.log" "^train_vision: "
  grep -q "stopped at step 3" "$w-two.log" || fail "$name: 2 processes did not stop at 3"
  [ "$(wc -l <"$w-split/log.csv")" -eq 4 ] || fail "$name: expected a header and 3 rows"
  "$bin/train_vision" "${flags[@]}" --batch "$double" --out "$w-split" --resume >"$w-resumed.log"
  grep -q "resumed from .* at step 3" "$w-resumed.log" || fail "$name: no resume at step 3"
  close <(csv_values "$w-split/log.csv") <(csv_values "$w-one/log.csv") 1e-4 ||
    fail "$name: 2 processes + a resume differ from one process (log.csv)"
  acc() { grep -oE '^final .*test accuracy [0-9.]+%' "$1" | grep -oE '[0-9.]+%$'; }
  [ -n "$(acc "$w-one.log")" ] && [ "$(acc "$w-one.log")" = "$(acc "$w-resumed.log")" ] ||
    fail "$name: final test accuracy $(acc "$w-resumed.log") vs $(acc "$w-one.log")"
  echo "$name: 2 processes then 1 match one process: $(acc "$w-one.log")"
}

run_case vit 8 --model vit-tiny-fmnist --dropout 0
run_case swin 4 --model swin-fmnist --drop-path 0

# The ViT run ended 6 x 16 = 96 images into the epoch: a global batch of 36 cannot continue there.
if "$bin/train_vision" --model vit-tiny-fmnist --steps 8 --batch 36 --threads 1 \
    --out "$work/vit-split" --resume >"$work/refused.log" 2>&1; then
  fail "a resume at a global batch that does not divide the position was accepted"
fi
grep -q "96 examples into its epoch.*global batch of 36" "$work/refused.log" ||
  { cat "$work/refused.log"; fail "the refusal does not say why"; }
echo "train_vision data parallel: ok"
