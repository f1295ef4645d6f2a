#!/usr/bin/env bash
# The newest glibc symbol version that any of the given ELF files asks for (e.g. 2.36), or
# nothing where none asks (static programs and non-ELF files have no dynamic symbols). A machine
# with an older glibc cannot load them; gpu-bundle.sh records it for its launcher to check.
#
#   scripts/glibc-needed.sh FILE...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: glibc-needed.sh FILE..." >&2; exit 2; }
for f in "$@"; do
  [ -f "$f" ] || { echo "glibc-needed: no file $f" >&2; exit 2; }
done
# objdump fails on a file without dynamic symbols (a static ppbench): that file adds nothing, and
# its status must not end the caller under pipefail.
{ objdump -T "$@" 2>/dev/null || true; } | { grep -o 'GLIBC_[0-9][0-9.]*' || true; } \
  | sed 's/^GLIBC_//' | sort -uV | tail -1
