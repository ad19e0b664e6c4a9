# The Debian package (cmake/package.cmake): built with cpack, installed and
# removed with dpkg in a private mount namespace (root; skipped otherwise).
# Labelled `debian`: it runs Debian's binaries on the package's library,
# which the sanitizer tree's instrumented build cannot be loaded into.
math(EXPR UROCE_DEB_TEST_PORT "${UROCE_TEST_PORT_BASE} + 500")
add_test(NAME deb_package
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/deb_package_test.sh ${CMAKE_CPACK_COMMAND} ${CMAKE_BINARY_DIR}
                 ${UROCE_DEB_TEST_PORT})
set_tests_properties(deb_package PROPERTIES LABELS "integration;debian" TIMEOUT 240 SKIP_RETURN_CODE 77)
