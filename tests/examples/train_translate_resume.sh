#!/usr/bin/env bash
# train_translate end to end in seconds on a small dictd dictionary written here (the FreeDict
# layout: headword /IPA/, translations, quoted examples): a tiny model trained for 12 steps in
# one go, and the same run stopped after step 6 (--stop-at) and continued (--resume), must log
# the same losses (log.csv identical) and print the same sample translations; bench/dump_data
# (given when the benchmarks are built), handed the same flags, writes the run's data (the
# tokenizer the run trains) for the PyTorch twin; translate then reads the checkpoint and draws
# an attention map.
#   train_translate_resume.sh BIN_DIR WORK_DIR [DUMP_DATA]
set -euo pipefail
bin=$1
work=$2
dump_data=${3:-}
rm -rf "$work"
mkdir -p "$work"

# dictd's base-64 numbers: A-Z a-z 0-9 + /, most significant digit first.
digits=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/
b64() {
  local n=$1 s=""
  while :; do s="${digits:$((n % 64)):1}$s"; n=$((n / 64)); [ "$n" -eq 0 ] && break; done
  echo "$s"
}
english=(house tree water bread small big red green dog cat book table)
german=(Haus Baum Wasser Brot klein groß rot grün Hund Katze Buch Tisch)
: >"$work/dict.dict"
: >"$work/dict.index"
for i in "${!english[@]}"; do
  for j in 0 1 2 3 4 5; do
    entry="${english[$i]} $j /x/"$'\n'"${german[$i]} $j <neut>"$'\n'
    entry+="      \"the ${english[$i]} $j\"  - der ${german[$i]} $j"$'\n\n'
    offset=$(stat -c %s "$work/dict.dict")
    printf '%s' "$entry" >>"$work/dict.dict"
    length=$(($(stat -c %s "$work/dict.dict") - offset))
    printf '%s\t%s\t%s\n' "${english[$i]} $j" "$(b64 "$offset")" "$(b64 "$length")" >>"$work/dict.index"
  done
done

flags=(--dict "$work/dict" --d-model 32 --n-head 2 --layers 1 --d-ff 64 --bpe-vocab 300
       --steps 12 --batch-tokens 64 --warmup 4 --log-every 2 --eval-every 6 --eval-pairs 16
       --samples 2 --beam 2 --valid-fraction 0.2 --test-fraction 0.1 --checkpoint-every 0
       --threads 2)
"$bin/train_translate" "${flags[@]}" --out "$work/whole" >"$work/whole.log"
"$bin/train_translate" "${flags[@]}" --out "$work/split" --stop-at 6 >"$work/first.log"
"$bin/train_translate" "${flags[@]}" --out "$work/split" --resume >"$work/second.log"

grep -q "stopped at step 6" "$work/first.log" || { echo "FAIL: --stop-at 6 did not stop"; exit 1; }
grep -q "resumed from .* at step 6" "$work/second.log" || { echo "FAIL: no resume"; exit 1; }
diff "$work/whole/log.csv" "$work/split/log.csv" ||
  { echo "FAIL: log.csv after the resume differs from the uninterrupted run"; exit 1; }
[ "$(wc -l <"$work/whole/log.csv")" -eq 13 ] || { echo "FAIL: expected 12 log rows"; exit 1; }
samples() { sed -n '/^eval step 12/,$p' "$1" | grep -v '^wrote'; }
diff <(samples "$work/whole.log") <(samples "$work/second.log") ||
  { echo "FAIL: final evaluation or samples differ after the resume"; exit 1; }
if [ -n "$dump_data" ]; then
  "$dump_data" translation "${flags[@]}" --out "$work/dump" >"$work/dump.log"
  for file in train.tsv valid.tsv test.tsv tokenizer.txt data.safetensors init.safetensors; do
    [ -s "$work/dump/$file" ] || { echo "FAIL: dump_data wrote no $file"; exit 1; }
  done
  cmp -s "$work/dump/tokenizer.txt" "$work/whole/tokenizer.txt" ||
    { echo "FAIL: the dumped tokenizer is not the one the run trains"; exit 1; }
  grep -q "($(grep -oE 'in [0-9]+ batches' "$work/whole.log" | grep -oE '[0-9]+') batches)" \
    "$work/dump.log" || { echo "FAIL: dump_data's batches are not the run's"; exit 1; }
fi
[ -s "$work/whole/loss.png" ] || { echo "FAIL: no loss.png"; exit 1; }
[ -s "$work/whole/bleu.png" ] || { echo "FAIL: no bleu.png"; exit 1; }
grep -q "^eval step 12 .* BLEU [0-9.]* (" "$work/whole.log" || { echo "FAIL: no validation BLEU"; exit 1; }
grep -q "^test BLEU [0-9.]* (" "$work/whole.log" || { echo "FAIL: no test BLEU"; exit 1; }
grep -q "^test BLEU" "$work/first.log" && { echo "FAIL: a stopped run reported test BLEU"; exit 1; }

"$bin/translate" --out "$work/split" --text "the house 3" --beam 2 --max-len 8 \
  --attention "$work/attention.png" >"$work/translation.txt"
echo "the house 3" | "$bin/translate" --out "$work/split" --beam 2 --max-len 8 >"$work/stdin.txt"
diff "$work/translation.txt" "$work/stdin.txt" || { echo "FAIL: --text and stdin differ"; exit 1; }
[ -s "$work/attention.png" ] || { echo "FAIL: no attention map"; exit 1; }
echo "train_translate resume and translate: ok"
