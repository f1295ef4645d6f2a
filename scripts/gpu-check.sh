#!/usr/bin/env bash
# One command for a GPU machine: configure (sm_90), build, run the CUDA kernel tests (then again
# under compute-sanitizer memcheck when it is installed), the GPU executor tests, the GPU
# benchmarks and the PyTorch reference when torch is importable, and record everything with
# provenance in results/gpu/<gpu-name>-<date>/.
#
# The folder is assembled in a temporary sibling and renamed into place at the end, so a reader
# never sees half a record. A failed step is recorded in summary.json and makes the exit status
# non-zero; the remaining steps still run, so one run shows every problem.
#
# Usage: scripts/gpu-check.sh [--build-dir DIR] [--only PARTS] [--bench REGEX]
#                             [--bench-filter REGEX] [--no-sanitizer] [--no-torch]
#   --only PARTS         comma list of kernel-tests, exec-tests, sanitizer, benchmarks, torch
#                        (default: all), so that a machine lent for minutes at a time can run the
#                        check in pieces; every piece writes its own record folder
#   --bench REGEX        which benchmark programs (default: every (cuda|gpu)_*bench* target)
#   --bench-filter REGEX passed to each benchmark program as --benchmark_filter
# Libraries: where CMake cannot find CLI11, nlohmann-json, Eigen, GoogleTest or Google Benchmark
# (a machine that can install nothing), the Debian packages in .device-deps/ are used when
# present (scripts/device-deps.sh fetches them elsewhere; carry the folder along).
# Exit:  0 all passed; 1 a step failed; 2 bad usage or no GPU visible (nothing built or written).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-gpu"
SANITIZE=1
TORCH=1
ONLY="kernel-tests,exec-tests,sanitizer,benchmarks,torch"
BENCH_RE='.*'
BENCH_FILTER=''
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir|--only|--bench|--bench-filter)
      [ $# -ge 2 ] || { echo "gpu-check: $1 needs a value (see --help)" >&2; exit 2; }
      case "$1" in
        --build-dir) BUILD="$2" ;;
        --only) ONLY="$2" ;;
        --bench) BENCH_RE="$2" ;;
        --bench-filter) BENCH_FILTER="$2" ;;
      esac
      shift 2 ;;
    --no-sanitizer) SANITIZE=0; shift ;;
    --no-torch) TORCH=0; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for part in ${ONLY//,/ }; do
  case "$part" in
    kernel-tests|exec-tests|sanitizer|benchmarks|torch) ;;
    *) echo "gpu-check: --only: unknown part '$part' (allowed: kernel-tests, exec-tests, sanitizer, benchmarks, torch)" >&2; exit 2 ;;
  esac
done
wants() { [[ ",$ONLY," == *",$1,"* ]]; }
wants sanitizer || SANITIZE=0
wants torch || TORCH=0

log() { echo "gpu-check: $*"; }
die() { echo "gpu-check: error: $*" >&2; exit 1; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU visible (nvidia-smi missing or it lists no device); nothing to do" >&2
  exit 2
fi
GPU_COUNT="$(nvidia-smi -L | grep -c '^GPU')"
if [ "$GPU_COUNT" -lt 1 ]; then
  echo "gpu-check: no GPU visible (nvidia-smi lists no device); nothing to do" >&2
  exit 2
fi
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || die "nvcc not found"
export PATH="$PATH:/usr/local/cuda/bin"

GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
SLUG="$(echo "$GPU_NAME" | tr ' ' '-' | tr -cd 'A-Za-z0-9._-')"
DATE="$(date -u +%Y-%m-%dT%H%M%SZ)"
FINAL="$ROOT/results/gpu/$SLUG-$DATE"
STAGE="$ROOT/results/gpu/.tmp-$SLUG-$DATE-$$"
mkdir -p "$STAGE" || die "cannot create $STAGE"
trap 'rm -rf "$STAGE"' EXIT
log "GPU: $GPU_NAME ($GPU_COUNT visible); recording into $FINAL"

FAILED=()
step() {  # step NAME COMMAND...: runs, logs to NAME.log, records failure
  local name="$1"; shift
  log "$name ..."
  if "$@" >"$STAGE/$name.log" 2>&1; then
    log "$name: ok"
  else
    log "$name: FAILED (see $name.log; last lines below)"
    tail -n 20 "$STAGE/$name.log" | sed 's/^/    /'
    FAILED+=("$name")
  fi
}

# Provenance first: it is worth having even when the build fails.
nvidia-smi -q | head -n 80 >"$STAGE/nvidia-smi-q.txt" 2>&1
nvidia-smi >"$STAGE/nvidia-smi.txt" 2>&1
NVCC_VERSION="$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -1)"
DRIVER="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
# A tree copied without .git names its commit in PPBENCH_GIT_COMMIT (ppbench's records read it too).
if COMMIT="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null)"; then
  DIRTY="$(git -C "$ROOT" status --porcelain -- . ':!results' ':!plots' 2>/dev/null | grep -q . && echo true || echo false)"
else
  COMMIT="${PPBENCH_GIT_COMMIT:-unknown}"
  DIRTY=null
fi

# The libraries carried in .device-deps/ (scripts/device-deps.sh), when there are any.
PREFIX_ARGS=()
if compgen -G "$ROOT/.device-deps/*.deb" >/dev/null; then
  if PREFIX="$("$ROOT/scripts/device-deps.sh" unpack "$BUILD/device-deps")"; then
    log "using the carried libraries under $PREFIX"
    PREFIX_ARGS=("-DCMAKE_PREFIX_PATH=$PREFIX")
    export LD_LIBRARY_PATH="$PREFIX/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
step configure cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPPBENCH_BUILD_BENCHMARKS=ON "${PREFIX_ARGS[@]}"
JOBS="$(nproc 2>/dev/null || echo 4)"
TARGETS=(ppbench)
{ wants kernel-tests || [ "$SANITIZE" = 1 ]; } && TARGETS+=(cuda_kernel_tests)
wants exec-tests && TARGETS+=(gpu_exec_tests)
step build cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"

PPBENCH_VERSION_TEXT="$("$BUILD/ppbench" --version 2>&1 || true)"
echo "$PPBENCH_VERSION_TEXT" >"$STAGE/ppbench-version.txt"
CUBLAS="$(echo "$PPBENCH_VERSION_TEXT" | sed -n 's/.*cuBLASLt \([0-9.]*\).*/\1/p' | head -1)"

TESTS="$BUILD/tests/cuda/cuda_kernel_tests"
wants kernel-tests && step tests "$TESTS" --gtest_output="json:$STAGE/tests.json"
# The executor's equivalence, transport and CUDA-graph tests (virtual devices on one GPU; the
# two-GPU cases skip with the reason where there is one GPU).
wants exec-tests && step exec-tests "$BUILD/tests/gpu_exec/gpu_exec_tests" \
  --gtest_output="json:$STAGE/exec-tests.json"
if [ "$SANITIZE" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  step sanitizer compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check full "$TESTS"
elif [ "$SANITIZE" = 1 ]; then
  log "compute-sanitizer not found: memcheck skipped (recorded in summary.json)"
fi

# GPU benchmarks: any built benchmark program whose name says cuda or gpu.
BENCHES=()
BENCH_ARGS=(--benchmark_format=json)
[ -n "$BENCH_FILTER" ] && BENCH_ARGS+=("--benchmark_filter=$BENCH_FILTER")
if wants benchmarks && cmake --build "$BUILD" --target help 2>/dev/null \
    | grep -Eo '(cuda|gpu)_[A-Za-z0-9_]*bench[A-Za-z0-9_]*' | sort -u | grep -E "$BENCH_RE" \
    >"$STAGE/.bench-targets"; then
  while read -r t; do
    step "build-$t" cmake --build "$BUILD" -j "$JOBS" --target "$t"
    exe="$(find "$BUILD" -type f -name "$t" -perm -u+x | head -1)"
    if [ -n "$exe" ]; then
      BENCHES+=("$t")
      step "bench-$t" "$exe" "${BENCH_ARGS[@]}" --benchmark_out="$STAGE/$t.json"
    fi
  done <"$STAGE/.bench-targets"
fi
rm -f "$STAGE/.bench-targets"
wants benchmarks && [ ${#BENCHES[@]} -eq 0 ] && log "no GPU benchmark program matched: none run"

if [ "$TORCH" = 1 ]; then
  PY="$ROOT/.venv/bin/python"; [ -x "$PY" ] || PY=python3
  if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    step torch-reference "$PY" "$ROOT/scripts/torch_reference.py" --parts \
      --out "$STAGE/torch_reference.json"
  else
    log "PyTorch with CUDA not importable by $PY: torch reference skipped"
  fi
fi
# ppbench's layer and its parts beside PyTorch's, when both ran: layer_vs_torch.json, and the
# table in compare-torch.log (shown here too).
if [ -s "$STAGE/cuda_layer_bench.json" ] && [ -s "$STAGE/torch_reference.json" ]; then
  step compare-torch python3 "$ROOT/scripts/compare_torch.py" "$STAGE/cuda_layer_bench.json" \
    "$STAGE/torch_reference.json" --out "$STAGE/layer_vs_torch.json"
  sed 's/^/    /' "$STAGE/compare-torch.log"
fi

python3 - "$STAGE/summary.json" <<PYEOF
import json, sys
failed = [s for s in "${FAILED[*]:-}".split() if s]
json.dump({
    "gpu": "$GPU_NAME", "gpu_count": $GPU_COUNT, "driver": "$DRIVER", "cuda_nvcc": "$NVCC_VERSION",
    "cublas": "$CUBLAS", "commit": "$COMMIT", "dirty": $DIRTY, "date": "$DATE",
    "host": "$(hostname)", "sanitizer": bool($SANITIZE) and bool("$(command -v compute-sanitizer || true)"),
    "parts": "$ONLY".split(","), "bench_filter": "$BENCH_FILTER",
    "benchmarks": "${BENCHES[*]:-}".split(), "failed": failed,
    "status": "failed" if failed else "passed",
}, open(sys.argv[1], "w"), indent=2)
PYEOF

mkdir -p "$ROOT/results/gpu"
mv "$STAGE" "$FINAL" || die "cannot move the record into $FINAL"
trap - EXIT
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "gpu-check: FAILED steps: ${FAILED[*]} (record: $FINAL)" >&2
  exit 1
fi
log "all passed; record: $FINAL"
