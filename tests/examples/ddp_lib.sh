# Shared by the train_*_ddp.sh scripts: a trainer run by 2 processes, stopped, and resumed by 1
# process, compared with one process at the doubled batch. Sourced with the script's arguments
#   source ddp_lib.sh BIN_DIR WORK_DIR <mpirun command...>
# it sets $bin, $work (emptied) and the array launcher.
bin=$1
work=$2
shift 2
launcher=("$@")
rm -rf "$work"
mkdir -p "$work"

fail() { echo "FAIL: $*"; exit 1; }

# progress_losses LOG: "step loss" per progress line ("step     4/12 | loss 5.1234 | ...").
progress_losses() { grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.]+' "$1" | awk '{split($2, s, "/"); print s[1], $5}'; }

# csv_values CSV: "row:column value" per cell but the step column (row numbers, so the final row
# of a log that repeats the last step keeps its own key).
csv_values() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; next }
                        { for (i = 2; i <= NF; i++) print NR ":" h[i], $i }' "$1"; }

# close GOT WANT TOL: files of "key value" lines with the same keys, every value within TOL
# (absolute; "nan" only equals "nan"). Prints both side by side on failure.
close() {
  local got want  # read once: the arguments may be pipes
  got=$(sort "$1")
  want=$(sort "$2")
  join <(echo "$got") <(echo "$want") | awk -v want="$(echo "$want" | wc -l)" -v tol="$3" '
    { if ($2 == "nan" || $3 == "nan") { bad_row = $2 != $3 } else { d = $2 - $3; if (d < 0) d = -d; bad_row = d > tol }
      if (bad_row) { print "FAIL: " $0; bad = 1 } n++ }
    END { if (n != want || n == 0) { print "FAIL: " n " of " want " keys matched"; bad = 1 }
          exit bad }' || { paste <(echo "$got") <(echo "$want") | head -40; return 1; }
}

# printed_once LOG PATTERN: the 2-process log holds PATTERN once (ranks > 0 print nothing).
printed_once() {
  [ "$(grep -c -- "$2" "$1")" -eq 1 ] || { cat "$1"; fail "more than rank 0 printed '$2'"; }
}

# The Fashion-MNIST trainers skip (successfully) when the data set is not installed.
skip_without_fashion_mnist() {
  if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "SKIP: dataset-fashion-mnist is not installed"; exit 0
  fi
}
