#!/usr/bin/env bash
# A rank that throws, or is killed, ends the whole job within seconds, non-zero, with the
# failure named: which rank, which step.
#   throwing_rank.sh <mpirun command...> -- <throwing_rank binary>
set -uo pipefail
launcher=()
while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
shift
binary=$1
for mode in uncaught caught killed; do
  start=$(date +%s%N)
  output=$(timeout 30 "${launcher[@]}" "$binary" "$mode" 2>&1)
  status=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "--- $mode: exit $status after ${ms} ms"
  echo "$output" | tail -n 8
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    echo "FAIL ($mode): the job should have ended non-zero (124 = hung until the timeout)"; exit 1
  fi
  if [ "$mode" != killed ] && ! echo "$output" | grep -q "rank 1 fails on purpose"; then
    echo "FAIL ($mode): the failing rank's message is missing"; exit 1
  fi
  if [ "$mode" = caught ] &&
     ! echo "$output" | grep -q "rank 1 has ended while rank 0 waits for it in all_reduce at step 3"
  then
    echo "FAIL ($mode): rank 0 did not say why it aborted (which rank, which step)"; exit 1
  fi
  # Killed: rank 1 could say nothing. Rank 0 names it and the step, either by seeing its process
  # gone or, when mpirun's SIGTERM comes first, on the way out.
  if [ "$mode" = killed ] && ! echo "$output" | grep -qE "rank 0 of 2: ended by SIGTERM .* at \
step 3, waiting in all_reduce; already gone from this machine: rank 1 \(pid|rank 1 \(pid \
[0-9]+, on this machine\) is gone without a word .* waits for it in all_reduce at step 3"
  then
    echo "FAIL ($mode): rank 0 did not say which step it was at and which rank is gone"; exit 1
  fi
  if [ "$ms" -gt 10000 ]; then
    echo "FAIL ($mode): took ${ms} ms (more than 10 s)"; exit 1
  fi
done
echo "ok"
