#!/usr/bin/env bash
# One command for a GPU machine: configure (sm_90), build, run the CUDA kernel tests (then again
# under compute-sanitizer memcheck when it is installed), run the GPU benchmarks that exist and
# the PyTorch reference when torch is importable, and record everything with provenance in
# results/gpu/<gpu-name>-<date>/.
#
# The folder is assembled in a temporary sibling and renamed into place at the end, so a reader
# never sees half a record. A failed step is recorded in summary.json and makes the exit status
# non-zero; the remaining steps still run, so one run shows every problem.
#
# Usage: scripts/gpu-check.sh [--build-dir DIR] [--no-sanitizer] [--no-torch]
# Exit:  0 all passed; 1 a step failed; 2 no GPU visible (nothing is built or written).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-gpu"
SANITIZE=1
TORCH=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --no-sanitizer) SANITIZE=0; shift ;;
    --no-torch) TORCH=0; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

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
COMMIT="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
DIRTY="$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -q . && echo true || echo false)"

step configure cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPPBENCH_BUILD_BENCHMARKS=ON
JOBS="$(nproc 2>/dev/null || echo 4)"
step build cmake --build "$BUILD" -j "$JOBS" --target cuda_kernel_tests ppbench

PPBENCH_VERSION_TEXT="$("$BUILD/ppbench" --version 2>&1 || true)"
echo "$PPBENCH_VERSION_TEXT" >"$STAGE/ppbench-version.txt"
CUBLAS="$(echo "$PPBENCH_VERSION_TEXT" | sed -n 's/.*cuBLASLt \([0-9.]*\).*/\1/p' | head -1)"

TESTS="$BUILD/tests/cuda/cuda_kernel_tests"
step tests "$TESTS" --gtest_output="json:$STAGE/tests.json"
if [ "$SANITIZE" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  step sanitizer compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check full "$TESTS"
elif [ "$SANITIZE" = 1 ]; then
  log "compute-sanitizer not found: memcheck skipped (recorded in summary.json)"
fi

# GPU benchmarks: any built benchmark program whose name says cuda or gpu.
BENCHES=()
if cmake --build "$BUILD" --target help 2>/dev/null | grep -Eo '(cuda|gpu)_[A-Za-z0-9_]*bench[A-Za-z0-9_]*' \
    | sort -u >"$STAGE/.bench-targets"; then
  while read -r t; do
    step "build-$t" cmake --build "$BUILD" -j "$JOBS" --target "$t"
    exe="$(find "$BUILD" -type f -name "$t" -perm -u+x | head -1)"
    if [ -n "$exe" ]; then
      BENCHES+=("$t")
      step "bench-$t" "$exe" --benchmark_format=json --benchmark_out="$STAGE/$t.json"
    fi
  done <"$STAGE/.bench-targets"
fi
rm -f "$STAGE/.bench-targets"
[ ${#BENCHES[@]} -eq 0 ] && log "no GPU benchmark programs built yet: none run"

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
