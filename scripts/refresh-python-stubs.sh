#!/usr/bin/env bash
# Refreshes (or, with --check, verifies) the generated Python stubs shipped in
# client/python/sortd/ so that `pip install ./client/python` needs no protoc.
#
#   scripts/refresh-python-stubs.sh [--no-build] [BUILD_DIR]   # default: build
#       builds the CMake target sortd_python_stubs (unless --no-build), then
#       copies BUILD_DIR/python/sortd/**/*.py (protoc output for
#       proto/sortd/v1/sort.proto) into client/python/sortd/.
#   scripts/refresh-python-stubs.sh --check [BUILD_DIR]
#       byte-compares the shipped stubs with BUILD_DIR/python; exit 1 if they
#       differ (the ctest packaging.python_stubs_current runs this).
#
# The package __init__.py files are not protoc output (the shipped ones carry a
# comment) and are not compared or copied.
set -euo pipefail

check=0
build_stubs=1
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --check) check=1; build_stubs=0 ;;
    --no-build) build_stubs=0 ;;
    *) echo "usage: $0 [--check|--no-build] [BUILD_DIR]" >&2; exit 2 ;;
  esac
  shift
done
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build}"
build="$(cd "$build" && pwd)"
gen="$build/python"
shipped="$repo/client/python"

if [[ $build_stubs == 1 ]]; then
  cmake --build "$build" --target sortd_python_stubs
fi

# Stub modules (everything but __init__.py) on each side, relative paths.
list_stubs() {
  (cd "$1" && find sortd -name '*.py' ! -name '__init__.py' -type f | LC_ALL=C sort)
}
if [[ ! -f "$gen/sortd/v1/sort_pb2.py" ]]; then
  echo "error: $gen/sortd/v1/sort_pb2.py missing; build the stubs first:" \
       "cmake --build $build --target sortd_python_stubs" >&2
  exit 1
fi
mapfile -t gen_files < <(list_stubs "$gen")

if [[ $check == 0 ]]; then
  for f in "${gen_files[@]}"; do
    mkdir -p "$shipped/$(dirname "$f")"
    cp "$gen/$f" "$shipped/$f"
    d="$(dirname "$f")"
    while [[ "$d" != "." ]]; do  # keep (or create empty) package __init__.py
      [[ -f "$shipped/$d/__init__.py" ]] || : > "$shipped/$d/__init__.py"
      d="$(dirname "$d")"
    done
  done
  # Drop shipped stubs that protoc no longer generates.
  while IFS= read -r f; do
    if [[ ! -f "$gen/$f" ]]; then rm -v "$shipped/$f"; fi
  done < <(list_stubs "$shipped")
  echo "refreshed ${#gen_files[@]} stub file(s) in client/python/sortd from $gen"
  exit 0
fi

status=0
mapfile -t shipped_files < <(list_stubs "$shipped")
for f in "${gen_files[@]}"; do
  if [[ ! -f "$shipped/$f" ]]; then
    echo "MISSING: client/python/$f (generated as $gen/$f)" >&2
    status=1
  elif ! cmp -s "$gen/$f" "$shipped/$f"; then
    echo "DIFFERS: client/python/$f != $gen/$f" >&2
    status=1
  fi
done
for f in "${shipped_files[@]}"; do
  if [[ ! -f "$gen/$f" ]]; then
    echo "STALE: client/python/$f is no longer generated" >&2
    status=1
  fi
done
if [[ $status != 0 ]]; then
  echo "The Python stubs shipped in client/python/sortd are out of date with" \
       "proto/sortd/v1/sort.proto. Refresh them by copying from $gen:" >&2
  echo "  scripts/refresh-python-stubs.sh $build" >&2
  echo "(or: cp $gen/sortd/v1/sort_pb2*.py client/python/sortd/v1/) and commit them." >&2
  exit 1
fi
echo "shipped Python stubs match $gen (${#gen_files[@]} files)"
