# Isolation between users (issue 15): root-only (it runs a process as nobody).
uroce_script_test(isolation_other_user LABEL integration TIMEOUT 60
                  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/other_user_test.sh)
# It runs Debian's programs (ibv_devices, ibv_rc_pingpong): not in the
# sanitizer tree, as the other `debian` tests.
set_property(TEST isolation_other_user APPEND PROPERTY LABELS debian)
