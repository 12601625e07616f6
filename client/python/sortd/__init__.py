# Generated-stub package for proto/sortd/v1/sort.proto, shipped with the
# sortd-client distribution so that `pip install ./client/python` needs no
# protoc. sortd/v1/sort_pb2.py and sort_pb2_grpc.py are protoc output copied
# from <build>/python (CMake target sortd_python_stubs); do not edit them.
# Refresh: scripts/refresh-python-stubs.sh [<build>]. The ctest
# packaging.python_stubs_current fails when they are out of date.
