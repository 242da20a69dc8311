# Installation and packaging: `cmake --install <build> [--prefix P]` puts
#
#   P/lib/libtopk.so*                       the runtime (C++ and C API)
#   P/include/topk/{topk.hpp,topk.h,status.hpp}   the public headers, nothing else
#   P/lib/cmake/topk/topk{Config,ConfigVersion,Targets*}.cmake
#                                           find_package(topk) -> topk::topk
#   P/lib/pkgconfig/topk.pc                 pkg-config --cflags --libs topk
#   P/bin/topk-tune, P/bin/topk-tune-worker the CLI and its worker (when built)
#   P/share/topk-tune/python/topk_tune/     the ctypes Python package
#   P/share/topk-tune/examples/             the consumer examples
#
# (lib is CMAKE_INSTALL_LIBDIR, which is "lib" unless the prefix is /usr.)
# Everything is relocatable: the CMake package and the .pc file locate the
# prefix from their own path, the Python package finds the library through a
# path relative to itself, and the executables use an $ORIGIN rpath.
#
# The tests at the end (label cpu) install this build into a temporary prefix
# and build examples/ against it, and run the Python package's unit tests.

if(NOT TARGET topk)
  return()
endif()

include(CMakePackageConfigHelpers)

set(TOPK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/topk CACHE STRING
    "Where the CMake package files of topk are installed (relative to the prefix)")
set(TOPK_INSTALL_PYTHONDIR ${CMAKE_INSTALL_DATADIR}/topk-tune/python CACHE STRING
    "Where the topk_tune Python package is installed (relative to the prefix)")
mark_as_advanced(TOPK_INSTALL_CMAKEDIR TOPK_INSTALL_PYTHONDIR)

# --- properties of the installed library --------------------------------------

# The public headers need C++17 (std::optional, std::string_view); say so in
# the exported target so that consumers get at least that standard.
set_property(TARGET topk APPEND PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_17)

# libtopk.so needs libnvrtc. Where the toolkit is not in the loader's default
# path (the usual /usr/local/cuda install), the installed library finds it
# through its rpath, after $ORIGIN; LD_LIBRARY_PATH still comes first. The
# linker also reads this rpath when a consumer links against libtopk, so the
# consumer does not need -rpath-link for NVRTC either.
if(TOPK_NVRTC_LIBRARY)
  get_filename_component(topk_nvrtc_dir "${TOPK_NVRTC_LIBRARY}" DIRECTORY)
  get_target_property(topk_install_rpath topk INSTALL_RPATH)
  if(NOT topk_install_rpath)
    set(topk_install_rpath "\$ORIGIN")
  endif()
  if(NOT topk_nvrtc_dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    list(APPEND topk_install_rpath "${topk_nvrtc_dir}")
    list(REMOVE_DUPLICATES topk_install_rpath)
    set_target_properties(topk PROPERTIES INSTALL_RPATH "${topk_install_rpath}")
  endif()
endif()

# --- library, headers, executables --------------------------------------------

# topk links its internal static libraries (topk_jit, topk_cache,
# topk_generator) PRIVATE; for a SHARED library CMake keeps those out of
# INTERFACE_LINK_LIBRARIES, so the export set needs nothing but topk. The
# check below fails the configure step, rather than the install, should that
# ever change.
get_target_property(topk_iface_libs topk INTERFACE_LINK_LIBRARIES)
if(topk_iface_libs)
  foreach(lib IN LISTS topk_iface_libs)
    if(lib MATCHES "^topk_" OR lib MATCHES "LINK_ONLY:topk_")
      message(FATAL_ERROR "topk's INTERFACE_LINK_LIBRARIES names the internal target '${lib}'; "
                          "link internal libraries PRIVATE (or wrap them in $<BUILD_INTERFACE:...>) "
                          "so that the installed topk::topk does not reference them")
    endif()
  endforeach()
endif()

install(TARGETS topk EXPORT topkTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT devel
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel)
# (No INCLUDES DESTINATION: topk's INSTALL_INTERFACE include directory
# already says where the headers are.)

# Only the three public headers: topk.hpp includes status.hpp and nothing
# else of ours; topk.h stands alone.
install(FILES
  ${PROJECT_SOURCE_DIR}/include/topk/topk.hpp
  ${PROJECT_SOURCE_DIR}/include/topk/topk.h
  ${PROJECT_SOURCE_DIR}/include/topk/status.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/topk COMPONENT devel)

foreach(exe topk-tune topk-tune-worker)
  if(TARGET ${exe})
    install(TARGETS ${exe} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  endif()
endforeach()

# --- CMake package --------------------------------------------------------------

install(EXPORT topkTargets
  NAMESPACE topk::
  FILE topkTargets.cmake
  DESTINATION ${TOPK_INSTALL_CMAKEDIR}
  COMPONENT devel)

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/topkConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/topkConfig.cmake
  INSTALL_DESTINATION ${TOPK_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR TOPK_INSTALL_PYTHONDIR)
# 0.x: a minor version may change the API; 0.1.3 satisfies a request for 0.1.
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/topkConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/topkConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/topkConfigVersion.cmake
  DESTINATION ${TOPK_INSTALL_CMAKEDIR} COMPONENT devel)

# --- pkg-config -------------------------------------------------------------------

# prefix is computed from the .pc file's own location (${pcfiledir}), so an
# install with `cmake --install --prefix elsewhere` still works.
set(topk_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TOPK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(TOPK_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH topk_pc_up /prefix/${topk_pc_dir} /prefix)
  string(REGEX REPLACE "/$" "" topk_pc_up "${topk_pc_up}")
  set(TOPK_PC_PREFIX "\${pcfiledir}/${topk_pc_up}")
  set(TOPK_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(TOPK_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(TOPK_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/topk.pc.in ${CMAKE_CURRENT_BINARY_DIR}/topk.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/topk.pc DESTINATION ${topk_pc_dir} COMPONENT devel)

# --- Python package and examples --------------------------------------------------------

if(EXISTS ${PROJECT_SOURCE_DIR}/python/topk_tune/__init__.py)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/topk_tune
    DESTINATION ${TOPK_INSTALL_PYTHONDIR} COMPONENT python
    PATTERN __pycache__ EXCLUDE
    PATTERN "*.pyc" EXCLUDE
    PATTERN _lib EXCLUDE)
  # Where libtopk lies relative to the installed package, so that the package
  # finds the library of its own install (and --prefix relocation keeps
  # working): share/topk-tune/python/topk_tune -> ../../../../lib.
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${TOPK_INSTALL_PYTHONDIR}")
    set(TOPK_PY_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
  else()
    file(RELATIVE_PATH TOPK_PY_LIBDIR /prefix/${TOPK_INSTALL_PYTHONDIR}/topk_tune /prefix/${CMAKE_INSTALL_LIBDIR})
  endif()
  file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/topk_tune_install/_install.py CONTENT
"# Written by cmake/Install.cmake at install time.
# The directory of libtopk, relative to this package's directory (or absolute).
LIBDIR = \"@TOPK_PY_LIBDIR@\"
SONAME = \"libtopk.so.0\"
" @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/topk_tune_install/_install.py
    DESTINATION ${TOPK_INSTALL_PYTHONDIR}/topk_tune COMPONENT python)
endif()

install(FILES
  ${PROJECT_SOURCE_DIR}/examples/CMakeLists.txt
  ${PROJECT_SOURCE_DIR}/examples/consumer.cpp
  ${PROJECT_SOURCE_DIR}/examples/consumer_c.c
  DESTINATION ${CMAKE_INSTALL_DATADIR}/topk-tune/examples COMPONENT devel
  OPTIONAL)

# --- tests ---------------------------------------------------------------------------

if(TOPK_BUILD_TESTS)
  # Installs this build into a temporary prefix, builds examples/ against it
  # (find_package and pkg-config) and runs both consumers. Without a GPU they
  # take their "skipped: no GPU" path and exit 0.
  add_test(NAME install_test
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/install_test.sh
            ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/tests/tmp/install_test
            ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER} ${CUDAToolkit_BIN_DIR})
  set_tests_properties(install_test PROPERTIES LABELS cpu TIMEOUT 300)

  # scripts/setup.sh installs torch (for the operators' fake-tensor tests)
  # as a Debian package, which only the system interpreter sees: prefer it
  # over whatever python3 comes first on PATH (a pyenv or conda one).
  find_program(TOPK_SYSTEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(TOPK_SYSTEM_PYTHON)
    set(Python3_EXECUTABLE ${TOPK_SYSTEM_PYTHON})
  endif()
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND AND EXISTS ${PROJECT_SOURCE_DIR}/python/tests)
    # The pure-Python tests (no torch, no GPU); unittest so that pytest is
    # not needed. GPU tests in python/tests/gpu_*.py are run by hand.
    add_test(NAME python_test
      COMMAND ${Python3_EXECUTABLE} -m unittest discover -s tests -p "test_*.py"
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/python)
    set_tests_properties(python_test PROPERTIES
      LABELS cpu TIMEOUT 300
      ENVIRONMENT "TOPK_LIBRARY=$<TARGET_FILE:topk>;PYTHONDONTWRITEBYTECODE=1;TOPK_TUNE_DB=")
  endif()
endif()
