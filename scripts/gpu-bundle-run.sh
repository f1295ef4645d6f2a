#!/usr/bin/env bash
# The launcher of a GPU bundle (scripts/gpu-bundle.sh copies this file to <bundle>/run).
#
# Usage: <bundle>/run PROGRAM [ARGS...]   e.g. gpu-bundle/run ppbench --version
#        <bundle>/run --check             find the libraries, print the line below, exit
#        <bundle>/run --env               print the environment a program gets (NAME=VALUE lines)
#        <bundle>/run --list              the programs in the bundle
#
# The bundle's binaries carry everything but cuBLAS/cuBLASLt (and NCCL, which ppbench loads at
# run time, only for --gpus with more than one GPU). The launcher finds the sonames the binaries
# were linked against (bundle.env, written at bundle time) in this order:
#   1. $PPBENCH_CUDA_LIB_DIRS (a colon list)
#   2. the system CUDA: /usr/local/cuda/lib64, /usr/local/cuda/targets/x86_64-linux/lib,
#      /usr/local/cuda/lib, then `ldconfig -p`
#   3. the nvidia-* Python wheels of `python3` ($PPBENCH_BUNDLE_PYTHON if set):
#      <site-packages>/nvidia/*/lib (nvidia-cublas: nvidia/cublas/lib or nvidia/cu13/lib;
#      nvidia-nccl-cu13: nvidia/nccl/lib)
# prints ONE line on stderr naming what it used (PPBENCH_BUNDLE_QUIET=1 silences it), puts the
# bundle's lib/ and those folders first on LD_LIBRARY_PATH, exports PPBENCH_GIT_COMMIT from the
# bundle's manifest unless it is set, and execs the program.
# Before that it checks this machine's glibc against the newest version the binaries ask for
# (BUNDLE_GLIBC): an older one cannot load them.
# Exit: the program's status; 2 unknown program or bad usage; 3 this machine's glibc too old, or
# cuBLAS (or NCCL where the binaries link it) not found.
set -uo pipefail

BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME=gpu-bundle  # the prefix of its one line, whatever the folder is called
say() { [ "${PPBENCH_BUNDLE_QUIET:-0}" = 1 ] || echo "$NAME: $*" >&2; }

# What the binaries need, recorded at bundle time. Defaults: CUDA 13's cuBLAS, NCCL 2 optional.
BUNDLE_COMMIT=""
BUNDLE_CUBLAS_SONAMES="libcublasLt.so.13 libcublas.so.13"
BUNDLE_NCCL_SONAME="libnccl.so.2"
BUNDLE_NCCL_REQUIRED=0
BUNDLE_GLIBC=""
# shellcheck source=/dev/null
[ -f "$BUNDLE/bundle.env" ] && . "$BUNDLE/bundle.env"

programs() {
  local f out=()
  for f in "$BUNDLE"/bin/*; do [ -f "$f" ] && [ -x "$f" ] && out+=("$(basename "$f")"); done
  echo "${out[*]:-}"
}

MODE="exec"
case "${1:-}" in
  ""|-h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
                [ -n "${1:-}" ] && exit 0; exit 2 ;;
  --list) programs | tr ' ' '\n'; exit 0 ;;
  --check) MODE="check" ;;
  --env) MODE="env" ;;
  -*) echo "$NAME: unknown option '$1' (PROGRAM, --check, --env, --list or --help)" >&2; exit 2 ;;
  *)
    PROG="$1"; shift
    if [[ "$PROG" == */* ]] || [ ! -x "$BUNDLE/bin/$PROG" ] || [ ! -f "$BUNDLE/bin/$PROG" ]; then
      list="$(programs)"
      echo "$NAME: unknown program '$PROG' (programs: ${list// /, })" >&2
      exit 2
    fi ;;
esac

# The loader refuses binaries built against a newer glibc with a line per missing symbol version;
# one line here says why instead.
if [ -n "$BUNDLE_GLIBC" ]; then
  have="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
  if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$have" "$BUNDLE_GLIBC" | sort -V | head -1)" != "$BUNDLE_GLIBC" ]; then
    echo "$NAME: this machine's glibc is $have, older than the $BUNDLE_GLIBC the bundle's programs need; build the bundle on a machine whose glibc is $have or older" >&2
    exit 3
  fi
fi

# Candidate folders, in search order, as "label|folder" lines.
SEARCHED=()
candidates() {
  local d sp
  if [ -n "${PPBENCH_CUDA_LIB_DIRS:-}" ]; then
    IFS=: read -r -a dirs <<<"$PPBENCH_CUDA_LIB_DIRS"
    for d in "${dirs[@]}"; do [ -n "$d" ] && echo "PPBENCH_CUDA_LIB_DIRS|$d"; done
  fi
  # PPBENCH_BUNDLE_SYSTEM_DIRS replaces the system CUDA folders (for tests).
  IFS=: read -r -a dirs <<<"${PPBENCH_BUNDLE_SYSTEM_DIRS-/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:/usr/local/cuda/lib}"
  for d in "${dirs[@]}"; do [ -n "$d" ] && echo "system CUDA|$d"; done
  local ldc
  ldc="$(command -v ldconfig 2>/dev/null || { [ -x /sbin/ldconfig ] && echo /sbin/ldconfig; })"
  if [ -n "$ldc" ]; then
    "$ldc" -p 2>/dev/null | grep 'x86-64' | sed -n 's/^[[:space:]]*\(lib[^ ]*\) .*=> \(.*\)$/\1 \2/p' \
      | while read -r so path; do
          case " $WANTED " in *" $so "*) echo "ldconfig|$(dirname "$path")" ;; esac
        done
  fi
  local py="${PPBENCH_BUNDLE_PYTHON:-python3}"  # which Python's wheels (overridable for tests)
  if command -v "$py" >/dev/null 2>&1; then
    "$py" -c 'import site, sys
dirs = list(getattr(site, "getsitepackages", lambda: [])())
try:
    dirs.append(site.getusersitepackages())
except Exception:
    pass
dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
print("\n".join(dict.fromkeys(dirs)))' 2>/dev/null | while read -r sp; do
      [ -n "$sp" ] || continue
      for d in "$sp"/nvidia/*/lib "$sp"/nvidia/*/*/lib "$sp"/nvidia/lib; do
        [ -d "$d" ] && echo "python wheel|$d"
      done
    done
  fi
}

# has DIR SONAME: the folder holds the soname itself or a versioned file of it (libx.so.13.1.0).
has() { [ -e "$1/$2" ] || compgen -G "$1/$2.*" >/dev/null; }

# A folder where every soname exists under its own name: a versioned file without its soname
# link gets one in a private folder.
LINKDIR=""
soname_dir() {  # soname_dir DIR SONAME -> the folder to put on LD_LIBRARY_PATH for it
  local dir="$1" so="$2" f
  if [ -e "$dir/$so" ]; then echo "$dir"; return; fi
  f="$(compgen -G "$dir/$so.*" | sort -V | tail -1)"
  if [ -z "$LINKDIR" ]; then
    LINKDIR="${TMPDIR:-/tmp}/ppbench-bundle-links-$(id -u)"
    mkdir -p "$LINKDIR"
  fi
  ln -sf "$f" "$LINKDIR/$so"
  echo "$LINKDIR"
}

WANTED="$BUNDLE_CUBLAS_SONAMES $BUNDLE_NCCL_SONAME"
mapfile -t CANDS < <(candidates | awk '!seen[$0]++')
for c in "${CANDS[@]}"; do SEARCHED+=("${c#*|} (${c%%|*})"); done
[ -n "${PPBENCH_CUDA_LIB_DIRS:-}" ] || SEARCHED=("PPBENCH_CUDA_LIB_DIRS (unset)" "${SEARCHED[@]}")

major() { echo "${1##*.so.}"; }
pretty() {  # libcublasLt.so.13 -> cuBLASLt 13
  local base="${1%%.so*}"
  case "$base" in
    libcublasLt) echo "cuBLASLt $(major "$1")" ;;
    libcublas) echo "cuBLAS $(major "$1")" ;;
    libnccl) echo "NCCL $(major "$1")" ;;
    *) echo "${base#lib} $(major "$1")" ;;
  esac
}

LIBDIRS=()
REPORT=()
# cuBLAS: the first folder that holds every cuBLAS soname (they must be one release); else each
# soname on its own.
read -r -a CUBLAS <<<"$BUNDLE_CUBLAS_SONAMES"
found_all=""
for c in "${CANDS[@]}"; do
  dir="${c#*|}"; ok=1
  for so in "${CUBLAS[@]}"; do has "$dir" "$so" || { ok=0; break; }; done
  if [ "$ok" = 1 ] && [ ${#CUBLAS[@]} -gt 0 ]; then found_all="$c"; break; fi
done
MISSING=()
if [ -n "$found_all" ]; then
  dir="${found_all#*|}"
  for so in "${CUBLAS[@]}"; do LIBDIRS+=("$(soname_dir "$dir" "$so")"); done
  names=(); for so in "${CUBLAS[@]}"; do names+=("$(pretty "$so")"); done
  # "cuBLASLt 13" when one library, "cuBLASLt 13 + cuBLAS 13" when both
  joined="$(printf '%s + ' "${names[@]}")"
  REPORT+=("${joined% + } from $dir (${found_all%%|*})")
else
  for so in "${CUBLAS[@]}"; do
    hit=""
    for c in "${CANDS[@]}"; do has "${c#*|}" "$so" && { hit="$c"; break; }; done
    if [ -n "$hit" ]; then
      LIBDIRS+=("$(soname_dir "${hit#*|}" "$so")")
      REPORT+=("$(pretty "$so") from ${hit#*|} (${hit%%|*})")
    else
      MISSING+=("$so")
    fi
  done
fi
if [ ${#MISSING[@]} -gt 0 ]; then
  searched="$(printf '%s; ' "${SEARCHED[@]}")"
  echo "$NAME: ${MISSING[*]} not found (searched: ${searched%; }); install cuBLAS or name its folder in PPBENCH_CUDA_LIB_DIRS" >&2
  exit 3
fi

if [ -n "$BUNDLE_NCCL_SONAME" ]; then
  hit=""
  for c in "${CANDS[@]}"; do has "${c#*|}" "$BUNDLE_NCCL_SONAME" && { hit="$c"; break; }; done
  if [ -n "$hit" ]; then
    LIBDIRS+=("$(soname_dir "${hit#*|}" "$BUNDLE_NCCL_SONAME")")
    REPORT+=("$(pretty "$BUNDLE_NCCL_SONAME") from ${hit#*|} (${hit%%|*})")
  elif [ "$BUNDLE_NCCL_REQUIRED" = 1 ]; then
    searched="$(printf '%s; ' "${SEARCHED[@]}")"
    echo "$NAME: $BUNDLE_NCCL_SONAME not found, and this bundle's binaries link it (searched: ${searched%; }); name its folder in PPBENCH_CUDA_LIB_DIRS" >&2
    exit 3
  else
    REPORT+=("$(pretty "$BUNDLE_NCCL_SONAME") not found (only --gpus with more than one GPU needs it)")
  fi
fi

# LD_LIBRARY_PATH: the bundle's lib/ first, then the folders found, then what was there.
path="$BUNDLE/lib"
for d in "${LIBDIRS[@]}"; do case ":$path:" in *":$d:"*) ;; *) path="$path:$d" ;; esac; done
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -z "${PPBENCH_GIT_COMMIT:-}" ] && [ -n "$BUNDLE_COMMIT" ]; then
  export PPBENCH_GIT_COMMIT="$BUNDLE_COMMIT"
fi

line="$(printf '%s; ' "${REPORT[@]}")"
say "${line%; }"
case "$MODE" in
  check) exit 0 ;;
  env) echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
       [ -n "${PPBENCH_GIT_COMMIT:-}" ] && echo "PPBENCH_GIT_COMMIT=$PPBENCH_GIT_COMMIT"
       exit 0 ;;
esac
exec "$BUNDLE/bin/$PROG" "$@"
