# Unity builds: the files of a target compiled in batches, each batch one translation unit.
#
# A file of ours spends most of its compile time on what its neighbours spend it on too:
# parsing the same headers (Abseil, protobuf, fmt, GoogleTest, the code it calls) and, at -O2,
# generating code for the same inline functions and templates, once per file. Compiled as one,
# a batch parses and generates them once: about half the compile CPU of the product's libraries
# and of the test programs.
#
# The batch files are written here rather than by CMake's UNITY_BUILD, whose files name each
# source by its absolute path, so that a clone in another folder hits ccache: each names its
# sources relative to the checkout, found through the include path (-I<checkout>).
#
# What a batch changes, and how it stays correct:
#   - the files of a batch share one anonymous namespace and one set of file-scope `using`
#     directives: a name a file keeps to itself must differ from those of its batch mates (the
#     compiler says so when two collide);
#   - a file can compile only because a batch mate included what it forgot: a build with
#     -DPODSCOPE_UNITY=OFF compiles each file alone;
#   - a file with options of its own (COMPILE_OPTIONS or COMPILE_DEFINITIONS on the source),
#     a generated file and a file named in the target's PODSCOPE_UNITY_ALONE property are
#     compiled alone: the last keeps a heavy file (Beast's HTTP session over one stream type)
#     from making a batch of over a minute.
#
# podscope_unity(TARGET...): batches each target's sources of at most its PODSCOPE_UNITY_BATCH
# property's files (PODSCOPE_UNITY_BATCH, the cache variable, where unset), into
# <build>/unity/<the target's folder>/<target>_<n>.cc.

if(NOT PODSCOPE_UNITY_BATCH MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "PODSCOPE_UNITY_BATCH must be a whole number of files, 1 or more "
                      "(it is \"${PODSCOPE_UNITY_BATCH}\")")
endif()

function(podscope_unity)
  foreach(target IN LISTS ARGN)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(dir ${target} SOURCE_DIR)
    get_target_property(sources ${target} SOURCES)
    get_target_property(alone ${target} PODSCOPE_UNITY_ALONE)
    if(NOT alone)
      set(alone "")
    endif()
    set(batched "")
    set(rest "")
    foreach(source IN LISTS sources)
      set(own_options "")
      if(NOT IS_ABSOLUTE "${source}" AND source MATCHES "\\.cc$")
        get_source_file_property(own_options "${source}" TARGET_DIRECTORY ${target} COMPILE_OPTIONS)
        get_source_file_property(own_definitions "${source}" TARGET_DIRECTORY ${target}
                                 COMPILE_DEFINITIONS)
        if(NOT own_definitions STREQUAL "NOTFOUND")
          set(own_options "${own_options};${own_definitions}")
        endif()
      endif()
      if(IS_ABSOLUTE "${source}" OR NOT source MATCHES "\\.cc$" OR source IN_LIST alone OR
         NOT own_options STREQUAL "NOTFOUND")
        list(APPEND rest ${source})
      else()
        list(APPEND batched ${source})
      endif()
    endforeach()
    list(LENGTH batched count)
    if(count LESS 2)
      continue()
    endif()
    get_target_property(size ${target} PODSCOPE_UNITY_BATCH)
    if(NOT size)
      set(size ${PODSCOPE_UNITY_BATCH})
    endif()
    # As many batches as the size allows, their sizes differing by one at most.
    math(EXPR batches "(${count} + ${size} - 1) / ${size}")
    file(RELATIVE_PATH folder "${PROJECT_SOURCE_DIR}" "${dir}")
    if(folder)
      string(APPEND folder "/")
    endif()
    set(files "")
    set(index 0)
    foreach(batch RANGE 1 ${batches})
      math(EXPR end "${count} * ${batch} / ${batches}")
      set(content "// Written by cmake/PodscopeUnity.cmake: ${target}, batch ${batch} of ${batches}.\n")
      while(index LESS end)
        list(GET batched ${index} source)
        string(APPEND content "#include \"${folder}${source}\"\n")
        math(EXPR index "${index} + 1")
      endwhile()
      set(file "${PROJECT_BINARY_DIR}/unity/${folder}${target}_${batch}.cc")
      file(CONFIGURE OUTPUT "${file}" CONTENT "${content}" @ONLY)
      list(APPEND files "${file}")
    endforeach()
    set_property(TARGET ${target} PROPERTY SOURCES ${rest} ${files})
  endforeach()
endfunction()
