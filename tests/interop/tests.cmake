# Interoperability with the Linux kernel's Soft-RoCE (rdma_rxe) in a qemu
# guest: scripts/test.sh runs rxe_interop.sh, no CTest test here (the guest
# needs root, ../shared's harness and ~10 minutes; see rxe_interop.sh).
#
# What it builds: rxe_mcast_peer, the multicast program of the two-host tests
# (../integration/netns/mcast_peer.cc) linked against Debian's libibverbs
# instead of uroce's, so that one binary runs on kernel rxe in the guest (the
# harness copies it and its libraries into the guest's image) and, with
# uroce's library first on LD_LIBRARY_PATH, on uroce on the host.
find_library(UROCE_DEBIAN_IBVERBS NAMES ibverbs
             PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE} /usr/lib NO_DEFAULT_PATH)
if(UROCE_DEBIAN_IBVERBS AND NOT UROCE_SANITIZE)
  add_executable(rxe_mcast_peer ${PROJECT_SOURCE_DIR}/tests/integration/netns/mcast_peer.cc)
  target_include_directories(rxe_mcast_peer PRIVATE ${IBVERBS_INCLUDE_DIR})
  target_link_libraries(rxe_mcast_peer PRIVATE ${UROCE_DEBIAN_IBVERBS})
endif()
