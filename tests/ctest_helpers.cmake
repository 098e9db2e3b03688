# How our tests become ctest entries; included by the top CMakeLists.txt
# before any folder registers a test.
#
# A test that cannot run on this machine (no root, no netns, no device)
# says why and exits 77, which ctest reports as "Skipped", never "Passed".
# A case that may skip therefore runs in a ctest entry of its own: a
# Catch2 case tagged [may_skip][NAME] (and calling ISOMETRY_SKIP, in
# unit/skip.h) becomes the entry BINARY.NAME, found here in the source; the
# binary's main entry runs every other case.
function(isometry_catch_test name source)
  add_test(NAME ${name} COMMAND ${name} "~[may_skip]")
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${source})
  file(STRINGS ${source} tagged REGEX "\\[may_skip\\]\\[[A-Za-z0-9_]+\\]")
  foreach(line IN LISTS tagged)
    string(REGEX MATCH "\\[may_skip\\]\\[([A-Za-z0-9_]+)\\]" _ "${line}")
    add_test(NAME ${name}.${CMAKE_MATCH_1} COMMAND ${name} "[${CMAKE_MATCH_1}]")
    set_tests_properties(${name}.${CMAKE_MATCH_1} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  endforeach()
endfunction()

# A unittest module run by Debian's python3 through run_unittest.py: 77
# when a case skipped. Its TIMEOUT is also its COST, so that ctest -j
# starts the long cluster modules first instead of leaving them for a tail
# at the end (ctest has no timings of its own on a fresh clone). MAY_SKIP names cases that run in an entry of their
# own (NAME.CASE) so the others still report "Passed".
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
    ENVIRONMENT "${arg_ENVIRONMENT};ISOMETRY_DAEMON_CONFIG=$<TARGET_FILE:isometry_daemon_config>;PYTHONDONTWRITEBYTECODE=1"
    SKIP_RETURN_CODE 77 TIMEOUT ${arg_TIMEOUT} COST ${arg_TIMEOUT})
endfunction()
