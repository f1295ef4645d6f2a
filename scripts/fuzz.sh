#!/usr/bin/env bash
# Searches ppbench's input parsers for inputs that break them (tests/fuzz/, docs/testing.md,
# "Fuzzing"): builds the libFuzzer programs with clang, AddressSanitizer and UBSan in
# build-fuzz/, then runs each for SECONDS from the committed corpus. New interesting inputs
# collect in build-fuzz/corpus/<target>/; an input that breaks a target is written to
# build-fuzz/crash-<target>-* and the script exits 1. Copy it into tests/fuzz/corpus/<target>/
# with the fix, so that `make test` replays it from then on.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default 60 s each, every target)
#
# Exit: 0 no input broke a target; 1 one did (or the build failed); 2 bad arguments; 3 no clang++.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
seconds=${1:-60}
shift || true
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] ||
  { echo "fuzz.sh: SECONDS '$seconds' is not a whole number of seconds >= 1" >&2; exit 2; }
all=(schedule_file schedule_edits device_profile flag_values workload_shapes)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] ||
    { echo "fuzz.sh: unknown target '$t' (known: ${all[*]})" >&2; exit 2; }
done
command -v clang++ >/dev/null ||
  { echo "fuzz.sh: clang++ not found (Debian: apt-get install clang); libFuzzer needs it" >&2; exit 3; }

dir=${FUZZ_DIR:-build-fuzz}
# A failed build is 1, not make's own 2, which would read as a bad argument.
CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPPBENCH_FUZZ=ON \
  -DPPBENCH_SANITIZE=address,undefined -DPPBENCH_CUDA=OFF -DPPBENCH_MPI=OFF \
  -DPPBENCH_BUILD_BENCHMARKS=OFF -DPPBENCH_NATIVE=OFF >/dev/null ||
  { echo "fuzz.sh: configuring $dir failed" >&2; exit 1; }
cmake --build "$dir" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" ||
  { echo "fuzz.sh: building the fuzz targets failed" >&2; exit 1; }

status=0
for t in "${targets[@]}"; do
  mkdir -p "$dir/corpus/$t"
  echo "== fuzz_$t for ${seconds} s"
  # -rss_limit_mb: a parser must bound what it allocates long before this.
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  if ! "$dir/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$dir/crash-$t-" "${dict[@]}" \
      "$dir/corpus/$t" "tests/fuzz/corpus/$t" 2>"$dir/fuzz_$t.log"; then
    status=1
    echo "fuzz_$t: FOUND an input that breaks it; see $dir/fuzz_$t.log and $dir/crash-$t-*"
    grep -E "fuzz check failed|ERROR: |SUMMARY" "$dir/fuzz_$t.log" | head -5 || true
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$dir/fuzz_$t.log" |
    sed "s/^/fuzz_$t: /" || true
done
exit $status
