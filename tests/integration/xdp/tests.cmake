# The AF_XDP link's pieces against the real kernel, inside a network
# namespace the test makes for itself (unshare: it goes when the test
# ends): uroced's XDP program steers RoCE v2 frames by destination QP to an
# AF_XDP socket and leaves everything else to the kernel; the attachment
# ends with its owner; uroced lends an interface to one process at a time;
# the link's frames carry RoCE packets to and from the UDP-socket link.
# Root only (skipped otherwise).
uroce_gtest(xdp_link_test LABEL integration TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/xdp_link_test.cc)
target_link_libraries(xdp_link_test PRIVATE uroce_daemon)
set_property(TEST xdp_link_test APPEND PROPERTY LABELS netns)
