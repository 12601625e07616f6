# C++ client packaging: `cmake --install` of this build tree (components dev
# and runtime) into a temp prefix, then tests/packaging/consumer, a separate
# project using find_package(sortd) + sortd::client, is configured, built and
# run against the installed sortd. Installs from the build tree, so `all`
# must be built first (`make test` does).
add_test(NAME packaging.cpp_find_package
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cpp_install_test.sh)
set_tests_properties(packaging.cpp_find_package PROPERTIES
  LABELS packaging
  TIMEOUT 600
  ENVIRONMENT "BUILD=${PROJECT_BINARY_DIR};REPO=${PROJECT_SOURCE_DIR}")
