# Sourced by the service benchmarks: SORTD and SORTCTL from the dev VM's
# build (BIN=build) or from the bundle carried to the GPU host
# (.device/bundle, with its libraries on LD_LIBRARY_PATH).
if [ -n "${BIN:-}" ]; then
  SORTD=$BIN/server/sortd; SORTCTL=$BIN/client/sortctl
else
  SORTD=$PWD/.device/bundle/bin/sortd; SORTCTL=$PWD/.device/bundle/bin/sortctl
  export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
fi
