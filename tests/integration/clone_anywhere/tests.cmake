# A clone anywhere passes (issue 30): the other-user tests run again from a
# copy of the build's library and uroced and of tests/integration laid out
# under a mode-0700 directory, as a clone in /root is (the script says why
# a copy and not a clone and rebuild). Root only (77 = skipped otherwise).
# Labelled `debian` (Debian's programs on our library: not in the
# sanitizer tree) and given both processors, as the netns tests it runs.
uroce_script_test(clone_anywhere LABEL integration TIMEOUT 180
                  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/clone_anywhere_test.sh ${PROJECT_SOURCE_DIR})
set_property(TEST clone_anywhere APPEND PROPERTY LABELS debian)
set_tests_properties(clone_anywhere PROPERTIES PROCESSORS 2)
