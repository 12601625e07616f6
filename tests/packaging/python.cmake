# Python client packaging: `pip install ./client/python` into a throwaway venv
# (Debian's /usr/bin/python3 with --system-site-packages, offline:
# --no-build-isolation --no-index), then the installed client against the
# real sortd; and the stubs shipped in client/python/sortd must equal the ones
# protoc generates now (target sortd_python_stubs, part of `all`).
sortd_tool_test(NAME packaging.python_pip_install NEEDS SORTD_PYTHON
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/python_package_test.sh)
set_tests_properties(packaging.python_pip_install PROPERTIES
  LABELS packaging
  TIMEOUT 180
  ENVIRONMENT "SORTD_BIN=$<TARGET_FILE:sortd>;REPO=${PROJECT_SOURCE_DIR};PYTHON=${SORTD_PYTHON};SHIP_LIB=$<TARGET_FILE:sortd_client_c>")

add_test(NAME packaging.python_stubs_current
  COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/refresh-python-stubs.sh --check ${PROJECT_BINARY_DIR})
set_tests_properties(packaging.python_stubs_current PROPERTIES
  LABELS packaging)
