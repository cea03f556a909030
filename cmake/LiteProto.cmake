# cmake -DIN=<file.proto> -DOUT=<file.proto> -P LiteProto.cmake
# Copies a .proto file with `option optimize_for = LITE_RUNTIME;` after its package line, for the
# probe, which links protobuf's lite runtime only. The wire format is the same.
file(READ "${IN}" text)
string(REGEX REPLACE "(\npackage [A-Za-z0-9_.]+;)" "\\1\noption optimize_for = LITE_RUNTIME;"
       lite "${text}")
if(lite STREQUAL text)
  message(FATAL_ERROR "${IN}: no package line to put the lite option after")
endif()
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
file(WRITE "${OUT}" "${lite}")
