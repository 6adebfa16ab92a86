# tdslFunctions.cmake: tdsl_add_library(), compiling .tdsl files at build
# time into a static library target (spec §10).
#
# Needs, before it is included: an executable target tdsl::tdslc and a
# library target tdsl::runtime. The source tree makes them ALIAS targets of
# tdslc and tdsl_runtime (top-level CMakeLists.txt); the installed
# tdslConfig.cmake makes them IMPORTED targets of P/bin/tdslc and
# P/lib/libtdsl_runtime.a. Both then include this same file.
#
# Produces:
#   tdsl_add_library(NAME SOURCES a.tdsl ... [TARGET t] [OPTIONS ...])
# For each source s.tdsl (relative to the current source dir) it runs, at
# build time,
#   tdslc s.tdsl -o <bin>/s.o --target=<t> <OPTIONS>
# where <bin> is ${CMAKE_CURRENT_BINARY_DIR}/tdsl/NAME, and rebuilds when
# the source or tdslc changes. NAME becomes a static library of those
# objects; it carries <bin> (holding the generated s.h) as a PUBLIC include
# directory and links tdsl::runtime PUBLIC, so
#   target_link_libraries(app PRIVATE NAME)
# is all an application needs before #include "s.h". TARGET defaults to
# host. OPTIONS go to tdslc unchanged (e.g. -O3, --kernel=K); any --emit
# given there must keep obj and header, the outputs the build expects.

include_guard(GLOBAL)

function(tdsl_add_library name)
  cmake_parse_arguments(PARSE_ARGV 1 TDSL "" "TARGET" "SOURCES;OPTIONS")
  if(TDSL_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tdsl_add_library(${name}): unexpected arguments "
            "'${TDSL_UNPARSED_ARGUMENTS}'; expected SOURCES a.tdsl ... "
            "[TARGET t] [OPTIONS ...]")
  endif()
  if(NOT TDSL_SOURCES)
    message(FATAL_ERROR "tdsl_add_library(${name}): no SOURCES given")
  endif()
  if(NOT TARGET tdsl::tdslc OR NOT TARGET tdsl::runtime)
    message(FATAL_ERROR "tdsl_add_library(${name}): targets tdsl::tdslc and "
            "tdsl::runtime are missing; use find_package(tdsl)")
  endif()
  if(NOT TDSL_TARGET)
    set(TDSL_TARGET host)
  endif()

  set(gen_dir "${CMAKE_CURRENT_BINARY_DIR}/tdsl/${name}")
  file(MAKE_DIRECTORY "${gen_dir}")
  set(outputs "")
  set(objects "")
  set(stems "")
  foreach(src IN LISTS TDSL_SOURCES)
    get_filename_component(abs "${src}" ABSOLUTE
                           BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(stem "${src}" NAME_WE)
    # One directory per library: two sources with one stem would write
    # the same s.o and s.h.
    if(stem IN_LIST stems)
      message(FATAL_ERROR "tdsl_add_library(${name}): two sources named "
              "'${stem}'; their generated ${stem}.o and ${stem}.h would clash")
    endif()
    list(APPEND stems "${stem}")
    set(obj "${gen_dir}/${stem}.o")
    set(hdr "${gen_dir}/${stem}.h")
    # The generator expression in COMMAND gives the target-level ordering
    # (build tdslc first in the source tree); the one in DEPENDS reruns the
    # command when the tdslc binary changes.
    add_custom_command(
      OUTPUT "${obj}" "${hdr}"
      COMMAND "$<TARGET_FILE:tdsl::tdslc>" "${abs}" -o "${obj}"
              "--target=${TDSL_TARGET}" ${TDSL_OPTIONS}
      DEPENDS "${abs}" "$<TARGET_FILE:tdsl::tdslc>"
      WORKING_DIRECTORY "${gen_dir}"
      COMMENT "tdslc ${src} -> ${name}/${stem}.o (--target=${TDSL_TARGET})"
      VERBATIM)
    list(APPEND outputs "${obj}" "${hdr}")
    list(APPEND objects "${obj}")
  endforeach()

  set_source_files_properties(${objects} PROPERTIES
    EXTERNAL_OBJECT TRUE GENERATED TRUE)
  add_library(${name} STATIC ${outputs})
  # No compiled sources: CMake needs to be told how to archive and link.
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("C" IN_LIST languages)
    set_target_properties(${name} PROPERTIES LINKER_LANGUAGE C)
  else()
    set_target_properties(${name} PROPERTIES LINKER_LANGUAGE CXX)
  endif()
  target_include_directories(${name} PUBLIC "$<BUILD_INTERFACE:${gen_dir}>")
  target_link_libraries(${name} PUBLIC tdsl::runtime)
endfunction()
