"""Ships the C++ client's C library (libsortd_client_c.so) inside the package.

The Python client moves sort sessions through that library when it loads
(sortd_client/native.py): about three times grpcio's rate. An installed
package must carry it, or `pip install ./client/python` would give a client
that silently takes the slow path. The library comes from, in order:

  1. $SORTD_CLIENT_LIB: a built libsortd_client_c.so (e.g. build/python/ of
     a sortd build of the same commit);
  2. the build tree beside this source (../../build/python/), when this is a
     checkout that was built (`make build`);
  3. a build of its own: cmake configures the checkout around this source
     (../..) without CUDA, server or tests and builds the one target
     (needs the Debian packages of scripts/install-deps.sh --build-only).

SORTD_CLIENT_NATIVE=0 installs without it (the grpcio path; the library
named by $SORTD_CLIENT_LIB at run time, or one in the loader's path, is
still used). Everything else is in pyproject.toml.
"""

import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

LIBRARY = "libsortd_client_c.so"
HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))


def _announce(text):
    print("sortd-client: " + text, flush=True)


def _build_library(build_temp):
    if not os.path.exists(os.path.join(CHECKOUT, "CMakeLists.txt")):
        raise SystemExit(
            "sortd-client: no %s to ship: set SORTD_CLIENT_LIB to a built one, install from "
            "a sortd checkout (client/python), or set SORTD_CLIENT_NATIVE=0 to install "
            "without it (the slower grpcio path)" % LIBRARY)
    build_dir = os.path.join(build_temp, "sortd-native")
    _announce("building %s from %s (cmake, into %s)" % (LIBRARY, CHECKOUT, build_dir))
    subprocess.check_call([
        "cmake", "-S", CHECKOUT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
        "-DSORTD_WITH_CUDA=OFF", "-DSORTD_BUILD_TESTS=OFF", "-DSORTD_BUILD_BENCH=OFF"])
    subprocess.check_call(["cmake", "--build", build_dir, "--target", "sortd_client_c",
                           "--parallel", str(os.cpu_count() or 1)])
    return os.path.join(build_dir, "python", LIBRARY)


def find_library(build_temp):
    """The library to ship, or None (SORTD_CLIENT_NATIVE=0)."""
    if os.environ.get("SORTD_CLIENT_NATIVE", "1") == "0":
        return None
    named = os.environ.get("SORTD_CLIENT_LIB")
    if named:
        if not os.path.isfile(named):
            raise SystemExit("sortd-client: SORTD_CLIENT_LIB=%s: no such file" % named)
        return named
    in_tree = os.path.join(CHECKOUT, "build", "python", LIBRARY)
    if os.path.isfile(in_tree):
        return in_tree
    return _build_library(build_temp)


class BuildPyWithNative(build_py):
    def run(self):
        super().run()
        library = find_library(os.path.abspath(self.get_finalized_command("build").build_temp))
        if library is None:
            _announce("installing without %s (SORTD_CLIENT_NATIVE=0)" % LIBRARY)
            return
        target = os.path.join(self.build_lib, "sortd_client", "_native")
        os.makedirs(target, exist_ok=True)
        shutil.copyfile(library, os.path.join(target, LIBRARY))
        _announce("shipping %s from %s" % (LIBRARY, library))


class PlatformDistribution(Distribution):
    """The wheel holds a shared library: tag it for this platform."""

    def has_ext_modules(self):
        return os.environ.get("SORTD_CLIENT_NATIVE", "1") != "0"


setup(cmdclass={"build_py": BuildPyWithNative}, distclass=PlatformDistribution)
