#!/usr/bin/env bash
# Prints, one per line, the Debian/Ubuntu packages that hold the shared
# libraries the given binaries load (ldd + dpkg -S). The container image's
# build stage writes this list and its runtime stage installs exactly it, so
# the runtime image has the binaries' libraries and nothing to build with.
# Fails when a library is missing or belongs to no package.
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }

# dpkg knows a file by the path its package installed; with merged /usr the
# loader may report /lib/... for /usr/lib/... (or the reverse).
owner_of() {
  local path="$1" candidate
  for candidate in "$path" "$(readlink -f "$path")" "/usr$path" "${path#/usr}"; do
    [ -n "$candidate" ] || continue
    if dpkg -S "$candidate" 2>/dev/null | head -n 1 | cut -d: -f1; then return 0; fi
  done
  return 1
}

declare -A libraries=() packages=()
for binary in "$@"; do
  if ldd "$binary" | grep -q "not found"; then
    ldd "$binary" | grep "not found" >&2
    echo "runtime-packages: $binary: libraries not found" >&2
    exit 1
  fi
  # Lines look like "libfoo.so.1 => /lib/x86_64-linux-gnu/libfoo.so.1 (0x...)".
  while read -r library; do libraries["$library"]=1; done \
    < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
done
for library in "${!libraries[@]}"; do
  package="$(owner_of "$library")" && [ -n "$package" ] \
    || { echo "runtime-packages: no package owns $library" >&2; exit 1; }
  packages["$package"]=1
done
printf '%s\n' "${!packages[@]}" | sort
