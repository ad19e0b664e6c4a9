# The Debian package: `cpack -G DEB` in a build tree writes
# uroce_<version>_amd64.deb (tests/integration/debian_package checks it).
# Contents, under /usr: lib/uroce/{libibverbs,librdmacm}.so.1 (a private
# directory that /etc/ld.so.conf.d/00-uroce.conf puts ahead of rdma-core's, so
# every program loads uroce's), libexec/uroce/uroced (which the library finds
# relative to itself), bin/uroce, include/uroce/uroce.h,
# lib/pkgconfig/uroce.pc, and the man pages uroce(1), uroced(8), uroce(7).

install(FILES ${PROJECT_SOURCE_DIR}/man/uroce.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/man/uroced.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${PROJECT_SOURCE_DIR}/man/uroce.7 DESTINATION ${CMAKE_INSTALL_MANDIR}/man7)

set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Only the package writes outside its prefix: a `cmake --install --prefix P`
# leaves /etc alone (the component is not installed by default).
set(UROCE_DEB_LIBDIR ${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/uroce)
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/uroce.conf.in ${PROJECT_BINARY_DIR}/debian/uroce.conf @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/debian/uroce.conf DESTINATION /etc/ld.so.conf.d RENAME 00-uroce.conf
        COMPONENT deb EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME uroce)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "uroce developers <uroce@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "RDMA NIC in software, in user space (drop-in libibverbs and librdmacm)")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "uroce gives programs written against the verbs API one soft RoCE device per network interface,\n"
       "with no RDMA hardware and no kernel module: processes of one host talk through shared memory,\n"
       "hosts speak RoCE v2 over UDP and interoperate with Soft-RoCE (rdma_rxe) and RoCE NICs.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
# What the binaries link (ldd): the C/C++ runtime, zlib and ISA-L for the
# ICRC, libpcap for `uroce capture` (the library opens it only when capturing),
# libbpf for uroced's XDP program, libnl for the AF_XDP link's neighbours
# (docs/afxdp-link.md).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6 (>= 2.36), libstdc++6 (>= 12), libgcc-s1, zlib1g, libpcap0.8, libbpf1, libnl-3-200, libnl-route-3-200")
if(ISAL_FOUND)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libisal2")
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/debian/postinst ${PROJECT_SOURCE_DIR}/cmake/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# One package of every component, the /etc file's included.
set(CPACK_COMPONENTS_ALL Unspecified deb)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
include(CPack)
