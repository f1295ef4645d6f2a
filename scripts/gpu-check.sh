#!/usr/bin/env bash
# One command for a GPU machine: the CUDA kernel tests, the GPU executor tests, the same tests under
# compute-sanitizer (memcheck, racecheck, synccheck), the GPU benchmarks, the PyTorch reference, an
# NVTX check under Nsight Compute, the pipelined-vs-reference equivalence of every schedule,
# the GPU columns of GPipe's tables and the 1F1B scaling figure and a first GPU sweep, each
# recorded with provenance.
# Made for machines lent minutes at a time: the check runs in pieces (--only), every step has a
# time limit and the call a deadline, and each piece's record is packed the moment the piece ends
# (--out), so a lease that runs out loses at most the piece in progress.
#
# Usage: scripts/gpu-check.sh [--bundle DIR | --build-dir DIR] [--only PARTS] [--out DIR] [--results DIR]
#                             [--piece-timeout SECONDS] [--deadline SECONDS] [--gtest-shard K/N]
#                             [--gtest-filter PATTERN]
#                             [--bench REGEX]
#                             [--bench-filter REGEX] [--equiv-filter REGEX] [--nvtx-filter EXPR]
#                             [--sweep-spec FILE] [--sweep-only KEY=V1,V2]...
#                             [--no-sanitizer] [--no-torch]
#   --bundle DIR           run the prebuilt binaries of DIR (`make gpu-bundle` on any machine with
#                          nvcc) through DIR/run: nothing is configured or built here. The copy of
#                          this script inside a bundle (DIR/gpu-check.sh) uses its own bundle.
#   --build-dir DIR        without --bundle: configure (sm_90) and build into DIR (default
#                          build-gpu) first, as on a GPU workstation; where CMake cannot find CLI11,
#                          nlohmann-json, Eigen, GoogleTest or Google Benchmark, the Debian packages
#                          in .device-deps/ are used (scripts/device-deps.sh fetches them elsewhere)
#   --only PARTS           comma list of parts, run in that order (default: all, in this order):
#                            kernel-tests         cuda_kernel_tests
#                            exec-tests           cuda_exec_tests (virtual devices on one GPU)
#                            sanitizer-memcheck   compute-sanitizer --tool memcheck (--leak-check
#                                                 full) over cuda_kernel_tests and cuda_exec_tests
#                            sanitizer-racecheck  the same with --tool racecheck
#                            sanitizer-synccheck  the same with --tool synccheck
#                            sanitizer            the three sanitizer parts
#                            benchmarks           every (cuda|gpu)_*bench* program (--bench)
#                            torch                scripts/torch_reference.py (PyTorch with CUDA),
#                                                 compared with cuda_layer_bench when the
#                                                 benchmarks part ran earlier in the same call
#                            nvtx                 ncu --nvtx on a one-step ppbench run: passes when
#                                                 ncu profiled a kernel inside a range of the NVTX
#                                                 domain "ppbench" (and none with a filter naming no
#                                                 such domain)
#                            equivalence          ppbench run --check for every schedule, D = 2, 4, 8,
#                                                 MLP and tiny-llama, f32 and bf16, without and
#                                                 with the optimizer step (JSON Lines and
#                                                 a table; scripts/gpu_equivalence.py)
#                            tables               GPipe at K = 2, 4, 8 x M = 1, 4, 32 and 1F1B at
#                                                 D = 1, 2, 4, 8 on virtual devices of a fixed
#                                                 size (--sms-per-device 16), the shapes of
#                                                 scripts/gpipe_tables.py (scripts/gpu_tables.py)
#                            sweep                a first GPU sweep: scripts/sweep.py over
#                                                 benchmarks/sweeps/cuda.json, by default only
#                                                 N = 1, 4, 32 (--sweep-only), into sweep/cuda.jsonl
#                                                 (`make report-gpu` reads it back home)
#   --results DIR          where the unpacked records go (default results/gpu beside the scripts:
#                          the repository's, or the bundle's parent folder's for DIR/gpu-check.sh)
#   --out DIR              after each piece, pack its record into
#                          DIR/<part>[-shard<K>of<N>]-<gpu>-<date>.tar.gz (written to a temporary
#                          name, then renamed); the tarball unpacks to <gpu>-<date>/<part>/ as
#                          under results/gpu/
#   --piece-timeout SECS   time limit of each step (default 420), enforced with
#                          `timeout --kill-after=10`; a step stopped at it is recorded as timed_out,
#                          its partial logs are kept and packed, and the next pieces still run.
#                          Configuring and building (without --bundle) have no limit. The
#                          equivalence, tables and sweep parts, one step of many ppbench runs
#                          each, give the limit to each run instead (equivalence at most 180 s,
#                          tables 120 s) and end at --deadline.
#   --deadline SECS        the whole call's time, from its start: each step gets at most what is
#                          left of it less 20 s (to pack the piece), a step with under 5 s left is
#                          not started (recorded as not_run, its piece timed_out), and a piece with
#                          none left is not begun (listed as not_run in the run's summary). For a
#                          machine whose call is killed at a limit (e.g. --deadline 570 under a
#                          600 s limit): every piece that starts is packed before the kill.
#   --gtest-shard K/N      run shard K (0 <= K < N) of N of each GoogleTest program in the test and
#                          sanitizer parts (GTEST_SHARD_INDEX=K, GTEST_TOTAL_SHARDS=N), to split a
#                          long sanitizer run across calls
#   --gtest-filter PATTERN run only the tests of the test and sanitizer parts that match
#                          (GTEST_FILTER=PATTERN, GoogleTest's syntax, e.g. 'Dtypes/Amoeba*' or
#                          '-*D8*'); recorded as "gtest_filter" in each piece's summary, so a
#                          filtered run never reads as the whole suite
#   --sanitize-programs LIST  the test programs the sanitizer parts run, comma-separated:
#                          cuda_kernel_tests, cuda_exec_tests (default both, in that order); one
#                          alone lets racecheck and synccheck both finish in one call
#   --bench REGEX          which benchmark programs (default: every (cuda|gpu)_*bench* program)
#   --bench-filter REGEX   passed to each benchmark program as --benchmark_filter
#   --equiv-filter REGEX   only the equivalence cases whose VARIANT/SCHEDULE/D<d> label matches,
#                          e.g. 'mlp-f32/' or '/D8$' (to split that part across calls)
#   --nvtx-filter EXPR     the ncu --nvtx-include expression to use (default: try
#                          'regex:ppbench@.*/', 'ppbench@*/' and 'ppbench@*' in turn)
#   --sweep-spec FILE      the sweep part's spec (default benchmarks/sweeps/cuda.json, the bundle's
#                          copy with --bundle)
#   --sweep-only KEY=V1,V2 the sweep part's subset, as sweep.py's --only (again for another key;
#                          default microbatches=1,4,32); 'all' runs the whole spec
#   --no-sanitizer, --no-torch   leave those parts out of the default set
# What fails: a step's non-zero exit; a failed test; a SKIPPED test (the GPU is visible, so a skip
# means the GPU code did not run), except a skip whose message says it "needs two GPUs"
# (listed as skipped_allowed); a benchmark that saw no GPU or reported an error (Google
# Benchmark's error_occurred); an equivalence case with passed=false; a sweep point that ended
# as an error row (a crash, a time-out; a point the schedule does not allow is "invalid", not a
# failure).
# A part whose tool is missing (compute-sanitizer, ncu, PyTorch with CUDA), or cannot work on
# this machine (compute-sanitizer and ncu in a gVisor sandbox, whose kernel reports 4.4.0), is
# "unavailable": a failure when --only named it, a note otherwise.
# SIGTERM or SIGINT stops the step in progress, records it as timed_out and packs its piece
# before the script exits (143 or 130).
# Records: results/gpu/<gpu>-<date>/<part>/ (each assembled in a temporary folder and renamed into
# place), each with its logs, GoogleTest JSON and a summary.json: GPU, count, driver, nvcc, cuBLAS,
# commit (git, the bundle's manifest or PPBENCH_GIT_COMMIT), dirty, date, host, part, shard,
# status, failed and timed-out steps, test counts and durations; results/gpu/<gpu>-<date>/
# summary.json lists every piece at the end.
# Exit:  0 every piece passed; 1 a piece failed, timed out or was not run (--deadline); 2 bad
#        usage (an --out or --results folder that cannot be made included); 3 the machine: no
#        GPU visible (nothing built or written), the bundle's launcher finds no cuBLAS or too old
#        a glibc, its ppbench-cuda does not start, nvcc missing when building, a results folder
#        that cannot be written; 143 / 130 after SIGTERM / SIGINT (the piece in progress packed).
set -uo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -f "$SCRIPT_DIR/bundle.env" ] && [ -f "$SCRIPT_DIR/run" ]; then
  # The copy inside a bundle: helpers in scripts/, records beside the bundle.
  SELF_BUNDLE="$SCRIPT_DIR"
  HELPERS="$SCRIPT_DIR/scripts"
  ROOT="$(dirname "$SCRIPT_DIR")"
else
  SELF_BUNDLE=""
  HELPERS="$SCRIPT_DIR"
  ROOT="$(dirname "$SCRIPT_DIR")"
fi

ALL_PARTS="kernel-tests,exec-tests,sanitizer-memcheck,sanitizer-racecheck,sanitizer-synccheck,benchmarks,torch,nvtx,equivalence,tables,sweep"
KNOWN_PARTS="kernel-tests, exec-tests, sanitizer, sanitizer-memcheck, sanitizer-racecheck, sanitizer-synccheck, benchmarks, torch, nvtx, equivalence, tables, sweep"
BUILD=""
BUNDLE=""
ONLY=""
OUT=""
RESULTS=""
PIECE_TIMEOUT=420
DEADLINE=""
DEADLINE_MARGIN=20
SHARD=""
GTEST_FILTER_ARG=""
BENCH_RE='.*'
BENCH_FILTER=''
EQUIV_FILTER=''
NVTX_FILTERS=('regex:ppbench@.*/' 'ppbench@*/' 'ppbench@*')
SWEEP_SPEC=""
SWEEP_ONLY=()
NO_SANITIZER=0
NO_TORCH=0
SANITIZE_PROGRAMS=(cuda_kernel_tests cuda_exec_tests)

usage_error() { echo "gpu-check: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir|--bundle|--only|--out|--results|--piece-timeout|--deadline|--gtest-shard|--gtest-filter|--sanitize-programs|--bench|--bench-filter|--equiv-filter|--nvtx-filter|--sweep-spec|--sweep-only)
      [ $# -ge 2 ] || usage_error "$1 needs a value (see --help)"
      case "$1" in
        --build-dir) BUILD="$2" ;;
        --bundle) BUNDLE="$2" ;;
        --only) ONLY="$2" ;;
        --out) OUT="$2" ;;
        --results) RESULTS="$2" ;;
        --piece-timeout) PIECE_TIMEOUT="$2" ;;
        --deadline) DEADLINE="$2" ;;
        --gtest-shard) SHARD="$2" ;;
        --gtest-filter) GTEST_FILTER_ARG="$2" ;;
        --sanitize-programs)
          IFS=',' read -r -a SANITIZE_PROGRAMS <<<"$2"
          [ ${#SANITIZE_PROGRAMS[@]} -gt 0 ] || usage_error "--sanitize-programs: none named (allowed: cuda_kernel_tests, cuda_exec_tests)"
          for p in "${SANITIZE_PROGRAMS[@]}"; do
            case "$p" in
              cuda_kernel_tests|cuda_exec_tests) ;;
              *) usage_error "--sanitize-programs: unknown program '$p' (allowed: cuda_kernel_tests, cuda_exec_tests)" ;;
            esac
          done ;;
        --bench) BENCH_RE="$2" ;;
        --bench-filter) BENCH_FILTER="$2" ;;
        --equiv-filter) EQUIV_FILTER="$2" ;;
        --nvtx-filter) NVTX_FILTERS=("$2") ;;
        --sweep-spec) SWEEP_SPEC="$2" ;;
        --sweep-only) SWEEP_ONLY+=("$2") ;;
      esac
      shift 2 ;;
    --no-sanitizer) NO_SANITIZER=1; shift ;;
    --no-torch) NO_TORCH=1; shift ;;
    -h|--help) sed -n '2,/^set -uo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown argument '$1' (see --help)" ;;
  esac
done

# The parts, aliases expanded, each once, in the order given.
PARTS=()
add_part() { local p; for p in "${PARTS[@]}"; do [ "$p" = "$1" ] && return; done; PARTS+=("$1"); }
EXPLICIT=0
[ -n "$ONLY" ] && EXPLICIT=1
IFS=',' read -r -a REQUESTED <<<"${ONLY:-$ALL_PARTS}"
[ ${#REQUESTED[@]} -gt 0 ] || usage_error "--only: no part named (allowed: $KNOWN_PARTS)"
for part in "${REQUESTED[@]}"; do
  case "$part" in
    kernel-tests|exec-tests|sanitizer-memcheck|sanitizer-racecheck|sanitizer-synccheck|benchmarks|torch|nvtx|equivalence|tables|sweep)
      add_part "$part" ;;
    sanitizer) add_part sanitizer-memcheck; add_part sanitizer-racecheck; add_part sanitizer-synccheck ;;
    *) usage_error "--only: unknown part '$part' (allowed: $KNOWN_PARTS)" ;;
  esac
done
if [ "$EXPLICIT" = 0 ]; then
  kept=()
  for p in "${PARTS[@]}"; do
    [ "$NO_SANITIZER" = 1 ] && [[ "$p" == sanitizer-* ]] && continue
    [ "$NO_TORCH" = 1 ] && [ "$p" = torch ] && continue
    kept+=("$p")
  done
  PARTS=("${kept[@]}")
else
  [ "$NO_SANITIZER" = 1 ] && for p in "${PARTS[@]}"; do
    [[ "$p" == sanitizer-* ]] && usage_error "--no-sanitizer with --only naming '$p'"; done
  [ "$NO_TORCH" = 1 ] && for p in "${PARTS[@]}"; do
    [ "$p" = torch ] && usage_error "--no-torch with --only naming 'torch'"; done
fi
[ ${#PARTS[@]} -gt 0 ] || usage_error "no part left to run"

[[ "$PIECE_TIMEOUT" =~ ^[0-9]+$ ]] && [ "$PIECE_TIMEOUT" -gt 0 ] \
  || usage_error "--piece-timeout: '$PIECE_TIMEOUT' is not a positive whole number of seconds"
if [ -n "$DEADLINE" ]; then
  [[ "$DEADLINE" =~ ^[0-9]+$ ]] && [ "$DEADLINE" -gt $((DEADLINE_MARGIN + 5)) ] \
    || usage_error "--deadline: '$DEADLINE' is not a whole number of seconds above $((DEADLINE_MARGIN + 5))"
fi
START_S="$(date +%s)"
SHARD_K=""; SHARD_N=""; SHARD_TAG=""
if [ -n "$SHARD" ]; then
  if [[ "$SHARD" =~ ^([0-9]+)/([0-9]+)$ ]] && [ "${BASH_REMATCH[2]}" -ge 1 ] \
     && [ "${BASH_REMATCH[1]}" -lt "${BASH_REMATCH[2]}" ]; then
    SHARD_K="${BASH_REMATCH[1]}"; SHARD_N="${BASH_REMATCH[2]}"; SHARD_TAG="-shard${SHARD_K}of${SHARD_N}"
  else
    usage_error "--gtest-shard: '$SHARD' is not K/N with 0 <= K < N (e.g. 0/4)"
  fi
fi
grep -E -- "$BENCH_RE" </dev/null >/dev/null 2>&1; [ $? -ne 2 ] \
  || usage_error "--bench: '$BENCH_RE' is not a valid regular expression"
if [ -n "$EQUIV_FILTER" ]; then
  python3 -c 'import re, sys; re.compile(sys.argv[1])' "$EQUIV_FILTER" 2>/dev/null \
    || usage_error "--equiv-filter: '$EQUIV_FILTER' is not a valid regular expression"
fi
# --sweep-only is sweep.py's --only, checked here by sweep.py's own parser (before any GPU work).
for o in "${SWEEP_ONLY[@]}"; do
  [ "$o" = all ] && continue
  why="$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import sweep_spec
try:
    sweep_spec.parse_only([sys.argv[2]])
except sweep_spec.SpecError as e:
    sys.exit(str(e))' "$HELPERS" "$o" 2>&1)" || usage_error "--sweep-only: ${why#--only }"
done
[ ${#SWEEP_ONLY[@]} -gt 0 ] || SWEEP_ONLY=("microbatches=1,4,32")
[ -z "$SWEEP_SPEC" ] || [ -f "$SWEEP_SPEC" ] || usage_error "--sweep-spec: '$SWEEP_SPEC' is not a file"
[ -z "$SWEEP_SPEC" ] || SWEEP_SPEC="$(cd "$(dirname "$SWEEP_SPEC")" && pwd)/$(basename "$SWEEP_SPEC")"
[ -n "$BUNDLE" ] && [ -n "$BUILD" ] && usage_error "--bundle and --build-dir exclude each other"
[ -z "$BUNDLE" ] && [ -z "$BUILD" ] && [ -n "$SELF_BUNDLE" ] && BUNDLE="$SELF_BUNDLE"
if [ -n "$BUNDLE" ]; then
  [ -f "$BUNDLE/run" ] || usage_error "--bundle: '$BUNDLE' has no run launcher (build one with 'make gpu-bundle')"
  BUNDLE="$(cd "$BUNDLE" && pwd)"
fi
[ -n "$BUILD" ] || BUILD="$ROOT/build-gpu"
[ -z "$OUT" ] || [ ! -e "$OUT" ] || [ -d "$OUT" ] || usage_error "--out: '$OUT' is not a folder"
[ -z "$RESULTS" ] || [ ! -e "$RESULTS" ] || [ -d "$RESULTS" ] || usage_error "--results: '$RESULTS' is not a folder"

log() { echo "gpu-check: $*"; }
# make_folder DIR WHAT CODE: mkdir -p, or one line naming DIR and mkdir's reason, and exit CODE.
make_folder() {
  local why
  why="$(mkdir -p -- "$1" 2>&1)" && return 0
  echo "gpu-check: cannot create $2 '$1' (${why##*: })" >&2
  exit "$3"
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU visible (nvidia-smi missing or it lists no device); nothing to do" >&2
  exit 3
fi
GPU_COUNT="$(nvidia-smi -L | grep -c '^GPU')"
if [ "$GPU_COUNT" -lt 1 ]; then
  echo "gpu-check: no GPU visible (nvidia-smi lists no device); nothing to do" >&2
  exit 3
fi
export PATH="$PATH:/usr/local/cuda/bin"

# The environment: the bundle's libraries, or a compiler.
CUDA_LIBS=""
if [ -n "$BUNDLE" ]; then
  # A copy that lost its execute bits on the way still runs.
  chmod u+x "$BUNDLE/run" "$BUNDLE"/bin/* "$BUNDLE/gpu-check.sh" 2>/dev/null
  if ! CUDA_LIBS="$(PPBENCH_BUNDLE_QUIET=0 "$BUNDLE/run" --check 2>&1 >/dev/null)"; then
    echo "gpu-check: the bundle's launcher cannot run its programs: $CUDA_LIBS" >&2
    exit 3
  fi
  CUDA_LIBS="${CUDA_LIBS#gpu-bundle: }"
  # A program that cannot print its version here (a glibc older than the build machine's, a
  # library the loader cannot find) runs nothing else either: say so once, not in every piece.
  if ! PPBENCH_VERSION_TEXT="$(PPBENCH_BUNDLE_QUIET=1 "$BUNDLE/run" ppbench-cuda --version 2>&1)"; then
    echo "gpu-check: the bundle's ppbench-cuda does not start on this machine: $(echo "$PPBENCH_VERSION_TEXT" | head -3 | tr '\n' ' ')" >&2
    exit 3
  fi
  # shellcheck source=/dev/null
  BUNDLE_COMMIT=""; BUNDLE_DIRTY=""
  . "$BUNDLE/bundle.env"
else
  command -v nvcc >/dev/null 2>&1 || { echo "gpu-check: nvcc not found (needed to build; or use --bundle)" >&2; exit 3; }
fi

GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
SLUG="$(echo "$GPU_NAME" | tr ' ' '-' | tr -cd 'A-Za-z0-9._-')"
DATE="$(date -u +%Y-%m-%dT%H%M%SZ)"
# A folder the caller named that cannot be made is the caller's (2); the default one the
# machine's (3).
RESULTS_CODE=2
[ -n "$RESULTS" ] || { RESULTS="$ROOT/results/gpu"; RESULTS_CODE=3; }
make_folder "$RESULTS" "the results folder" "$RESULTS_CODE"
RESULTS="$(cd "$RESULTS" && pwd)"
RUN_NAME="$SLUG-$DATE"
RUN_DIR="$RESULTS/$RUN_NAME"
NVCC_VERSION="$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -1)"
DRIVER="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
HOST="$(hostname)"
KERNEL="$(uname -r)"
# gVisor's sandbox reports kernel 4.4.0: compute-sanitizer refuses the device there ("Device not
# supported") and ncu cannot read the profiler's counters, so those parts are unavailable.
GVISOR=0
[[ "$KERNEL" == 4.4.0* ]] && GVISOR=1
# The binaries' commit: the bundle's manifest; else git, or PPBENCH_GIT_COMMIT in a tree copied
# without .git (ppbench's records read it too).
if SCRIPTS_COMMIT="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null)"; then
  TREE_DIRTY="$(git -C "$ROOT" status --porcelain --untracked-files=no -- . ':!results' ':!plots' 2>/dev/null | grep -q . && echo true || echo false)"
else
  SCRIPTS_COMMIT="${PPBENCH_GIT_COMMIT:-unknown}"
  TREE_DIRTY=null
fi
if [ -n "$BUNDLE" ]; then
  COMMIT="${BUNDLE_COMMIT:-${PPBENCH_GIT_COMMIT:-unknown}}"
  DIRTY="${BUNDLE_DIRTY:-null}"
else
  COMMIT="$SCRIPTS_COMMIT"; DIRTY="$TREE_DIRTY"
fi

make_folder "$RUN_DIR" "this call's folder" 3
if [ -n "$OUT" ]; then
  make_folder "$OUT" "the --out folder" 2
  OUT="$(cd "$OUT" && pwd)"
fi
COMMON="$(mktemp -d "$RESULTS/.common-$RUN_NAME-XXXXXX")"
PDIR=""
WHEEL_SITE=""
cleanup() { rm -rf "$COMMON"; [ -n "$PDIR" ] && rm -rf "$PDIR"; [ -n "$WHEEL_SITE" ] && rm -rf "$WHEEL_SITE"; }
trap cleanup EXIT
# A signal (the lease's own limit, Ctrl-C) stops the step in progress, records it and packs its
# piece: steps run in the background and are waited for, so the trap runs at once, not when the
# step ends. `timeout` leads its own process group, which is killed whole.
STEP_PID=""; STEP_NAME=""; STEP_T0=0
on_signal() {  # on_signal EXIT_CODE SIGNAL_NAME
  trap '' INT TERM
  if [ -n "$STEP_PID" ]; then
    kill -TERM -- "-$STEP_PID" 2>/dev/null
    sleep 1
    kill -KILL -- "-$STEP_PID" 2>/dev/null
    wait "$STEP_PID" 2>/dev/null
    record_step "$STEP_NAME" timed_out "$1" "$(( $(now_ms) - STEP_T0 ))" "stopped by $2"
    log "$PIECE: $STEP_NAME: stopped by $2 (partial log kept: $STEP_NAME.log)"
    STEP_PID=""
  fi
  [ -n "$PIECE" ] && [ -n "$PDIR" ] && piece_end "$(piece_tag "$PIECE")"
  exit "$1"
}
trap 'on_signal 130 SIGINT' INT
trap 'on_signal 143 SIGTERM' TERM
log "GPU: $GPU_NAME ($GPU_COUNT visible); parts: ${PARTS[*]}; records in $RUN_DIR${OUT:+, tarballs in $OUT}"
[ -n "$BUNDLE" ] && log "bundle $BUNDLE (commit ${BUNDLE_COMMIT:-?}): $CUDA_LIBS"

# Provenance, copied into every piece.
nvidia-smi -q 2>&1 | head -n 80 >"$COMMON/nvidia-smi-q.txt"
nvidia-smi >"$COMMON/nvidia-smi.txt" 2>&1
[ -n "$BUNDLE" ] && cp "$BUNDLE/bundle.json" "$COMMON/bundle.json" 2>/dev/null

# ---------------------------------------------------------------------------------------------
# Pieces and steps.
now_ms() { date +%s%3N; }
PIECE=""; PIECE_T0=0; PIECE_NOTES=(); PIECE_STATUS_OVERRIDE=""
declare -A PIECE_RESULT=()
PIECE_ORDER=()

piece_begin() {  # piece_begin NAME
  PIECE="$1"
  PDIR="$(mktemp -d "$RESULTS/.tmp-$RUN_NAME-$PIECE-XXXXXX")"
  cp "$COMMON"/* "$PDIR"/ 2>/dev/null
  : >"$PDIR/.steps"
  PIECE_T0="$(now_ms)"
  PIECE_NOTES=()
  PIECE_STATUS_OVERRIDE=""
  log "== $PIECE"
}

note() { log "$PIECE: $*"; PIECE_NOTES+=("$*"); }

# Seconds of --deadline left for steps (its margin kept back for packing); empty without one.
time_left() {
  [ -n "$DEADLINE" ] && echo $(( DEADLINE - ($(date +%s) - START_S) - DEADLINE_MARGIN ))
}

# step NAME [--no-limit] COMMAND...: runs with the piece time limit, output in NAME.log.
LAST_STATUS=""
step() {
  local name="$1"; shift
  local limit="$PIECE_TIMEOUT" left
  if [ "${1:-}" = --no-limit ]; then limit=0; shift; fi
  left="$(time_left)"
  if [ -n "$left" ]; then
    if [ "$left" -lt 5 ]; then
      record_step "$name" not_run "" 0 "--deadline $DEADLINE left no time for it"
      log "$PIECE: $name: NOT RUN (--deadline $DEADLINE reached)"
      LAST_STATUS=not_run
      return 1
    fi
    { [ "$limit" -eq 0 ] || [ "$left" -lt "$limit" ]; } && limit="$left"
  fi
  log "$PIECE: $name ..."
  local t0 rc dt status
  t0="$(now_ms)"
  timeout --kill-after=10 "$limit" "$@" >"$PDIR/$name.log" 2>&1 </dev/null &
  STEP_PID=$!; STEP_NAME="$name"; STEP_T0="$t0"
  wait "$STEP_PID"
  rc=$?
  STEP_PID=""
  dt=$(( $(now_ms) - t0 ))
  if [ $rc -eq 0 ]; then
    status=passed
  elif [ "$limit" -gt 0 ] && { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ $dt -ge $(( limit * 1000 - 500 )) ]; then
    status=timed_out
  else
    status=failed
  fi
  record_step "$name" "$status" "$rc" "$dt"
  case "$status" in
    passed) log "$PIECE: $name: ok ($((dt / 1000)) s)" ;;
    timed_out) log "$PIECE: $name: TIMED OUT after ${limit} s (partial log kept: $name.log)"
               tail -n 5 "$PDIR/$name.log" | sed 's/^/    /' ;;
    *) log "$PIECE: $name: FAILED, exit $rc (see $name.log; last lines below)"
       tail -n 20 "$PDIR/$name.log" | sed 's/^/    /' ;;
  esac
  LAST_STATUS="$status"
  [ "$status" = passed ]
}

record_step() {  # record_step NAME STATUS RC MILLISECONDS [REASON]
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" >>"$PDIR/.steps"
}

# gtest_step NAME COMMAND...: a GoogleTest program (its --gtest_output is added), then its
# results read: failed tests and disallowed skips fail the piece.
gtest_step() {
  local name="$1"; shift
  local shard_env=(env)
  [ -n "$SHARD_N" ] && shard_env+=("GTEST_TOTAL_SHARDS=$SHARD_N" "GTEST_SHARD_INDEX=$SHARD_K")
  [ -n "$GTEST_FILTER_ARG" ] && shard_env+=("GTEST_FILTER=$GTEST_FILTER_ARG")
  step "$name" "${shard_env[@]}" "$@" --gtest_output="json:$PDIR/$name.json"
  local line rc
  line="$(python3 "$HELPERS/gtest_summary.py" --json "$PDIR/$name.json" --log "$PDIR/$name.log" \
          --out "$PDIR/$name.tests.json" 2>&1)"
  rc=$?
  log "$PIECE: $name: $line"
  if [ $rc -ne 0 ] && [ "$LAST_STATUS" = passed ]; then
    record_step "$name:results" failed 1 0 "$line"
  fi
}

prog() {  # prog NAME: sets CMD to the command that starts program NAME
  if [ -n "$BUNDLE" ]; then
    CMD=("$BUNDLE/run" "$1")
  else
    case "$1" in
      ppbench) CMD=("$BUILD/ppbench") ;;
      ppbench-cuda) CMD=("$BUILD/ppbench-cuda") ;;
      cuda_kernel_tests) CMD=("$BUILD/tests/cuda/cuda_kernel_tests") ;;
      cuda_exec_tests) CMD=("$BUILD/tests/cuda_exec/cuda_exec_tests") ;;
      *) CMD=("$(find "$BUILD" -type f -name "$1" -perm -u+x -not -path '*/CMakeFiles/*' 2>/dev/null | head -1)") ;;
    esac
  fi
}

unavailable() {  # the part's tool is missing
  note "$*"
  if [ "$EXPLICIT" = 1 ]; then PIECE_STATUS_OVERRIDE=unavailable-failed; else PIECE_STATUS_OVERRIDE=unavailable; fi
}

# Whether this piece runs GoogleTest programs, which alone take --gtest-filter and --gtest-shard:
# a benchmark's or a sweep's summary does not carry a filter it never used.
runs_gtest() {
  case "$PIECE" in kernel-tests|exec-tests|sanitizer-*) return 0 ;; *) return 1 ;; esac
}

piece_end() {
  local name="$PIECE$1" dest tarball status
  status="$(PIECE_NAME="$name" PIECE_PART="$PIECE" PIECE_DIR="$PDIR" PIECE_MS="$(( $(now_ms) - PIECE_T0 ))" \
  PIECE_NOTES_TEXT="$(printf '%s\n' "${PIECE_NOTES[@]}")" PIECE_OVERRIDE="$PIECE_STATUS_OVERRIDE" \
  SHARD_TEXT="$(runs_gtest && printf '%s' "${SHARD_N:+$SHARD_K/$SHARD_N}")" \
  GTEST_FILTER_TEXT="$(runs_gtest && printf '%s' "$GTEST_FILTER_ARG")" \
    python3 - <<'PYEOF'
import json, os, sys
from pathlib import Path
e = os.environ
d = Path(e["PIECE_DIR"])
steps = []
for line in (d / ".steps").read_text().splitlines():
    name, status, rc, ms, reason = (line.split("\t") + [""] * 5)[:5]
    s = {"name": name, "status": status, "rc": int(rc) if rc.lstrip("-").isdigit() else None,
         "seconds": round(int(ms) / 1000, 3) if ms.isdigit() else None}
    if reason:
        s["reason"] = reason
    steps.append(s)
tests = {}
for f in sorted(d.glob("*.tests.json")):
    try:
        tests[f.name[:-len(".tests.json")]] = json.loads(f.read_text())
    except ValueError:
        pass
totals = {k: sum(t.get(k, 0) for t in tests.values()) for k in ("tests", "passed", "failed", "skipped")}
for k in ("failed_tests", "skipped_disallowed", "skipped_allowed"):
    totals[k] = [dict(x, program=p) for p, t in tests.items() for x in t.get(k, [])]
failed = [s["name"] for s in steps if s["status"] == "failed"]
timed_out = [s["name"] for s in steps if s["status"] == "timed_out"]
not_run = [s["name"] for s in steps if s["status"] == "not_run"]
override = e.get("PIECE_OVERRIDE", "")
if timed_out or not_run:
    status = "timed_out"
elif failed or override == "unavailable-failed":
    status = "failed"
elif override == "unavailable":
    status = "unavailable"
elif not steps:
    status = "failed"
    failed = ["(no step ran)"]
else:
    status = "passed"
def val(k, default=None):
    v = e.get(k, "")
    return v if v else default
summary = {
    "part": e["PIECE_PART"], "piece": e["PIECE_NAME"], "shard": val("SHARD_TEXT"),
    "gtest_filter": val("GTEST_FILTER_TEXT"),
    "status": status, "failed": failed, "timed_out": timed_out, "not_run": not_run,
    "notes": [n for n in e.get("PIECE_NOTES_TEXT", "").splitlines() if n],
    "steps": steps, "duration_s": round(int(e["PIECE_MS"]) / 1000, 3),
    "tests": totals if tests else None,
    "piece_timeout_s": int(e["PIECE_TIMEOUT"]),
    "deadline_s": int(e["DEADLINE"]) if e.get("DEADLINE") else None,
    "gpu": e["GPU_NAME"], "gpu_count": int(e["GPU_COUNT"]), "driver": e["DRIVER"],
    "cuda_nvcc": val("NVCC_VERSION"), "cublas": val("CUBLAS"),
    "commit": e["COMMIT"], "dirty": {"true": True, "false": False}.get(e["DIRTY"]),
    "scripts_commit": e["SCRIPTS_COMMIT"],
    "date": e["DATE"], "host": e["HOST"], "kernel": val("KERNEL"),
    "mode": "bundle" if val("BUNDLE") else "build",
    "bundle": val("BUNDLE"), "cuda_libs": val("CUDA_LIBS"),
}
extra = d / "piece-extra.json"
if extra.is_file():
    summary.update(json.loads(extra.read_text()))
(d / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
print(status)
PYEOF
  )"
  [ -n "$status" ] || { log "$PIECE: could not write summary.json"; status=failed; }
  rm -f "$PDIR/.steps"
  dest="$RUN_DIR/$name"
  rm -rf "$dest"
  if mv "$PDIR" "$dest"; then PDIR=""; else log "cannot move the record into $dest"; dest="$PDIR"; fi
  if [ -n "$OUT" ]; then
    tarball="$OUT/$name-$RUN_NAME.tar.gz"
    if tar -czf "$OUT/.$name-$RUN_NAME.tar.gz.tmp" -C "$RESULTS" "$RUN_NAME/$name" \
       && mv "$OUT/.$name-$RUN_NAME.tar.gz.tmp" "$tarball"; then
      log "$name: packed $tarball"
    else
      log "$name: could not pack $tarball"; status=failed
    fi
  fi
  PIECE_RESULT["$name"]="$status"
  PIECE_ORDER+=("$name")
  log "== $name: $status"
  PIECE=""
}
export GPU_NAME GPU_COUNT DRIVER NVCC_VERSION COMMIT DIRTY SCRIPTS_COMMIT DATE HOST KERNEL BUNDLE CUDA_LIBS PIECE_TIMEOUT DEADLINE
CUBLAS=""; export CUBLAS

# ---------------------------------------------------------------------------------------------
# Build (without --bundle): configure and build everything the parts need, not time-limited.
# needs GLOB: a part matching GLOB is to run
# shellcheck disable=SC2053
needs() {
  local p
  for p in "${PARTS[@]}"; do [[ "$p" == $1 ]] && return 0; done
  return 1
}
if [ -z "$BUNDLE" ]; then
  piece_begin build
  PREFIX_ARGS=()
  if compgen -G "$ROOT/.device-deps/*.deb" >/dev/null; then
    if PREFIX="$("$ROOT/scripts/device-deps.sh" unpack "$BUILD/device-deps")"; then
      note "using the carried libraries under $PREFIX"
      PREFIX_ARGS=("-DCMAKE_PREFIX_PATH=$PREFIX")
      export LD_LIBRARY_PATH="$PREFIX/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
  fi
  step configure --no-limit cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPPBENCH_BUILD_BENCHMARKS=ON "${PREFIX_ARGS[@]}"
  TARGETS=(ppbench)
  { needs kernel-tests || needs 'sanitizer-*'; } && TARGETS+=(cuda_kernel_tests)
  { needs exec-tests || needs 'sanitizer-*'; } && TARGETS+=(cuda_exec_tests)
  if needs benchmarks; then
    while read -r t; do TARGETS+=("$t"); done < <(cmake --build "$BUILD" --target help 2>/dev/null \
      | grep -Eo '(cuda|gpu)_[A-Za-z0-9_]*bench[A-Za-z0-9_]*' | sort -u | grep -E "$BENCH_RE")
  fi
  step build --no-limit cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 4)" --target "${TARGETS[@]}"
  piece_end ""
fi

if [ -z "$BUNDLE" ]; then  # (a bundle's was read above)
  prog ppbench-cuda  # ppbench hands CUDA runs to it; its --version lists the GPUs and cuBLAS
  PPBENCH_VERSION_TEXT="$(PPBENCH_BUNDLE_QUIET=1 "${CMD[@]}" --version 2>&1 || true)"
fi
echo "$PPBENCH_VERSION_TEXT" >"$COMMON/ppbench-version.txt"
CUBLAS="$(echo "$PPBENCH_VERSION_TEXT" | sed -n 's/.*cuBLASLt \([0-9.]*\).*/\1/p' | head -1)"

# ---------------------------------------------------------------------------------------------
# The parts.
part_tests() {  # kernel-tests / exec-tests
  local program="$1"
  prog "$program"
  gtest_step "$program" "${CMD[@]}"
}

part_sanitizer() {  # sanitizer-<tool>
  local tool="$1" extra=() program
  if ! command -v compute-sanitizer >/dev/null 2>&1; then
    unavailable "compute-sanitizer not found: $tool not run"
    return
  fi
  if [ "$GVISOR" = 1 ]; then
    unavailable "gVisor sandbox (kernel $KERNEL): compute-sanitizer refuses the device there; $tool not run"
    return
  fi
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  for program in "${SANITIZE_PROGRAMS[@]}"; do
    prog "$program"
    # The tests' watchdogs (30 s a run) times 20: instrumented kernels run tens of times slower.
    gtest_step "$tool-$program" env PPBENCH_TEST_TIME_SCALE=20 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 --target-processes all "${extra[@]}" "${CMD[@]}"
  done
}

part_benchmarks() {
  local names=() t
  if [ -n "$BUNDLE" ]; then
    mapfile -t names < <("$BUNDLE/run" --list | grep -E '^(cuda|gpu)_[A-Za-z0-9_]*bench' | grep -E "$BENCH_RE")
  else
    mapfile -t names < <(cmake --build "$BUILD" --target help 2>/dev/null \
      | grep -Eo '(cuda|gpu)_[A-Za-z0-9_]*bench[A-Za-z0-9_]*' | sort -u | grep -E "$BENCH_RE")
  fi
  if [ ${#names[@]} -eq 0 ]; then
    note "no GPU benchmark program matched '$BENCH_RE': none run"
    record_step "benchmarks" failed "" 0 "no benchmark program matched"
    return
  fi
  local args=(--benchmark_format=json)
  [ -n "$BENCH_FILTER" ] && args+=("--benchmark_filter=$BENCH_FILTER")
  for t in "${names[@]}"; do
    prog "$t"
    if [ -z "${CMD[0]}" ]; then record_step "bench-$t" failed "" 0 "not built"; continue; fi
    # A benchmark keeps what lets a figure be taken apart at home (cuda_pipeline_bench's
    # BM_Scaling and BM_Fidelity: each run's record, trace and measured profile) in kept/,
    # packed with the rest; scripts/kept_runs.py reads it.
    mkdir -p "$PDIR/kept"
    step "bench-$t" env PPBENCH_BENCH_KEEP_DIR="$PDIR/kept" "${CMD[@]}" "${args[@]}" \
      --benchmark_out="$PDIR/$t.json"
    local rc=$?
    rmdir "$PDIR/kept" 2>/dev/null  # kept nothing
    if [ $rc -ne 0 ]; then
      # Stopped at its limit (or crashed): the --benchmark_out file is cut or missing, and the
      # log holds the rows that finished. They are kept as one whole JSON marked "cut".
      local kept
      kept="$(python3 "$HELPERS/benchmark_rows.py" --json "$PDIR/$t.json" \
              --log "$PDIR/bench-$t.log" --out "$PDIR/$t.json" 2>&1)"
      log "$PIECE: bench-$t: $kept"
      continue
    fi
    if grep -q "no CUDA device visible" "$PDIR/bench-$t.log"; then
      # It ran nothing and wrote no JSON: say that, not the missing file.
      log "$PIECE: bench-$t: saw no CUDA device although nvidia-smi lists one (see bench-$t.log)"
      record_step "bench-$t:gpu" failed 1 0 "the benchmark saw no CUDA device although nvidia-smi lists one"
      continue
    fi
    # A benchmark that throws (a CUDA or cuBLAS error, out of memory) is skipped with an error
    # and the program still exits 0: its JSON says so.
    local errors
    errors="$(python3 -c '
import json, sys
try:
    runs = json.load(open(sys.argv[1])).get("benchmarks", [])
except (OSError, ValueError) as e:
    sys.exit("its JSON output cannot be read: " + str(e))
bad = [r for r in runs if r.get("error_occurred")]
if bad:
    print(str(len(bad)) + " benchmark(s) reported an error, first " + str(bad[0].get("name"))
          + ": " + str(bad[0].get("error_message", "")))' "$PDIR/$t.json" 2>&1)"
    [ -n "$errors" ] && record_step "bench-$t:errors" failed 1 0 "$errors" \
      && log "$PIECE: bench-$t: $errors"
  done
}

part_torch() {
  local py="$ROOT/.venv/bin/python"
  [ -x "$py" ] || py=python3
  if ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    unavailable "PyTorch with CUDA not importable by $py: torch reference not run"
    return
  fi
  step torch-reference "$py" "$HELPERS/torch_reference.py" --parts --out "$PDIR/torch_reference.json"
  # ppbench's layer and its parts beside PyTorch's, when the benchmarks part ran in this call;
  # cuda_gemm_bench's square GEMMs, where it ran too, are a GEMM peak for MFU beside torch.mm's.
  local layer="$RUN_DIR/benchmarks/cuda_layer_bench.json"
  local gemm="$RUN_DIR/benchmarks/cuda_gemm_bench.json" gemm_args=()
  # Only a whole run: the rows kept from a program stopped at its limit ("cut") may lack the
  # large GEMMs, and their best would understate the peak.
  python3 -c 'import json, sys; sys.exit("cut" in json.load(open(sys.argv[1])))' "$gemm" \
    2>/dev/null && gemm_args=(--gemm "$gemm")
  if [ -s "$layer" ] && [ -s "$PDIR/torch_reference.json" ]; then
    step compare-torch python3 "$HELPERS/compare_torch.py" "$layer" "$PDIR/torch_reference.json" \
      "${gemm_args[@]}" --out "$PDIR/layer_vs_torch.json"
    sed 's/^/    /' "$PDIR/compare-torch.log"
  else
    note "no cuda_layer_bench.json from a benchmarks part in this call: no comparison with PyTorch"
  fi
}

NVTX_RUN=(run --backend cuda --virtual-devices 2 --workload mlp --layers 4 --width 256
          --schedule 1f1b --devices 2 --microbatches 4 --steps 1 --warmup 0 --dtype f32)
part_nvtx() {
  if ! command -v ncu >/dev/null 2>&1; then
    unavailable "ncu (Nsight Compute) not found: NVTX check not run"
    return
  fi
  if [ "$GVISOR" = 1 ]; then
    unavailable "gVisor sandbox (kernel $KERNEL): ncu cannot load its profiler there; NVTX check not run"
    return
  fi
  ncu --version >"$PDIR/ncu-version.txt" 2>&1
  prog ppbench
  local i=0 f used="" kernels=0 n control=""
  for f in "${NVTX_FILTERS[@]}"; do
    i=$((i + 1))
    step "ncu-$i" ncu --nvtx --nvtx-include "$f" --clock-control none --launch-count 1 \
      --metrics gpu__time_duration.sum --target-processes all "${CMD[@]}" "${NVTX_RUN[@]}"
    n="$(grep -c '==PROF== Profiling' "$PDIR/ncu-$i.log")"
    note "ncu --nvtx-include '$f': $n kernel(s) profiled"
    [ "$LAST_STATUS" = timed_out ] && break
    if [ "$LAST_STATUS" = passed ] && [ "$n" -ge 1 ]; then used="$f"; kernels="$n"; break; fi
  done
  if [ -n "$used" ]; then
    # The control: a filter naming no such domain must profile nothing, so the filter is real.
    step ncu-control ncu --nvtx --nvtx-include 'regex:no-such-domain@.*/' --clock-control none \
      --launch-count 1 --metrics gpu__time_duration.sum --target-processes all "${CMD[@]}" \
      "${NVTX_RUN[@]}"
    control="$(grep -c '==PROF== Profiling' "$PDIR/ncu-control.log")"
    if [ "$control" -ne 0 ]; then
      record_step "nvtx-control" failed 1 0 "a filter naming no domain profiled $control kernel(s): the NVTX filter is not in effect"
    fi
  else
    record_step "nvtx" failed 1 0 "no kernel was profiled inside a 'ppbench' NVTX range with any filter"
  fi
  NVTX_USED="$used" NVTX_KERNELS="$kernels" NVTX_CONTROL="$control" python3 -c '
import json, os, sys
e = os.environ
json.dump({"nvtx": {"domain": "ppbench", "filter": e["NVTX_USED"] or None,
                    "kernels_profiled": int(e["NVTX_KERNELS"] or 0),
                    "control_kernels_profiled": int(e["NVTX_CONTROL"]) if e["NVTX_CONTROL"] else None}},
          open(sys.argv[1], "w"))' "$PDIR/piece-extra.json"
}

part_equivalence() {
  prog ppbench
  local run_timeout=$(( PIECE_TIMEOUT < 180 ? PIECE_TIMEOUT : 180 ))
  step equivalence --no-limit env PPBENCH_BUNDLE_QUIET=1 python3 "$HELPERS/gpu_equivalence.py" --out-dir "$PDIR" \
    --filter "$EQUIV_FILTER" --run-timeout "$run_timeout" -- "${CMD[@]}"
  [ -f "$PDIR/equivalence.txt" ] && sed 's/^/    /' "$PDIR/equivalence.txt"
  if [ -f "$PDIR/equivalence.json" ]; then
    python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
json.dump({"equivalence": s}, open(sys.argv[2], "w"))' "$PDIR/equivalence.json" "$PDIR/piece-extra.json"
  fi
}

part_tables() {
  prog ppbench
  local run_timeout=$(( PIECE_TIMEOUT < 120 ? PIECE_TIMEOUT : 120 ))
  step tables --no-limit env PPBENCH_BUNDLE_QUIET=1 python3 "$HELPERS/gpu_tables.py" --out-dir "$PDIR" \
    --run-timeout "$run_timeout" -- "${CMD[@]}"
  [ -f "$PDIR/gpu_tables.txt" ] && sed 's/^/    /' "$PDIR/gpu_tables.txt"
}

# sweep_python: sets SWEEP_PY to a Python that imports jsonschema (sweep.py checks its spec with
# it): the project's .venv, python3, or python3 with the bundle's wheels unpacked beside it (GPU
# images often lack jsonschema; scripts/gpu-bundle.sh carries it and its needs, rpds-py for each
# CPython it may meet). Fails where none does.
SWEEP_PY=()
sweep_python() {
  local py
  for py in "$ROOT/.venv/bin/python" python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import jsonschema' 2>/dev/null; then
      SWEEP_PY=("$py"); return 0
    fi
  done
  [ -n "$BUNDLE" ] && compgen -G "$BUNDLE/wheels/*.whl" >/dev/null || return 1
  [ -n "$WHEEL_SITE" ] || WHEEL_SITE="$(mktemp -d)" || return 1
  # A wheel is a zip of what an install puts in site-packages: the pure ones and those built for
  # this CPython (its cpXY tag, or abi3) are unpacked; pip is not needed.
  python3 - "$BUNDLE/wheels" "$WHEEL_SITE" <<'PYEOF' || return 1
import sys, zipfile
from pathlib import Path
here = f"cp{sys.version_info.major}{sys.version_info.minor}"
for wheel in sorted(Path(sys.argv[1]).glob("*.whl")):
    python_tag, abi_tag = wheel.name[:-len(".whl")].split("-")[-3:-1]
    if python_tag.startswith("py3") or python_tag == here or abi_tag == "abi3":
        zipfile.ZipFile(wheel).extractall(sys.argv[2])
PYEOF
  PYTHONPATH="$WHEEL_SITE" python3 -c 'import jsonschema' 2>/dev/null || return 1
  SWEEP_PY=(env "PYTHONPATH=$WHEEL_SITE" python3)
}

part_sweep() {
  local spec="${SWEEP_SPEC:-$(dirname "$HELPERS")/benchmarks/sweeps/cuda.json}" ppbench envs=() only=() o
  if ! sweep_python; then
    unavailable "no Python here imports jsonschema, which scripts/sweep.py checks its spec with (a bundle carries it in wheels/): sweep not run"
    return
  fi
  if [ -n "$BUNDLE" ]; then
    # sweep.py runs one program: the bundle's ppbench with the launcher's environment (cuBLAS
    # found, the commit); ppbench hands each CUDA run to ppbench-cuda beside it.
    ppbench="$BUNDLE/bin/ppbench"
    mapfile -t envs < <(PPBENCH_BUNDLE_QUIET=1 "$BUNDLE/run" --env)
  else
    ppbench="$BUILD/ppbench"
  fi
  for o in "${SWEEP_ONLY[@]}"; do [ "$o" = all ] || only+=(--only "$o"); done
  note "spec $spec${only[*]:+, ${only[*]}}"
  # The records also live on in an ignored folder beside the records (results/gpu/.sweep): a
  # call that the deadline cut is resumed by the next call on the same machine (sweep.py skips
  # what this ppbench recorded here), and that call's piece holds both calls' points.
  local keep="$RESULTS/.sweep" f files=(cuda.jsonl cuda.csv cuda-run.csv)
  mkdir -p "$keep"
  for f in "${files[@]}"; do [ -f "$keep/$f" ] && cp "$keep/$f" "$PDIR/"; done
  # A point gets at most the piece's limit; one that hangs is an error row and the sweep goes on.
  step sweep --no-limit env "${envs[@]}" PYTHONUNBUFFERED=1 "${SWEEP_PY[@]}" "$HELPERS/sweep.py" "$spec" \
    --ppbench "$ppbench" --out "$PDIR/cuda" --timeout "$PIECE_TIMEOUT" --fail-on-error "${only[@]}" \
    && tail -n 1 "$PDIR/sweep.log" | sed 's/^/    /'
  for f in "${files[@]}"; do [ -f "$PDIR/$f" ] && cp "$PDIR/$f" "$keep/"; done
  [ -f "$PDIR/cuda.summary.json" ] && python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
keep = ("sweep", "points", "ok", "invalid", "error", "skipped", "interrupted")
json.dump({"sweep": {k: s.get(k) for k in keep}}, open(sys.argv[2], "w"))' \
    "$PDIR/cuda.summary.json" "$PDIR/piece-extra.json"
}

piece_tag() {  # the test parts' pieces are named by their shard
  case "$1" in kernel-tests|exec-tests|sanitizer-*) echo "$SHARD_TAG" ;; *) echo "" ;; esac
}

for part in "${PARTS[@]}"; do
  left="$(time_left)"
  if [ -n "$left" ] && [ "$left" -lt 5 ]; then
    name="$part$(piece_tag "$part")"
    log "== $name: NOT RUN (--deadline $DEADLINE reached)"
    PIECE_RESULT["$name"]=not_run
    PIECE_ORDER+=("$name")
    continue
  fi
  piece_begin "$part"
  case "$part" in
    kernel-tests) part_tests cuda_kernel_tests ;;
    exec-tests) part_tests cuda_exec_tests ;;
    sanitizer-memcheck) part_sanitizer memcheck ;;
    sanitizer-racecheck) part_sanitizer racecheck ;;
    sanitizer-synccheck) part_sanitizer synccheck ;;
    benchmarks) part_benchmarks ;;
    torch) part_torch ;;
    nvtx) part_nvtx ;;
    equivalence) part_equivalence ;;
    tables) part_tables ;;
    sweep) part_sweep ;;
  esac
  piece_end "$(piece_tag "$part")"
done

# The run's summary: every piece and its status.
FAILED=()
for name in "${PIECE_ORDER[@]}"; do
  case "${PIECE_RESULT[$name]}" in passed|unavailable) ;; *) FAILED+=("$name (${PIECE_RESULT[$name]})") ;; esac
done
PIECES_TEXT="$(for n in "${PIECE_ORDER[@]}"; do printf '%s\t%s\n' "$n" "${PIECE_RESULT[$n]}"; done)" \
FAILED_TEXT="$(printf '%s\n' "${FAILED[@]}")" python3 - "$RUN_DIR/summary.json" <<'PYEOF'
import json, os, sys, tempfile
e = os.environ
pieces = dict(line.split("\t", 1) for line in e["PIECES_TEXT"].splitlines() if "\t" in line)
failed = [f for f in e["FAILED_TEXT"].splitlines() if f]
s = {"gpu": e["GPU_NAME"], "gpu_count": int(e["GPU_COUNT"]), "driver": e["DRIVER"],
     "cuda_nvcc": e.get("NVCC_VERSION") or None, "cublas": e.get("CUBLAS") or None,
     "commit": e["COMMIT"], "dirty": {"true": True, "false": False}.get(e["DIRTY"]),
     "date": e["DATE"], "host": e["HOST"], "mode": "bundle" if e.get("BUNDLE") else "build",
     "pieces": pieces, "failed": failed, "status": "failed" if failed else "passed"}
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(sys.argv[1]), prefix=".summary.")
with os.fdopen(fd, "w") as f:
    json.dump(s, f, indent=2)
os.replace(tmp, sys.argv[1])
PYEOF

if [ ${#FAILED[@]} -gt 0 ]; then
  echo "gpu-check: FAILED pieces: ${FAILED[*]} (records: $RUN_DIR${OUT:+, tarballs in $OUT})" >&2
  exit 1
fi
log "all passed; records: $RUN_DIR${OUT:+, tarballs in $OUT}"
exit 0
