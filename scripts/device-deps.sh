#!/usr/bin/env bash
# The C++ libraries ppbench builds against (CLI11, nlohmann-json, Eigen, GoogleTest, Google
# Benchmark), as Debian packages in .device-deps/ (git-ignored), for a GPU machine that has CUDA
# and a compiler but cannot install anything (no package registry reachable from it).
#
#   scripts/device-deps.sh fetch         where apt works (Debian/Ubuntu): downloads the .debs
#   scripts/device-deps.sh unpack DIR    on the GPU machine (gpu-check.sh does it): extracts them
#                                        under DIR and prints the CMake prefix to use (DIR/usr)
#
# Header-only libraries work on any distribution; GoogleTest is a static library and Google
# Benchmark a shared one (its runtime package is fetched too: put DIR/usr/lib/<arch> on
# LD_LIBRARY_PATH), both built for glibc 2.36 / libstdc++ 12, which newer systems run.
# Exit: 0 done; 1 a download or unpack failed; 2 bad usage; 3 the machine: no apt-get or dpkg, or
# no packages fetched.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STORE="${PPBENCH_DEVICE_DEPS:-$ROOT/.device-deps}"  # overridable for tests
PACKAGES=(libcli11-dev nlohmann-json3-dev libeigen3-dev libgtest-dev libgmock-dev
          libbenchmark-dev libbenchmark1debian)

usage() { echo "device-deps: $1; usage: device-deps.sh fetch | unpack DIR (see --help)" >&2; exit 2; }

case "${1:-}" in
  fetch)
    command -v apt-get >/dev/null || { echo "device-deps: apt-get not found (fetch where apt works)" >&2; exit 3; }
    mkdir -p "$STORE"
    cd "$STORE"
    rm -f ./*.deb
    apt-get download "${PACKAGES[@]}"
    echo "device-deps: $(find . -maxdepth 1 -name "*.deb" | wc -l) packages in $STORE ($(du -sh . | cut -f1)); carry .device-deps to the GPU machine"
    ;;
  unpack)
    [ $# -eq 2 ] || usage "unpack takes one folder, DIR"
    command -v dpkg >/dev/null || { echo "device-deps: dpkg not found: cannot unpack the packages" >&2; exit 3; }
    shopt -s nullglob
    debs=("$STORE"/*.deb)
    [ ${#debs[@]} -gt 0 ] || { echo "device-deps: no packages in $STORE (run 'scripts/device-deps.sh fetch' where apt works)" >&2; exit 3; }
    mkdir -p "$2"
    for f in "${debs[@]}"; do dpkg -x "$f" "$2"; done
    echo "$(cd "$2" && pwd)/usr"
    ;;
  -h | --help) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
  "") usage "no action given" ;;
  *) usage "unknown action '$1' (allowed: fetch, unpack)" ;;
esac
