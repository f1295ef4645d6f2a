#!/usr/bin/env bash
# Install what ppbench needs to build, test and plot: Debian packages (apt-get) and the
# project-local Python virtualenv .venv with scripts/requirements.txt.
#
# Idempotent and fast when nothing is missing: apt-get runs only for packages dpkg-query
# does not report as installed, and pip runs only when .venv/.deps-stamp does not hold the
# hash of the current requirements.txt.
#
# Usage: scripts/install-deps.sh            install what is missing
#        scripts/install-deps.sh --check    change nothing; exit 0 when all present, 1 otherwise
# Exit: 0 done; 2 bad usage; 3 packages are missing and this user cannot install them (not root,
# no sudo); otherwise apt-get's or pip's own status when they fail.
#
# Environment: PPBENCH_PYTHON  interpreter for the venv (default /usr/bin/python3 if present,
#                              else python3 on PATH)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
REQS="$ROOT/scripts/requirements.txt"
STAMP="$VENV/.deps-stamp"

APT_PACKAGES=(
  cmake g++ make git clang-format pyflakes3 pycodestyle shellcheck
  python3 python3-venv python3-pip
  libcli11-dev nlohmann-json3-dev libeigen3-dev libopenblas-pthread-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libbenchmark-tools python3-scipy
  libopenmpi-dev openmpi-bin
)

log() { echo "install-deps: $*"; }

missing_apt_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    return 0  # not Debian: nothing we can check or install with apt
  fi
  local pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      echo "$pkg"
    fi
  done
}

python_for_venv() {
  if [[ -n "${PPBENCH_PYTHON:-}" ]]; then
    echo "$PPBENCH_PYTHON"
  elif [[ -x /usr/bin/python3 ]]; then
    echo /usr/bin/python3
  else
    command -v python3
  fi
}

requirements_hash() {
  sha256sum "$REQS" | cut -d' ' -f1
}

venv_is_current() {
  [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "" 2>/dev/null &&
    [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(requirements_hash)" ]]
}

install_apt_packages() {
  local -a missing=("$@")
  local -a apt=(apt-get)
  if [[ "$(id -u)" -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      apt=(sudo apt-get)
    else
      log "missing Debian packages: ${missing[*]}"
      log "run as root:  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
      exit 3
    fi
  fi
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${apt[@]}" update
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}"
}

setup_venv() {
  if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "" 2>/dev/null; then
    local py
    py="$(python_for_venv)"
    log "creating virtualenv $VENV with $py"
    rm -rf "$VENV"
    "$py" -m venv "$VENV"
  fi
  log "pip-installing $REQS into .venv"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet -r "$REQS"
  requirements_hash >"$STAMP"
}

main() {
  local check_only=0
  case "${1:-}" in
    --check) check_only=1 ;;
    -h | --help) sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "install-deps: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac

  local -a missing
  mapfile -t missing < <(missing_apt_packages)

  if ((check_only)); then
    local ok=0
    if ((${#missing[@]})); then log "missing Debian packages: ${missing[*]}"; ok=1; fi
    if ! venv_is_current; then log ".venv missing or stale (requirements.txt changed)"; ok=1; fi
    exit "$ok"
  fi

  if ((${#missing[@]})); then
    install_apt_packages "${missing[@]}"
  else
    log "Debian packages present"
  fi
  if venv_is_current; then
    log ".venv up to date"
  else
    setup_venv
  fi
}

main "$@"
