# `uroce capture` (tools/uroce_main.cc) around an unmodified ibv_rc_pingpong
# pair over UROCE_LINK=udp on 127.0.0.1; the merged pcap judged by
# ../shared/wire/roce_check.py and tshark (that step skipped without
# ../shared). Labels: integration + debian.
# TCP ports UROCE_TEST_PORT_BASE + 90 and 91 (the pairs' address exchange).
math(EXPR uroce_capture_port "${UROCE_TEST_PORT_BASE} + 90")
uroce_script_test(capture_cli LABEL integration TIMEOUT 120
                  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/capture_cli.sh $<TARGET_FILE:uroce> ${uroce_capture_port})
set_property(TEST capture_cli APPEND PROPERTY LABELS debian)
set_tests_properties(capture_cli PROPERTIES RESOURCE_LOCK uroce_udp_loopback)
