#!/usr/bin/env bash
# train_vision end to end on Fashion-MNIST, in seconds, for both families: a small ViT and Swin
# trained for a few steps in one go, and the same runs stopped half way (--stop-at) and
# continued (--resume), must log the same losses (log.csv) and reach the same test accuracy; the
# pictures (curves, confusion matrix, ViT attention maps) must be written as PNG files.
#   train_vision_resume.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "SKIP: dataset-fashion-mnist is not installed"; exit 0
fi

run_case() {  # name, then the flags of the case
  local name=$1; shift
  local flags=("$@" --steps 8 --log-every 2 --checkpoint-every 0 --threads 2 --seed 3
               --test-images 200)
  "$bin/train_vision" "${flags[@]}" --out "$work/$name-whole" >"$work/$name-whole.log"
  "$bin/train_vision" "${flags[@]}" --out "$work/$name-split" --stop-at 4 >"$work/$name-first.log"
  "$bin/train_vision" "${flags[@]}" --out "$work/$name-split" --resume >"$work/$name-second.log"
  grep -q "stopped at step 4" "$work/$name-first.log" || { echo "FAIL $name: no stop"; exit 1; }
  grep -q "resumed from" "$work/$name-second.log" || { echo "FAIL $name: no resume"; exit 1; }
  diff "$work/$name-whole/log.csv" "$work/$name-split/log.csv" ||
    { echo "FAIL $name: log.csv after the resume differs from the uninterrupted run"; exit 1; }
  [ "$(wc -l <"$work/$name-whole/log.csv")" -eq 10 ] ||
    { echo "FAIL $name: expected a header, 8 step rows and the final row in log.csv"; exit 1; }
  acc() { grep -oE 'test accuracy [0-9.]+%' "$1"; }
  [ -n "$(acc "$work/$name-whole.log")" ] && \
    [ "$(acc "$work/$name-whole.log")" = "$(acc "$work/$name-second.log")" ] ||
    { echo "FAIL $name: final test accuracy differs after the resume"; exit 1; }
  for png in curves confusion; do
    head -c 8 "$work/$name-whole/$png.png" | od -An -tx1 | grep -q "89 50 4e 47" ||
      { echo "FAIL $name: $png.png is not a PNG"; exit 1; }
  done
  echo "$name: resume exact, $(acc "$work/$name-whole.log")"
}

run_case vit --model vit-tiny-fmnist --batch 32 --attention-images 2 --dropout 0.1
[ -s "$work/vit-whole/attention_1.png" ] || { echo "FAIL vit: no attention maps"; exit 1; }
run_case swin --model swin-fmnist --batch 8
echo "train_vision resume: ok"
