# Integration tier, Debian's fio 3.33 (package fio) with its rdma engine
# (librdmacm + libibverbs: uroce's) on uroce_lo, one server/client pair per
# mode of the engine: RDMA WRITE, RDMA READ and SEND (run_fio.sh says what
# passes in each). Labels: integration + debian (the sanitizer build excludes
# `debian`: those binaries are not instrumented).
#
# Ports: UROCE_TEST_PORT_BASE (tests/CMakeLists.txt) + 502..505, the RDMA CM
# port each server listens on.
set(UROCE_FIO_DIR ${CMAKE_CURRENT_LIST_DIR})
set(offset 502)
foreach(mode write read send)
  math(EXPR port "${UROCE_TEST_PORT_BASE} + ${offset}")
  uroce_script_test(fio_rdma_${mode} LABEL integration TIMEOUT 90
                    COMMAND bash ${UROCE_FIO_DIR}/run_fio.sh ${port} ${mode})
  set_property(TEST fio_rdma_${mode} APPEND PROPERTY LABELS debian)
  math(EXPR offset "${offset} + 1")
endforeach()

# SEND with a server that pre-posts a receive for every block (16 MiB / 64 KiB):
# must complete.
math(EXPR port "${UROCE_TEST_PORT_BASE} + 505")
uroce_script_test(fio_rdma_send_preposted LABEL integration TIMEOUT 90
                  COMMAND bash ${UROCE_FIO_DIR}/run_fio.sh ${port} send --server-iodepth 256)
set_property(TEST fio_rdma_send_preposted APPEND PROPERTY LABELS debian)
