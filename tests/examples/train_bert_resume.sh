#!/usr/bin/env bash
# train_bert end to end on the fortunes, in seconds: a tiny BERT trained for 8 steps in one go,
# and the same run stopped after step 4 (--stop-at) and continued (--resume), must print the same
# losses for steps 6 and 8 and the same held-out evaluation; fill_mask then reads the directory
# and finetune_bert runs its bag-of-words baseline and a few steps of the pre-trained classifier.
# bench/dump_data (given when the benchmarks are built), handed the same flags, writes the run's
# data for the PyTorch twin: the tokenizer the run trains and as many pairs.
#   train_bert_resume.sh BIN_DIR WORK_DIR [DUMP_DATA]
set -euo pipefail
bin=$1
work=$2
dump_data=${3:-}
rm -rf "$work"
mkdir -p "$work"
flags=(--hidden 32 --layers 1 --heads 2 --intermediate 64 --vocab-size 400 --max-seq-len 32
       --steps 8 --batch 4 --warmup 2 --log-every 2 --eval-every 4 --eval-pairs 16
       --checkpoint-every 0 --threads 2)

"$bin/train_bert" "${flags[@]}" --out "$work/whole" >"$work/whole.log"
"$bin/train_bert" "${flags[@]}" --out "$work/split" --stop-at 4 >"$work/first.log"
"$bin/train_bert" "${flags[@]}" --out "$work/split" --resume >"$work/second.log"

grep -q "stopped at step 4" "$work/first.log" || { echo "FAIL: --stop-at 4 did not stop"; exit 1; }
grep -q "resumed from" "$work/second.log" || { echo "FAIL: --resume did not resume"; exit 1; }
steps() { grep -oE 'step +(6|8)/8 \| loss [0-9.]+' "$1"; }
evals() { grep -oE 'eval step 8 \| held-out loss [0-9.]+ \| MLM accuracy [0-9.]+% \| NSP accuracy [0-9.]+%' "$1"; }
diff <(steps "$work/whole.log") <(steps "$work/second.log") ||
  { echo "FAIL: losses after the resume differ from the uninterrupted run"; exit 1; }
[ "$(steps "$work/whole.log" | wc -l)" -eq 2 ] || { echo "FAIL: expected 2 step lines"; exit 1; }
diff <(evals "$work/whole.log") <(evals "$work/second.log") ||
  { echo "FAIL: the held-out evaluation differs after the resume"; exit 1; }
[ "$(evals "$work/whole.log" | wc -l)" -eq 1 ] || { echo "FAIL: expected the final eval"; exit 1; }
cmp "$work/whole/log.csv" "$work/split/log.csv" || { echo "FAIL: log.csv differs"; exit 1; }
for f in tokenizer.txt ckpt.safetensors bert.safetensors curves.png; do
  [ -s "$work/whole/$f" ] || { echo "FAIL: no $f"; exit 1; }
done
if [ -n "$dump_data" ]; then
  "$dump_data" bert "${flags[@]}" --out "$work/dump" >"$work/dump.log"
  for f in tokenizer.txt vocab.txt train.safetensors val.safetensors; do
    [ -s "$work/dump/$f" ] || { echo "FAIL: dump_data wrote no $f"; exit 1; }
  done
  cmp -s "$work/dump/tokenizer.txt" "$work/whole/tokenizer.txt" ||
    { echo "FAIL: the dumped tokenizer is not the one the run trains"; exit 1; }
  pairs=$(grep -oE -- '-> [0-9]+ pairs' "$work/whole.log" | grep -oE '[0-9]+')
  grep -q "^$pairs training pairs" "$work/dump.log" ||
    { echo "FAIL: dump_data's training pairs are not the run's $pairs"; exit 1; }
fi

"$bin/fill_mask" --dir "$work/whole" --text "The meaning of [MASK] is" --top 3 \
  --attention "$work/attention.png" >"$work/fill.log"
[ "$(grep -c '^   [123]\. ' "$work/fill.log")" -eq 3 ] || { echo "FAIL: fill_mask top 3"; exit 1; }
[ -s "$work/attention.png" ] || { echo "FAIL: no attention map"; exit 1; }

"$bin/finetune_bert" --pretrained "$work/whole" --methods bow,pretrained --steps 3 --batch 4 \
  --max-seq-len 32 --eval-every 2 --seeds 2 --seed 5 --threads 2 >"$work/finetune.log"
grep -qE '^  bow +[0-9.]+%' "$work/finetune.log" || { echo "FAIL: no bag-of-words accuracy"; exit 1; }
grep -qE '^  pretrained +[0-9.]+%$' "$work/finetune.log" ||
  { echo "FAIL: no fine-tuned accuracy"; exit 1; }
for seed in 5 6; do  # --seeds 2: each run at its best validation step
  grep -qE "^      seed $seed: [0-9.]+% at step [23] \(validation [0-9.]+%" "$work/finetune.log" ||
    { echo "FAIL: no fine-tuned accuracy of seed $seed"; exit 1; }
  grep -qE "^pretrained,$seed,[23],[0-9.]+,[0-9.]+,[0-9.]+$" "$work/whole/finetune.csv" ||
    { echo "FAIL: seed $seed not in finetune.csv"; exit 1; }
done
# the printed accuracy is the mean of the two seeds' in finetune.csv
mean=$(awk -F, '$1 == "pretrained" { s += $5; n++ } END { printf "%.2f%%", 100 * s / n }' \
  "$work/whole/finetune.csv")
grep -qE "^  pretrained +$mean$" "$work/finetune.log" || { echo "FAIL: mean is not $mean"; exit 1; }
echo "train_bert resume, fill_mask and finetune_bert: ok"
