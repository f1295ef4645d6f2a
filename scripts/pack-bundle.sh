#!/usr/bin/env bash
# Packs a bundle folder into DIR.tar.gz beside it, the form a device call carries (gpu-bundle.sh
# calls it last; docs/gpu-check.md): the folder under its own name, its files in name order and
# owned by root (no user ids of the build machine), gzip (every GPU image's tar unpacks it with
# `tar -xzf`). Written under a temporary name and renamed, so that an archive is whole or absent.
# Prints the archive's size in bytes.
#
#   scripts/pack-bundle.sh DIR
# Exit: 0 packed; 1 tar or gzip failed (no archive left); 2 bad usage.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: pack-bundle.sh DIR" >&2; exit 2; }
[ -d "$1" ] || { echo "pack-bundle: '$1' is not a folder" >&2; exit 2; }
dir="$(cd "$1" && pwd)"
[ "$dir" != / ] || { echo "pack-bundle: '$1' is the root folder" >&2; exit 2; }
archive="$dir.tar.gz"
tmp="$(mktemp "$archive.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
if ! tar -C "$(dirname "$dir")" --sort=name --owner=0 --group=0 --numeric-owner \
       -cf - "$(basename "$dir")" | gzip -n -6 >"$tmp"; then
  echo "pack-bundle: could not pack $dir into $archive" >&2
  exit 1
fi
chmod 644 "$tmp"
mv -f "$tmp" "$archive"
trap - EXIT
stat -c %s "$archive"
