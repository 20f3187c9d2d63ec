#!/usr/bin/env bash
# train_translate data parallel: 2 processes at --batch-tokens T train what 1 process at
# --batch-tokens 2T trains (the same length-bucket batches, every other pair to each rank, the
# token-mean loss weighted by each rank's share of the target tokens). A tiny model on a small
# dictd file written here is trained 12 steps by one process; the same run is started with 2
# processes, stopped after step 6 and resumed by 1 process at 2T: log.csv (training loss, lr,
# validation loss and BLEU) must match to float rounding, only rank 0 may have printed and
# written, and a resume at another global token budget is refused. With batches of one pair
# (a 16-token budget) rank 1 computes on rank 0's pair with weight 0: still one process's run.
#   train_translate_ddp.sh BIN_DIR WORK_DIR <mpirun command...>
set -euo pipefail
source "$(dirname "$0")/ddp_lib.sh" "$@"

# A dictd dictionary (PREFIX.index: headword TAB offset TAB length in dictd's base 64) of 60
# entries "colour k /x/" -> "Farbe k <f>" with one quoted example each. ASCII only: awk's
# length() is then the byte count.
awk -v dict="$work/dict.dict" -v index_file="$work/dict.index" '
  function b64(n,   s) { s = ""; do { s = substr(B, n % 64 + 1, 1) s; n = int(n / 64) } while (n > 0); return s }
  BEGIN {
    B = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    n = split("red blue green black white grey", en, " "); split("rot blau gruen schwarz weiss grau", de, " ")
    offset = 0
    for (i = 1; i <= n; i++) for (k = 0; k < 10; k++) {
      entry = en[i] " " k " /x/\n" de[i] " " k " <adj>\n      \"a " en[i] " " k " car\"  - ein " de[i] "es " k " Auto\n\n"
      printf "%s", entry > dict
      printf "%s %d\t%s\t%s\n", en[i], k, b64(offset), b64(length(entry)) > index_file
      offset += length(entry)
    }
  }'

base=(--dict "$work/dict" --d-model 32 --n-head 2 --layers 1 --d-ff 64 --bpe-vocab 300
      --dropout 0 --warmup 4 --log-every 1 --eval-pairs 8 --samples 1 --beam 2 --bleu-pairs 8
      --test-pairs 8 --valid-fraction 0.2 --test-fraction 0.1 --checkpoint-every 0 --threads 1)
flags=("${base[@]}" --steps 12 --eval-every 6)
"$bin/train_translate" "${flags[@]}" --batch-tokens 64 --out "$work/one" >"$work/one.log"
"${launcher[@]}" "$bin/train_translate" "${flags[@]}" --batch-tokens 32 --out "$work/split" \
  --stop-at 6 >"$work/two.log"
printed_once "$work/two.log" "^model: "
grep -q "stopped at step 6" "$work/two.log" || fail "2 processes did not stop at step 6"
[ "$(wc -l <"$work/split/log.csv")" -eq 7 ] || fail "expected a header and 6 rows in log.csv"
if "$bin/train_translate" "${flags[@]}" --batch-tokens 48 --out "$work/split" --resume \
    >"$work/refused.log" 2>&1; then
  fail "a resume at another global token budget was accepted"
fi
grep -q "global batch of 64 tokens, this run's is 48" "$work/refused.log" ||
  { cat "$work/refused.log"; fail "the refusal does not say why"; }
"$bin/train_translate" "${flags[@]}" --batch-tokens 64 --out "$work/split" --resume \
  >"$work/resumed.log"
grep -q "resumed from .* at step 6" "$work/resumed.log" || fail "no resume at step 6"
close <(csv_values "$work/split/log.csv") <(csv_values "$work/one/log.csv") 1e-3 ||
  fail "2 processes + a resume differ from one process (log.csv)"
grep -q "^test BLEU" "$work/resumed.log" || fail "the resumed run reported no test BLEU"
echo "train_translate: 2 processes then 1 match one process:"
paste <(progress_losses "$work/two.log"; progress_losses "$work/resumed.log") \
  <(progress_losses "$work/one.log")

"$bin/train_translate" "${base[@]}" --steps 4 --eval-every 4 --batch-tokens 16 \
  --out "$work/one-pair" >"$work/one-pair.log"
"${launcher[@]}" "$bin/train_translate" "${base[@]}" --steps 4 --eval-every 4 --batch-tokens 8 \
  --out "$work/one-pair-split" >"$work/one-pair-two.log"
close <(csv_values "$work/one-pair-split/log.csv") <(csv_values "$work/one-pair/log.csv") 1e-3 ||
  fail "batches of one pair: 2 processes differ from one process (log.csv)"
echo "batches of one pair: 2 processes match one process"
