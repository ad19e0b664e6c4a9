# Isolation between users (issue 15): root-only (it runs a process as nobody).
uroce_script_test(isolation_other_user LABEL integration TIMEOUT 60
                  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/other_user_test.sh)
# It runs Debian's programs (ibv_devices, ibv_rc_pingpong): not in the
# sanitizer tree, as the other `debian` tests.
set_property(TEST isolation_other_user APPEND PROPERTY LABELS debian)

# uroced against a hostile client of its own user: malformed messages, wrong
# descriptors, 10,000 connections, per-client limits (any user may run it).
uroce_gtest(isolation_abusive_client_test LABEL integration TIMEOUT 120
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/abusive_client_test.cc)
add_dependencies(isolation_abusive_client_test uroced)
