# Install layout beyond the library and the daemon (src/CMakeLists.txt puts
# libibverbs.so.1 in <libdir>/uroce and uroced in <libexecdir>/uroce):
#   <includedir>/uroce/uroce.h     version and environment-variable names
#   <libdir>/pkgconfig/uroce.pc    flags to build against the drop-in library

# The header's version is written by hand; keep it equal to the project's.
file(STRINGS ${PROJECT_SOURCE_DIR}/include/uroce/uroce.h UROCE_HEADER_VERSION
     REGEX "^#define UROCE_VERSION_STRING ")
if(NOT UROCE_HEADER_VERSION MATCHES "\"${PROJECT_VERSION}\"")
  message(FATAL_ERROR "include/uroce/uroce.h says ${UROCE_HEADER_VERSION}, "
                      "project version is ${PROJECT_VERSION}")
endif()

install(FILES ${PROJECT_SOURCE_DIR}/include/uroce/uroce.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/uroce)

# uroce.pc is written when installing, not when configuring, so that
# `cmake --install build --prefix P` gets P in it. CMAKE_INSTALL_PREFIX inside
# install(CODE) is the prefix of that install run (without DESTDIR).
set(UROCE_PC_OUT ${PROJECT_BINARY_DIR}/pkgconfig/uroce.pc)
install(CODE "
  set(UROCE_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(CMAKE_INSTALL_LIBEXECDIR \"${CMAKE_INSTALL_LIBEXECDIR}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/uroce.pc.in\" \"${UROCE_PC_OUT}\" @ONLY)
")
install(FILES ${UROCE_PC_OUT} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
