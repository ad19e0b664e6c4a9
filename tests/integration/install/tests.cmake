# Integration tier: `cmake --install` into a temporary prefix, then the
# installed library, daemon, header and pkg-config file are used without the
# build tree. Labelled `debian` too: it runs Debian's ibv_devices, which the
# sanitizer build cannot load an instrumented library into.
uroce_script_test(install_layout LABEL integration TIMEOUT 120
                  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_test.sh
                          ${CMAKE_COMMAND} ${CMAKE_BINARY_DIR})
set_property(TEST install_layout APPEND PROPERTY LABELS debian)
