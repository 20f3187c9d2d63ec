# Shared by the scripts that check refusals (train_gpt_misuse.sh, hostile_flags.sh): sourced
# after they set $work, it defines
#   expect NAME PATTERN COMMAND...   the command fails (no signal, no timeout: status < 124)
#                                    within 20 s and its output matches PATTERN
# which prints "ok:" or "FAIL:" with the output's tail and counts the failures in $failures.
failures=0
expect() {
  local name=$1 pattern=$2
  shift 2
  local status=0
  timeout 20 "$@" >"$work/out.txt" 2>&1 || status=$?
  if [ "$status" -eq 0 ] || [ "$status" -ge 124 ] || ! grep -qE -- "$pattern" "$work/out.txt"; then
    echo "FAIL: $name (exit $status), expected /$pattern/:"
    tail -5 "$work/out.txt"
    failures=$((failures + 1))
  else
    echo "ok:   $name: $(grep -E -- "$pattern" "$work/out.txt" | head -1)"
  fi
}
