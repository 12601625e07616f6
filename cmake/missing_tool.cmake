# Stands in for a test whose tool was missing at configure time
# (cmake/SortdTestTools.cmake): fails, saying what to install. Reconfigure
# after installing it (`make test` does) to get the real test back.
message(FATAL_ERROR "${SORTD_TEST}: not run, ${SORTD_PROBLEM}; then configure again")
