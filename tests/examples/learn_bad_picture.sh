#!/usr/bin/env bash
# A learn program whose picture cannot be written (its path is a folder) ends with the error's
# message on stderr and status 1, as the trainers do, instead of std::terminate's abort (134).
#   learn_bad_picture.sh LEARN_PROGRAM WORK_DIR
set -uo pipefail
program=$1 work=$2/bad_picture
rm -rf "$work" && mkdir -p "$work/picture.png"
status=0
"$program" "$work/picture.png" >"$work/out.txt" 2>"$work/err.txt" || status=$?
if [ "$status" -ne 1 ] || ! grep -q "^error: .*picture.png" "$work/err.txt"; then
  echo "FAIL: $(basename "$program") with a folder as its picture: status $status, stderr:"
  cat "$work/err.txt"
  exit 1
fi
echo "ok: status 1, $(cat "$work/err.txt")"
