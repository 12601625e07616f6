# The programs the tests run besides sortd's own binaries (openssl,
# prometheus, promtool, kubectl, node and the npm tools, Debian's python3 with
# its modules). scripts/install-deps.sh installs every one. A test is never
# dropped for a missing tool:
#   - under CI (CI=true in the environment, as .ci/run runs) or with
#     -DSORTD_REQUIRE_TEST_TOOLS=ON, a missing tool fails the configure step,
#     naming the tool and how to install it;
#   - elsewhere the configure step warns, and the tests that need the tool
#     are registered all the same but fail when run, with the same message.
#
#   sortd_find_tool(<var> TOOL <name> INSTALL <how> [NEEDED_BY <what>] [NOTE <text>]
#                   [NAMES <names>...] [PATHS <dirs>... NO_DEFAULT_PATH]
#                   [VERSION_REGEX <regex> VERSION_ARGS <args>...])
#     Finds the program into the cache variable <var> (give <var> a path on
#     the command line to use another one; a path that does not exist counts
#     as missing, which is also how to check this file: e.g.
#     -DSORTD_PROMTOOL=/nonexistent). With VERSION_REGEX, `<program>
#     VERSION_ARGS` must print a line matching it (a program too old for the
#     tests counts as missing). Sets <var>_PROBLEM to the message when the
#     tool is missing, empty when it is usable.
#   sortd_require_file(<var> FILES <path>... TOOL <name> INSTALL <how> [NEEDED_BY <what>])
#     The same for files that are not programs (npm modules).
#   sortd_python_modules(<var> PYTHON <python> MODULES <m>... INSTALL <how> [NEEDED_BY <what>])
#     The same for Python modules importable by <python>.
#   sortd_tool_test(NAME <test> NEEDS <var>... COMMAND <command>... [WORKING_DIRECTORY <dir>])
#     add_test(), or, when a needed tool is missing (outside CI), a test of the
#     same name that fails with the tools' messages. Set its properties
#     afterwards as for any test.
include_guard(GLOBAL)

option(SORTD_REQUIRE_TEST_TOOLS
  "Fail the configure step when a program a test needs is missing (always on when CI is set)" OFF)
set(SORTD_TOOLS_REQUIRED OFF)
if(SORTD_REQUIRE_TEST_TOOLS OR "$ENV{CI}" MATCHES "^([Tt][Rr][Uu][Ee]|1|[Yy][Ee][Ss]|[Oo][Nn])$")
  set(SORTD_TOOLS_REQUIRED ON)
endif()

# Reports a missing tool: an error under CI (the configure step fails at the
# end, after naming every missing tool), a warning elsewhere.
function(_sortd_tool_missing var message_text)
  if(SORTD_TOOLS_REQUIRED)
    message(SEND_ERROR "sortd: ${message_text}")
  else()
    message(WARNING "sortd: ${message_text}\n"
      "The tests that need it are registered and will fail until it is installed.")
  endif()
  set(${var}_PROBLEM "${message_text}" PARENT_SCOPE)
endfunction()

function(_sortd_tool_text out tool install needed_by note)
  set(text "${tool} not found")
  if(needed_by)
    string(APPEND text " (needed by ${needed_by})")
  endif()
  string(APPEND text ": install it with `${install}`, or run `bash scripts/install-deps.sh`")
  if(note)
    string(APPEND text " (${note})")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(sortd_find_tool var)
  cmake_parse_arguments(PARSE_ARGV 1 T "NO_DEFAULT_PATH" "TOOL;INSTALL;NEEDED_BY;NOTE;VERSION_REGEX"
                        "NAMES;PATHS;VERSION_ARGS")
  if(NOT T_NAMES)
    set(T_NAMES ${T_TOOL})
  endif()
  set(extra)
  if(T_PATHS)
    list(APPEND extra PATHS ${T_PATHS})
  endif()
  if(T_NO_DEFAULT_PATH)
    list(APPEND extra NO_DEFAULT_PATH)
  endif()
  find_program(${var} NAMES ${T_NAMES} ${extra})
  _sortd_tool_text(text "${T_TOOL}" "${T_INSTALL}" "${T_NEEDED_BY}" "${T_NOTE}")
  set(program "${${var}}")
  if(NOT program OR NOT EXISTS "${program}" OR IS_DIRECTORY "${program}")
    if(program)
      string(REPLACE " not found" " not found at ${program}" text "${text}")
    endif()
    _sortd_tool_missing(${var} "${text}")
    set(${var}_PROBLEM "${${var}_PROBLEM}" PARENT_SCOPE)
    return()
  endif()
  if(T_VERSION_REGEX)
    execute_process(COMMAND "${program}" ${T_VERSION_ARGS}
      OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 30)
    if(NOT "${out}\n${err}" MATCHES "${T_VERSION_REGEX}")
      list(JOIN T_VERSION_ARGS " " version_args)
      string(REPLACE " not found" " at ${program} is too old (`${T_TOOL} ${version_args}` printed no line matching '${T_VERSION_REGEX}')"
             text "${text}")
      _sortd_tool_missing(${var} "${text}")
      set(${var}_PROBLEM "${${var}_PROBLEM}" PARENT_SCOPE)
      return()
    endif()
  endif()
  set(${var}_PROBLEM "" PARENT_SCOPE)
endfunction()

function(sortd_require_file var)
  cmake_parse_arguments(PARSE_ARGV 1 T "" "TOOL;INSTALL;NEEDED_BY;NOTE" "FILES")
  set(absent)
  foreach(file IN LISTS T_FILES)
    if(NOT EXISTS "${file}")
      list(APPEND absent "${file}")
    endif()
  endforeach()
  if(NOT absent)
    set(${var}_PROBLEM "" PARENT_SCOPE)
    return()
  endif()
  list(JOIN absent ", " names)
  _sortd_tool_text(text "${T_TOOL}" "${T_INSTALL}" "${T_NEEDED_BY}" "${T_NOTE}")
  string(REPLACE " not found" " not found (no ${names})" text "${text}")
  _sortd_tool_missing(${var} "${text}")
  set(${var}_PROBLEM "${${var}_PROBLEM}" PARENT_SCOPE)
endfunction()

function(sortd_python_modules var)
  cmake_parse_arguments(PARSE_ARGV 1 T "" "PYTHON;INSTALL;NEEDED_BY" "MODULES")
  set(missing)
  if(EXISTS "${T_PYTHON}")
    # One interpreter for all of them: prints the modules that do not import.
    execute_process(COMMAND "${T_PYTHON}" -c
      "import importlib, sys\nfor m in sys.argv[1:]:\n    try:\n        importlib.import_module(m)\n    except Exception:\n        print(m)"
      ${T_MODULES}
      OUTPUT_VARIABLE out ERROR_QUIET RESULT_VARIABLE rc TIMEOUT 120)
    if(NOT rc EQUAL 0)
      set(missing ${T_MODULES})
    else()
      string(STRIP "${out}" out)
      if(out)
        string(REPLACE "\n" ";" missing "${out}")
      endif()
    endif()
  else()
    set(missing "${T_PYTHON}")
  endif()
  if(NOT missing)
    set(${var}_PROBLEM "" PARENT_SCOPE)
    return()
  endif()
  if(missing STREQUAL T_PYTHON)
    set(what "${T_PYTHON}")
  else()
    list(JOIN missing ", " names)
    set(what "Python modules ${names} for ${T_PYTHON}")
  endif()
  _sortd_tool_text(text "${what}" "${T_INSTALL}" "${T_NEEDED_BY}" "")
  _sortd_tool_missing(${var} "${text}")
  set(${var}_PROBLEM "${${var}_PROBLEM}" PARENT_SCOPE)
endfunction()

function(sortd_tool_test)
  cmake_parse_arguments(PARSE_ARGV 0 T "" "NAME;WORKING_DIRECTORY" "NEEDS;COMMAND")
  set(problems)
  foreach(var IN LISTS T_NEEDS)
    if(NOT DEFINED ${var}_PROBLEM)
      message(FATAL_ERROR "sortd_tool_test(${T_NAME}): ${var} was not looked up with sortd_find_tool")
    endif()
    if(${var}_PROBLEM)
      list(APPEND problems "${${var}_PROBLEM}")
    endif()
  endforeach()
  if(NOT problems)
    set(where)
    if(T_WORKING_DIRECTORY)
      set(where WORKING_DIRECTORY ${T_WORKING_DIRECTORY})
    endif()
    add_test(NAME ${T_NAME} COMMAND ${T_COMMAND} ${where})
    return()
  endif()
  # Outside CI only (under CI the configure step has already failed).
  list(JOIN problems "; " text)
  add_test(NAME ${T_NAME}
    COMMAND ${CMAKE_COMMAND} "-DSORTD_TEST=${T_NAME}" "-DSORTD_PROBLEM=${text}"
            -P ${PROJECT_SOURCE_DIR}/cmake/missing_tool.cmake)
endfunction()
