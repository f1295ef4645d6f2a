#!/usr/bin/env bash
# Builds, on a machine with nvcc but no GPU, the GPU programs as portable binaries in ONE folder
# that runs on a GPU machine which can build nothing (`make gpu-bundle`):
#
#   gpu-bundle/run PROGRAM [ARGS...]   the launcher: finds cuBLAS (and NCCL) there, then execs
#   gpu-bundle/bin/                    ppbench and the GPU test and benchmark programs, stripped
#   gpu-bundle/lib/                    the shared libraries they need that the target lacks
#                                      (Google Benchmark; the C++ runtime is the target's)
#   gpu-bundle/gpu-check.sh, scripts/  the GPU check and the helpers it runs
#   gpu-bundle/benchmarks/sweeps/      the GPU sweep's spec and the schema it is checked against
#   gpu-bundle/wheels/                 jsonschema and what it needs, for sweep.py on a GPU
#                                      machine whose Python lacks it (fetched with pip here)
#   gpu-bundle/bundle.json, bundle.env the manifest: commit, tools, architectures, every file's
#                                      size and sha256, the sonames the launcher must find
#   gpu-bundle.tar.gz                  the folder packed, what a device call carries: about 40 %
#                                      of its size, unpacked there with `tar -xzf`
#
# Usage: scripts/gpu-bundle.sh [--out DIR] [--build-dir DIR] [--jobs N]
#   --out DIR        the bundle folder (default gpu-bundle in the repository root); replaced whole,
#                    as is its packed copy DIR.tar.gz; a folder that is there must be an
#                    earlier bundle (it holds bundle.env), else exit 2 before anything
#   --build-dir DIR  the CMake build folder (default build-bundle)
#   --jobs N         parallel build jobs (default: the number of cores)
# Configured with -DPPBENCH_PORTABLE=ON (static libstdc++, libgcc and CUDA runtime, RPATH
# $ORIGIN/../lib), -DPPBENCH_NATIVE=OFF and CUDA architectures 90-real;90-virtual (sm_90 code and
# PTX). The folder must fit the 64 MiB a device call carries; the archive leaves room there for
# the working tree beside it.
# Exit: 0 built; 1 the build failed or the bundle is over 64 MiB; 2 bad usage; 3 the machine: nvcc,
# a build tool or a library the programs need is not found.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/gpu-bundle"
BUILD="$ROOT/build-bundle"
JOBS="$(nproc 2>/dev/null || echo 2)"
LIMIT_MIB=64
# The programs of the bundle, in one place.
TARGETS=(ppbench ppbench-cuda cuda_kernel_tests cuda_exec_tests cuda_gemm_bench cuda_layer_bench cuda_pipeline_bench)
# What gpu-check.sh needs at run time besides the programs (read them: these are their imports).
HELPERS=(gtest_summary.py benchmark_rows.py gpu_equivalence.py gpu_tables.py gpu_runs.py
         gpipe_tables.py gpipe_tables_data.py torch_reference.py compare_torch.py compare_perf.py
         results_io.py script_cli.py sweep.py sweep_point.py sweep_process.py sweep_records.py sweep_spec.py)
SWEEP_FILES=(benchmarks/sweeps/cuda.json benchmarks/sweeps/sweep.schema.json)
# sweep.py checks its spec with jsonschema, which GPU images often lack (the lent H100s' do): its
# wheels and their needs travel along, for each CPython a target may run (rpds-py is compiled per
# version). The version is the one the tests here ran with, where the .venv has it.
WHEEL_PYTHONS=(3.11 3.12 3.13)
# Libraries the target has or the launcher finds there: never copied into lib/.
# Not copied: the C library, the C++ runtime (a newer one on the target is backward compatible;
# an older copy first on LD_LIBRARY_PATH would shadow it for cuBLAS and NCCL too), and what the
# launcher finds on the target.
SYSTEM_LIBS='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcublas|libcublasLt|libnccl|libcudart|libcuda)\.so'
ARCHS="90-real;90-virtual"

die() { echo "gpu-bundle: $*" >&2; exit 1; }
missing() { echo "gpu-bundle: $*" >&2; exit 3; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out|--build-dir|--jobs)
      [ $# -ge 2 ] || { echo "gpu-bundle: $1 needs a value (see --help)" >&2; exit 2; }
      case "$1" in --out) OUT="$2" ;; --build-dir) BUILD="$2" ;; --jobs) JOBS="$2" ;; esac
      shift 2 ;;
    -h|--help) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-bundle: --jobs: '$JOBS' is not a positive number" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"
OUT="$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")"
# --out is replaced whole at the end: refused up front unless it is absent or an earlier bundle
# (its bundle.env), so that a mistyped folder (results/, the source tree) is never deleted.
if [ -e "$OUT" ] && ! [ -f "$OUT/bundle.env" ]; then
  echo "gpu-bundle: --out $OUT exists and is not a bundle (no bundle.env): give a new folder" \
       "or an earlier bundle's" >&2
  exit 2
fi
export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null 2>&1 || { echo "gpu-bundle: nvcc not found (the bundle's CUDA code needs it)" >&2; exit 3; }
for tool in cmake readelf strip sha256sum python3 tar gzip; do
  command -v "$tool" >/dev/null 2>&1 || missing "$tool not found"
done

mkdir -p "$BUILD"
echo "gpu-bundle: configuring $BUILD (portable, CUDA architectures $ARCHS)"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPPBENCH_NATIVE=OFF -DPPBENCH_PORTABLE=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" -DPPBENCH_BUILD_BENCHMARKS=ON >"$BUILD/gpu-bundle-configure.log" 2>&1 \
  || { tail -n 30 "$BUILD/gpu-bundle-configure.log" >&2; die "configure failed (log: $BUILD/gpu-bundle-configure.log)"; }
grep -q 'PPBENCH_HAVE_CUDA\|building the CUDA parts' "$BUILD/gpu-bundle-configure.log" \
  || die "CMake found no CUDA compiler (log: $BUILD/gpu-bundle-configure.log)"
# Provenance: the tree the programs are built from (its commit, and "dirty" where tracked files
# differ from it, as cmake/build_info.cmake writes into the programs), read before the build
# and again after it: a commit or an edit in between would give the
# manifest one tree and the programs another, so it stops the bundle. Read before the staging
# folder (untracked, beside --out, often inside the tree) exists.
tree_state() {
  local commit dirty
  if commit="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null)"; then
    dirty="$(git -C "$ROOT" status --porcelain --untracked-files=no -- . ':!results' ':!plots' 2>/dev/null | grep -q . && echo true || echo false)"
  else
    commit="${PPBENCH_GIT_COMMIT:-unknown}"; dirty=null
  fi
  echo "$commit $dirty"
}
read -r COMMIT DIRTY <<<"$(tree_state)"
echo "gpu-bundle: building ${TARGETS[*]} (-j$JOBS)"
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" || die "build failed"
AFTER="$(tree_state)"
# (A dirty tree edited further stays "dirty" at the same commit: that, git cannot tell.)
[ "$AFTER" = "$COMMIT $DIRTY" ] \
  || die "the tree changed while the programs were built (commit $COMMIT, dirty $DIRTY; now ${AFTER% *}, dirty ${AFTER#* }): build the bundle again"

STAGE="$(mktemp -d "$(dirname "$OUT")/.$(basename "$OUT").tmp-XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/scripts"

for t in "${TARGETS[@]}"; do
  exe="$(find "$BUILD" -type f -name "$t" -perm -u+x -not -path '*/CMakeFiles/*' | head -1)"
  [ -n "$exe" ] || die "built program $t not found under $BUILD"
  cp "$exe" "$STAGE/bin/$t"
  strip "$STAGE/bin/$t"
done

# Shared libraries: walk NEEDED from the programs, resolved where this machine's loader finds
# them (ldd), copying each that the target will not have, and the libraries it needs in turn.
declare -A WHERE=() COPIED=()
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
NEEDED_ALL=()
for t in "${TARGETS[@]}"; do
  while read -r so path; do [ -n "$path" ] && WHERE["$so"]="$path"; done < <(
    ldd "$STAGE/bin/$t" | sed -n 's/^[[:space:]]*\([^ ]*\) => \([^ ]*\) .*/\1 \2/p')
  while read -r so; do NEEDED_ALL+=("$so"); done < <(needed "$STAGE/bin/$t")
done
queue=("${NEEDED_ALL[@]}")
while [ ${#queue[@]} -gt 0 ]; do
  so="${queue[0]}"; queue=("${queue[@]:1}")
  [[ "$so" =~ $SYSTEM_LIBS ]] && continue
  [ -n "${COPIED[$so]:-}" ] && continue
  path="${WHERE[$so]:-}"
  if [ -z "$path" ] || [ "$path" = "not" ]; then
    missing "$so is needed but this machine's loader does not find it (ldd); install it first"
  fi
  cp -L "$path" "$STAGE/lib/$so"
  chmod 644 "$STAGE/lib/$so"
  COPIED["$so"]=1
  while read -r dep; do
    if [ -z "${WHERE[$dep]:-}" ]; then
      WHERE["$dep"]="$(ldd "$path" | awk -v so="$dep" '$1 == so && $2 == "=>" { print $3; exit }')"
    fi
    queue+=("$dep")
  done < <(needed "$path")
done

# The sonames the launcher must find on the target (cuBLAS always, NCCL if linked).
mapfile -t SONAMES < <(printf '%s\n' "${NEEDED_ALL[@]}" | sort -u)
CUBLAS_SONAMES="$(printf '%s\n' "${SONAMES[@]}" | grep -E '^libcublas(Lt)?\.so' | sort -r | tr '\n' ' ' | sed 's/ $//')"
NCCL_LINKED="$(printf '%s\n' "${SONAMES[@]}" | grep -E '^libnccl\.so' | head -1 || true)"
[ -n "$CUBLAS_SONAMES" ] || CUBLAS_SONAMES="libcublasLt.so.13"
NCCL_SONAME="${NCCL_LINKED:-libnccl.so.2}"
NCCL_REQUIRED=$([ -n "$NCCL_LINKED" ] && echo 1 || echo 0)
if printf '%s\n' "${SONAMES[@]}" | grep -qE '^libcudart\.so'; then
  die "a program links the shared CUDA runtime (libcudart.so): PPBENCH_PORTABLE should link cudart_static"
fi

# The newest glibc symbol version the programs and bundled libraries ask for: a machine with an
# older glibc cannot load them, which the launcher says up front.
shopt -s nullglob
ELF_FILES=("$STAGE"/bin/* "$STAGE"/lib/*)  # lib/ is empty where nothing needed copying
shopt -u nullglob
GLIBC_NEEDED="$("$ROOT/scripts/glibc-needed.sh" "${ELF_FILES[@]}")"

# The launcher, the check and its helpers.
cp "$ROOT/scripts/gpu-bundle-run.sh" "$STAGE/run"
cp "$ROOT/scripts/gpu-check.sh" "$STAGE/gpu-check.sh"
for h in "${HELPERS[@]}"; do cp "$ROOT/scripts/$h" "$STAGE/scripts/$h"; done
for f in "${SWEEP_FILES[@]}"; do mkdir -p "$STAGE/$(dirname "$f")"; cp "$ROOT/$f" "$STAGE/$f"; done
JSONSCHEMA="jsonschema"
V="$("$ROOT/.venv/bin/python" -c 'import importlib.metadata as m; print(m.version("jsonschema"))' 2>/dev/null)" \
  && JSONSCHEMA="jsonschema==$V"
mkdir -p "$STAGE/wheels"
for py in "${WHEEL_PYTHONS[@]}"; do
  if ! python3 -m pip download -q --only-binary=:all: --python-version "$py" --implementation cp \
       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
       --platform manylinux2014_x86_64 -d "$STAGE/wheels" "$JSONSCHEMA" >"$BUILD/gpu-bundle-wheels.log" 2>&1; then
    echo "gpu-bundle: warning: pip could not fetch $JSONSCHEMA for Python $py (log: $BUILD/gpu-bundle-wheels.log); the sweep part needs jsonschema on the target then" >&2
  fi
done
chmod 755 "$STAGE/run" "$STAGE/gpu-check.sh"

DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
{
  echo "# Written by scripts/gpu-bundle.sh; read by run and gpu-check.sh."
  printf 'BUNDLE_COMMIT=%q\n' "$COMMIT"
  printf 'BUNDLE_DIRTY=%q\n' "$DIRTY"
  printf 'BUNDLE_DATE=%q\n' "$DATE"
  printf 'BUNDLE_CUBLAS_SONAMES=%q\n' "$CUBLAS_SONAMES"
  printf 'BUNDLE_NCCL_SONAME=%q\n' "$NCCL_SONAME"
  printf 'BUNDLE_NCCL_REQUIRED=%q\n' "$NCCL_REQUIRED"
  printf 'BUNDLE_GLIBC=%q\n' "$GLIBC_NEEDED"
} >"$STAGE/bundle.env"

GXX="$(g++ --version 2>/dev/null | head -1)"
NVCC="$(nvcc --version | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p' | head -1)"
CMAKE_V="$(cmake --version | head -1 | awk '{print $3}')"
( cd "$STAGE" && find . -type f ! -name bundle.json ! -name .files | sed 's|^\./||' | sort | while read -r f; do
    printf '%s\t%s\t%s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
  done ) >"$STAGE/.files"
B_COMMIT="$COMMIT" B_DIRTY="$DIRTY" B_DATE="$DATE" B_HOST="$(hostname)" B_GXX="$GXX" B_NVCC="$NVCC" \
B_CMAKE="$CMAKE_V" B_ARCHS="$ARCHS" B_SONAMES="${SONAMES[*]}" B_CUBLAS="$CUBLAS_SONAMES" \
B_NCCL="$NCCL_SONAME" B_NCCL_REQ="$NCCL_REQUIRED" B_TARGETS="${TARGETS[*]}" B_GLIBC="$GLIBC_NEEDED" \
B_COPIED="${!COPIED[*]}" python3 - "$STAGE" <<'PYEOF'
import json, os, sys
from pathlib import Path
e = os.environ
stage = Path(sys.argv[1])
files = []
for line in (stage / ".files").read_text().splitlines():
    name, size, sha = line.split("\t")
    files.append({"path": name, "size": int(size), "sha256": sha})
(stage / ".files").unlink()
manifest = {
    "commit": e["B_COMMIT"], "dirty": {"true": True, "false": False}.get(e["B_DIRTY"]),
    "date": e["B_DATE"], "build_host": e["B_HOST"],
    "tools": {"g++": e["B_GXX"], "nvcc": e["B_NVCC"], "cmake": e["B_CMAKE"]},
    "cuda_architectures": e["B_ARCHS"].split(";"),
    "cmake_options": ["-DCMAKE_BUILD_TYPE=Release", "-DPPBENCH_NATIVE=OFF", "-DPPBENCH_PORTABLE=ON",
                      f"-DCMAKE_CUDA_ARCHITECTURES={e['B_ARCHS']}"],
    "programs": e["B_TARGETS"].split(),
    "needed_sonames": e["B_SONAMES"].split(),
    "glibc_needed": e["B_GLIBC"] or None,
    "bundled_libraries": sorted(e["B_COPIED"].split()),
    "found_on_target": {"cublas": e["B_CUBLAS"].split(),
                        "nccl": {"soname": e["B_NCCL"], "required": e["B_NCCL_REQ"] == "1",
                                 "note": "linked by the programs" if e["B_NCCL_REQ"] == "1" else
                                         "loaded at run time, only for --gpus with more than one GPU"}},
    "files": files,
}
(stage / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")
PYEOF

# The old packed copy goes with the old folder: it would no longer match.
rm -rf "$OUT" "$OUT.tar.gz"
mv "$STAGE" "$OUT"
trap - EXIT

# Sizes, then the limit.
echo "gpu-bundle: $OUT"
( cd "$OUT" && find . -type f | sed 's|^\./||' | sort | while read -r f; do
    printf '  %10s  %s\n' "$(stat -c %s "$f")" "$f"; done )
TOTAL="$(du -sb "$OUT" | cut -f1)"
TOTAL_MIB="$(awk -v b="$TOTAL" 'BEGIN { printf "%.1f", b / 1048576 }')"
echo "gpu-bundle: total $TOTAL bytes ($TOTAL_MIB MiB); commit $COMMIT${DIRTY:+ (dirty: $DIRTY)}; cuBLAS: $CUBLAS_SONAMES; NCCL: $NCCL_SONAME ($([ "$NCCL_REQUIRED" = 1 ] && echo linked || echo optional, loaded at run time))"
if [ "$TOTAL" -gt $((LIMIT_MIB * 1024 * 1024)) ]; then
  echo "gpu-bundle: the bundle is $TOTAL_MIB MiB, over the $LIMIT_MIB MiB a device call carries" >&2
  exit 1
fi

# The packed copy a device call carries. A call's 64 MiB hold the working tree too (13 MiB, and
# growing by each GPU session's records), so the 48 MiB folder itself would leave little room;
# packed it takes about 40 % of that.
PACKED="$("$ROOT/scripts/pack-bundle.sh" "$OUT")" || die "could not pack $OUT into $OUT.tar.gz"
echo "gpu-bundle: $OUT.tar.gz $PACKED bytes ($(awk -v b="$PACKED" 'BEGIN { printf "%.1f", b / 1048576 }') MiB): carry it, then \`tar -xzf $(basename "$OUT").tar.gz\` there"
