# How our tests become ctest entries; included by the top CMakeLists.txt
# before any folder registers a test.
#
# A test that cannot run on this machine (no root, no netns, no device)
# says why and exits 77, which ctest reports as "Skipped", never "Passed".
# A case that may skip therefore runs in a ctest entry of its own: a
# Catch2 case tagged [may_skip][NAME] (and calling ISOMETRY_SKIP, in
# unit/skip.h) becomes the entry BINARY.NAME, found here in the source; the
# binary's main entry runs every other case.
# PROGRAM: the file is one of a test program's many (tests/CMakeLists.txt):
# its entries run only its own cases, picked by the [#FILE] tag Catch2's -#
# gives each case, and an entry that picks no case at all fails
# (--warn NoTests) instead of passing with nothing run.
function(isometry_catch_test name source)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "PROGRAM" "")
  set(program ${name})
  set(options)
  set(only)
  if(arg_PROGRAM)
    get_filename_component(file ${source} NAME_WE)
    set(program ${arg_PROGRAM})
    set(options "-#" --warn NoTests)
    set(only "[#${file}]")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${source})
  file(STRINGS ${source} tagged REGEX "\\[may_skip\\]\\[[A-Za-z0-9_]+\\]")
  # The main entry, where the file has cases that never skip (a file of
  # only [may_skip] cases would have an entry that runs nothing).
  file(STRINGS ${source} cases REGEX "^(TEST_CASE|TEMPLATE_TEST_CASE|SCENARIO)")
  list(LENGTH cases case_count)
  list(LENGTH tagged tagged_count)
  if(case_count GREATER tagged_count)
    add_test(NAME ${name} COMMAND ${program} ${options} "${only}~[may_skip]")
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
  foreach(line IN LISTS tagged)
    string(REGEX MATCH "\\[may_skip\\]\\[([A-Za-z0-9_]+)\\]" _ "${line}")
    add_test(NAME ${name}.${CMAKE_MATCH_1} COMMAND ${program} ${options} "${only}[${CMAKE_MATCH_1}]")
    set_tests_properties(${name}.${CMAKE_MATCH_1} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  endforeach()
endfunction()

# A unittest module run by Debian's python3 through run_unittest.py: 77
# when a case skipped. Its TIMEOUT is also its COST, so that ctest -j
# starts the long cluster modules first instead of leaving them for a tail
# at the end (ctest has no timings of its own on a fresh clone). MAY_SKIP names cases that run in an entry of their
# own (NAME.CASE) so the others still report "Passed". PYTHONFAULTHANDLER:
# a module that crashes prints every thread's stack before ctest says SEGFAULT.
set(ISOMETRY_RUN_UNITTEST /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/pyfixture/run_unittest.py)
function(isometry_unittest name module dir)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "TIMEOUT" "ENVIRONMENT;MAY_SKIP")
  set(except)
  if(arg_MAY_SKIP)
    set(except --except ${arg_MAY_SKIP})
  endif()
  add_test(NAME ${name} COMMAND ${ISOMETRY_RUN_UNITTEST} ${module} ${except} WORKING_DIRECTORY ${dir})
  set(names ${name})
  foreach(case IN LISTS arg_MAY_SKIP)
    add_test(NAME ${name}.${case} COMMAND ${ISOMETRY_RUN_UNITTEST} ${module} --only ${case}
             WORKING_DIRECTORY ${dir})
    list(APPEND names ${name}.${case})
  endforeach()
  set_tests_properties(${names} PROPERTIES
    ENVIRONMENT "${arg_ENVIRONMENT};ISOMETRY_DAEMON_CONFIG=$<TARGET_FILE:isometry_daemon_config>;PYTHONDONTWRITEBYTECODE=1;PYTHONFAULTHANDLER=1"
    SKIP_RETURN_CODE 77 TIMEOUT ${arg_TIMEOUT} COST ${arg_TIMEOUT})
endfunction()
