#!/bin/bash
# Every label of tests/exercises.cmake must select exactly the tests listed under it, so that a
# renamed test case cannot leave `ctest -L exercise-<name>` running less than the exercise needs.
#   check_exercise_labels.sh CTEST BUILD_DIR EXERCISES_CMAKE
set -euo pipefail
ctest=$1 build=$2 spec=$3
# "label count" for each set_tests_properties block: the [==[names]==] before its LABELS line.
awk '/\[==\[/ { n++ } /LABELS/ { print $NF, n; n = 0 }' "$spec" | tr -d ')' |
  while read -r label expected; do
    found=$("$ctest" --test-dir "$build" -N -L "^${label}\$" | sed -n 's/^Total Tests: //p')
    if [ "$found" != "$expected" ]; then
      echo "label $label selects $found tests, tests/exercises.cmake lists $expected" >&2
      exit 1
    fi
    echo "$label: $found tests"
  done
