#!/usr/bin/env bash
# Which measured sweep `make bench` runs after the theory sweep: the CUDA sweep
# (benchmarks/sweeps/cuda.json) when a GPU is usable, else the CPU sweep (cpu.json).
#
# Usable means both: nvidia-smi lists a device (the driver sees one), and the built ppbench was
# compiled with CUDA and sees a GPU itself (the `--version` of ppbench-cuda beside it lists
# "GPU 0: ..."). The second half matters: a ppbench built without nvcc, or a driver older than
# ppbench's CUDA runtime, would turn every GPU point into a failed row.
#
# Usage: [BENCH_BACKEND=cpu|cuda] scripts/choose_bench_backend.sh PPBENCH
# Prints one line on stdout, "<cpu|cuda>: <why>". BENCH_BACKEND forces a backend: cpu always;
# cuda wherever ppbench itself can run on a GPU (nvidia-smi is not needed then: some containers
# lack it).
# Exit: 0 a backend was chosen; 2 an unknown BENCH_BACKEND or no ppbench at PPBENCH; 3
# BENCH_BACKEND=cuda where ppbench cannot run on a GPU (built without CUDA, no GPU visible), the
# machine's problem as for ppbench itself. One line on stderr says which.
set -uo pipefail

fail() { echo "choose_bench_backend: $*" >&2; exit 2; }

[ $# -eq 1 ] || fail "usage: [BENCH_BACKEND=cpu|cuda] $0 PPBENCH"
ppbench="$1"
forced="${BENCH_BACKEND:-}"
case "$forced" in
  "" | cpu | cuda) ;;
  *) fail "BENCH_BACKEND=$forced is not a measured sweep (known: cpu, cuda; unset: chosen from the machine)" ;;
esac
if [ "$forced" = cpu ]; then
  echo "cpu: forced by BENCH_BACKEND=cpu"
  exit 0
fi
[ -x "$ppbench" ] || fail "no ppbench at '$ppbench' (build it first: make)"

# Sets ppbench_gpu (its first "GPU i: ..." line) or ppbench_why (why it cannot run on a GPU).
# A ppbench that hands CUDA runs to ppbench-cuda beside it (the build's separate programs) says
# so in its --version: then ppbench-cuda is the one to ask which GPUs it sees.
ppbench_gpu=""
ppbench_why=""
ask_ppbench() {
  local version program="$ppbench"
  version="$("$program" --version 2>&1)" || true
  if grep -q "^ppbench .*(CUDA runs by ppbench-cuda" <<<"$version"; then
    program="$(dirname "$ppbench")/ppbench-cuda"
    if [ ! -x "$program" ]; then
      ppbench_why="$program, which makes its CUDA runs, is missing"
      return
    fi
    version="$("$program" --version 2>&1)" || true
  fi
  if ! grep -q "CUDA support compiled in" <<<"$version"; then
    ppbench_why="$program was built without CUDA"
    return
  fi
  ppbench_gpu="$(grep -m1 -E '^GPU [0-9]+:' <<<"$version")"
  if [ -z "$ppbench_gpu" ]; then
    local seen
    seen="$(grep -m1 '^no GPU visible (' <<<"$version" | sed 's/^no GPU visible (//; s/); CUDA runtime.*//')"
    ppbench_why="$program sees no GPU${seen:+ ($seen)}"
  fi
}

if [ "$forced" = cuda ]; then
  ask_ppbench
  [ -n "$ppbench_gpu" ] || { echo "choose_bench_backend: BENCH_BACKEND=cuda, but $ppbench_why" >&2; exit 3; }
  echo "cuda: forced by BENCH_BACKEND=cuda; ppbench runs on $ppbench_gpu"
  exit 0
fi

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "cpu: no GPU (nvidia-smi not found)"
  exit 0
fi
listed="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" || true
if [ "${listed:-0}" -lt 1 ]; then
  echo "cpu: no GPU (nvidia-smi lists no device)"
  exit 0
fi
ask_ppbench
plural=""
[ "$listed" -gt 1 ] && plural="s"
if [ -z "$ppbench_gpu" ]; then
  echo "cpu: nvidia-smi lists $listed GPU$plural, but $ppbench_why"
  exit 0
fi
echo "cuda: nvidia-smi lists $listed GPU$plural and ppbench runs on $ppbench_gpu"
