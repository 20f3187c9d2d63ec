#!/usr/bin/env bash
# bench/dump_data takes the data flags of train_translate and train_bert under their names, with
# their types, checks and defaults (each option of `dump_data TASK --help` is in the trainer's
# --help as it is), accepts the trainer's other flags and leaves them alone (reproduce.sh hands it
# the whole list), and refuses a bad data flag by its name before reading any data.
#   dump_data_flags.sh DUMP_DATA EXAMPLES_BIN_DIR WORK_DIR
set -euo pipefail
dump_data=$1
bin=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
source "$(dirname "$0")/expect_lib.sh"  # expect NAME PATTERN COMMAND...; $failures

# "--max-words INT:INT > 0=12" of each option line: the spec before the help text.
specs() { grep -E '^ +--[a-z]' | sed -E 's/^ +//; s/  .*//' | grep -v '^--out ' | sort; }
for pair in translation:train_translate bert:train_bert; do
  task=${pair%%:*} trainer=${pair##*:}
  "$bin/$trainer" --help >"$work/$trainer.help"
  count=0
  while IFS= read -r spec; do
    count=$((count + 1))
    pattern="^ +$(printf '%s' "$spec" | sed 's/[][\.*^$+?(){}|]/\\&/g')( |$)"
    grep -qE -- "$pattern" "$work/$trainer.help" && continue
    echo "FAIL: dump_data $task has '$spec', $trainer --help has not"
    failures=$((failures + 1))
  done < <("$dump_data" "$task" --help | specs)
  [ "$count" -ge 5 ] || { echo "FAIL: dump_data $task --help lists $count options"; exit 1; }
  echo "ok:   dump_data $task: its $count data flags are $trainer's"
done

expect "a bad data flag is refused by name" "--max-tokens" \
  "$dump_data" translation --out "$work/t" --max-tokens 2
expect "--out is required" "--out" "$dump_data" bert --vocab-size 100
expect "a task is required" "subcommand" "$dump_data" --out "$work/t"
if [ -e "$work/t" ]; then
  echo "FAIL: a refused dump_data wrote $work/t"
  failures=$((failures + 1))
fi
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "dump_data flags: ok"
