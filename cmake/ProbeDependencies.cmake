# What libpodscope_probe.so links statically: Abseil, protobuf's lite runtime and RE2, built from
# Debian's own source packages (the same versions as the -dev packages the rest of podscope
# uses) with position-independent code and hidden visibility.
#
# Why not Debian's static archives: they are compiled as position-independent executables, whose
# thread-local variables use the local-exec model (R_X86_64_TPOFF32), which a shared library
# cannot hold; the linker refuses them. Why not Debian's shared libraries: the probe is loaded
# into training processes whose images have neither Debian 12's Abseil nor its protobuf, and a
# framework's own copies must not meet ours. Built here, every symbol stays inside the probe.
#
# Abseil keeps Debian's configuration (its base/options.h: absl's own string_view, optional,
# any and variant) so the probe's code compiles exactly as it does against the -dev headers,
# under an inline namespace of its own.
#
# The tarballs are fetched once from the Debian mirror apt uses on this machine
# (scripts/debian_mirror.sh; PODSCOPE_DEBIAN_POOL overrides the pool), checked against the
# SHA-256 sums of Debian's bookworm source index, and kept in PODSCOPE_SOURCE_CACHE for later
# builds and clones.
include(ExternalProject)

if(NOT PODSCOPE_DEBIAN_POOL)
  execute_process(COMMAND bash "${PROJECT_SOURCE_DIR}/scripts/debian_mirror.sh"
                  OUTPUT_VARIABLE podscope_debian_mirror OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE podscope_mirror_result)
  if(NOT podscope_mirror_result EQUAL 0)
    message(FATAL_ERROR "No Debian mirror for the probe's dependencies: apt's sources name none "
                        "(set PODSCOPE_DEBIAN_MIRROR, or PODSCOPE_DEBIAN_POOL)")
  endif()
  set(PODSCOPE_DEBIAN_POOL "${podscope_debian_mirror}/pool/main" CACHE STRING
      "Where Debian's source packages for the probe's dependencies are fetched from")
endif()
if(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(podscope_default_source_cache "$ENV{XDG_CACHE_HOME}/podscope/sources")
else()
  set(podscope_default_source_cache "$ENV{HOME}/.cache/podscope/sources")
endif()
set(PODSCOPE_SOURCE_CACHE "${podscope_default_source_cache}" CACHE PATH
    "Where fetched source tarballs are kept between builds")

set(podscope_probe_deps_args
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
  -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
  -DCMAKE_CXX_STANDARD=20
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  -DCMAKE_C_VISIBILITY_PRESET=hidden
  -DCMAKE_CXX_VISIBILITY_PRESET=hidden
  -DCMAKE_VISIBILITY_INLINES_HIDDEN=ON
  -DBUILD_SHARED_LIBS=OFF
  -DBUILD_TESTING=OFF)
if(CCACHE_PROGRAM)
  list(APPEND podscope_probe_deps_args -DCMAKE_C_COMPILER_LAUNCHER=${CCACHE_PROGRAM}
       -DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE_PROGRAM})
endif()

# Debian's Abseil options, under the probe's own inline namespace.
file(READ /usr/include/absl/base/options.h podscope_absl_options)
string(REGEX REPLACE "#define ABSL_OPTION_INLINE_NAMESPACE_NAME [a-z0-9_]+"
       "#define ABSL_OPTION_INLINE_NAMESPACE_NAME podscope_probe" podscope_absl_options
       "${podscope_absl_options}")
if(NOT podscope_absl_options MATCHES "NAMESPACE_NAME podscope_probe")
  message(FATAL_ERROR "/usr/include/absl/base/options.h has no inline namespace to rename")
endif()
set(podscope_absl_options_file ${CMAKE_BINARY_DIR}/probe-deps/absl_options.h)
file(WRITE ${podscope_absl_options_file} "${podscope_absl_options}")

# The Abseil libraries the probe's code reaches, in no particular order (linked as a group).
set(podscope_probe_absl_libs
  base/libabsl_base base/libabsl_log_severity base/libabsl_malloc_internal
  base/libabsl_raw_logging_internal base/libabsl_spinlock_wait base/libabsl_strerror
  base/libabsl_throw_delegate
  container/libabsl_hashtablez_sampler container/libabsl_raw_hash_set
  debugging/libabsl_debugging_internal debugging/libabsl_demangle_internal
  debugging/libabsl_stacktrace debugging/libabsl_symbolize
  hash/libabsl_city hash/libabsl_hash hash/libabsl_low_level_hash
  numeric/libabsl_int128
  profiling/libabsl_exponential_biased
  status/libabsl_status status/libabsl_statusor
  strings/libabsl_cord strings/libabsl_cord_internal strings/libabsl_cordz_functions
  strings/libabsl_cordz_handle strings/libabsl_cordz_info strings/libabsl_str_format_internal
  strings/libabsl_strings strings/libabsl_strings_internal
  synchronization/libabsl_graphcycles_internal synchronization/libabsl_synchronization
  time/libabsl_civil_time time/libabsl_time time/libabsl_time_zone
  types/libabsl_bad_optional_access types/libabsl_bad_variant_access)
set(podscope_probe_absl_dir ${CMAKE_BINARY_DIR}/probe-deps/absl)
set(podscope_probe_absl_archives)
set(podscope_probe_absl_targets)
foreach(lib IN LISTS podscope_probe_absl_libs)
  list(APPEND podscope_probe_absl_archives ${podscope_probe_absl_dir}/build/absl/${lib}.a)
  string(REGEX REPLACE "^.*/libabsl_" "" target "${lib}")
  list(APPEND podscope_probe_absl_targets ${target})
endforeach()
ExternalProject_Add(probe_dep_absl
  URL ${PODSCOPE_DEBIAN_POOL}/a/abseil/abseil_20220623.1.orig.tar.gz
  URL_HASH SHA256=abfe2897f3a30edaa74bc34365afe3c2a3cd012091a97dc7e008f7016adcd5fe
  DOWNLOAD_DIR ${PODSCOPE_SOURCE_CACHE}
  DOWNLOAD_EXTRACT_TIMESTAMP OFF
  PREFIX ${podscope_probe_absl_dir}
  SOURCE_DIR ${podscope_probe_absl_dir}/source
  BINARY_DIR ${podscope_probe_absl_dir}/build
  PATCH_COMMAND ${CMAKE_COMMAND} -E copy ${podscope_absl_options_file} <SOURCE_DIR>/absl/base/options.h
  CMAKE_ARGS ${podscope_probe_deps_args} -DABSL_PROPAGATE_CXX_STD=ON
  BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> --target ${podscope_probe_absl_targets}
  INSTALL_COMMAND ""
  BUILD_BYPRODUCTS ${podscope_probe_absl_archives})

set(podscope_probe_protobuf_dir ${CMAKE_BINARY_DIR}/probe-deps/protobuf)
ExternalProject_Add(probe_dep_protobuf
  URL ${PODSCOPE_DEBIAN_POOL}/p/protobuf/protobuf_3.21.12.orig.tar.gz
  URL_HASH SHA256=930c2c3b5ecc6c9c12615cf5ad93f1cd6e12d0aba862b572e076259970ac3a53
  DOWNLOAD_DIR ${PODSCOPE_SOURCE_CACHE}
  DOWNLOAD_EXTRACT_TIMESTAMP OFF
  PREFIX ${podscope_probe_protobuf_dir}
  SOURCE_DIR ${podscope_probe_protobuf_dir}/source
  BINARY_DIR ${podscope_probe_protobuf_dir}/build
  CMAKE_ARGS ${podscope_probe_deps_args} -Dprotobuf_BUILD_TESTS=OFF
             -Dprotobuf_BUILD_PROTOC_BINARIES=OFF -Dprotobuf_WITH_ZLIB=OFF
             -Dprotobuf_BUILD_SHARED_LIBS=OFF
  BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> --target libprotobuf-lite
  INSTALL_COMMAND ""
  BUILD_BYPRODUCTS ${podscope_probe_protobuf_dir}/build/libprotobuf-lite.a)

# RE2's generated tables are made again from Debian's Unicode data (cmake/Re2Tables.cmake).
find_program(PODSCOPE_PROBE_PERL perl REQUIRED)
find_program(PODSCOPE_PROBE_PYTHON python3 REQUIRED)
set(podscope_probe_re2_dir ${CMAKE_BINARY_DIR}/probe-deps/re2)
ExternalProject_Add(probe_dep_re2
  URL ${PODSCOPE_DEBIAN_POOL}/r/re2/re2_20220601+dfsg.orig.tar.xz
  URL_HASH SHA256=3bc61251da3b0b97be40a8a127818c517c62516e4eda11fc901d29496663df54
  DOWNLOAD_DIR ${PODSCOPE_SOURCE_CACHE}
  DOWNLOAD_EXTRACT_TIMESTAMP OFF
  PREFIX ${podscope_probe_re2_dir}
  SOURCE_DIR ${podscope_probe_re2_dir}/source
  BINARY_DIR ${podscope_probe_re2_dir}/build
  PATCH_COMMAND ${CMAKE_COMMAND} -DRE2_SOURCE=<SOURCE_DIR> -DPYTHON=${PODSCOPE_PROBE_PYTHON}
                -DPERL=${PODSCOPE_PROBE_PERL} -P ${PROJECT_SOURCE_DIR}/cmake/Re2Tables.cmake
  CMAKE_ARGS ${podscope_probe_deps_args} -DRE2_BUILD_TESTING=OFF
  BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> --target re2
  INSTALL_COMMAND ""
  BUILD_BYPRODUCTS ${podscope_probe_re2_dir}/build/libre2.a)

# What a target built against these needs: their headers ahead of Debian's in /usr/include, and
# the archives, linked as one group.
set(PODSCOPE_PROBE_DEPS_INCLUDE_DIRS
  ${podscope_probe_absl_dir}/source
  ${podscope_probe_protobuf_dir}/source/src
  ${podscope_probe_re2_dir}/source)
set(PODSCOPE_PROBE_DEPS_ARCHIVES
  ${podscope_probe_protobuf_dir}/build/libprotobuf-lite.a
  ${podscope_probe_re2_dir}/build/libre2.a
  ${podscope_probe_absl_archives})
set(PODSCOPE_PROBE_DEPS_TARGETS probe_dep_absl probe_dep_protobuf probe_dep_re2)
