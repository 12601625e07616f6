#!/usr/bin/env bash
# scripts/runtime-packages.sh on the real binaries: the list the image's
# runtime stage installs must name the gRPC, protobuf, abseil, Highway and
# prometheus-cpp runtime packages that are installed here, and no -dev
# package, compiler or CUDA toolkit package.
set -euo pipefail
script="$1"; shift
list="$(bash "$script" "$@")"
echo "$list"
fail=0
for wanted in 'libgrpc\+\+' 'libprotobuf[0-9]' 'libabsl' 'libhwy' 'libprometheus-cpp-pull'; do
  grep -Eq "^${wanted}" <<<"$list" || { echo "FAIL: no package matching ^$wanted"; fail=1; }
done
if grep -Eq -- '-dev$|^(gcc|g\+\+|cpp|clang|cuda-|nvidia-)' <<<"$list"; then
  echo "FAIL: build-only packages in the runtime list"; fail=1
fi
while read -r package; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || { echo "FAIL: $package is not an installed package"; fail=1; }
done <<<"$list"
exit "$fail"
