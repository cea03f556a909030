# Run at build time (cmake -P): writes OUTPUT, a C++ file that holds every file of ASSET_DIR as
# a raw string with its content type and an ETag (a hash of its bytes), for UiAssets().
# Inputs: ASSET_DIR, OUTPUT, ASSETS (a ;-list of file names in ASSET_DIR).
set(delimiter "podscope_ui")  # at most 16 characters
set(body "")
foreach(name IN LISTS ASSETS)
  file(READ "${ASSET_DIR}/${name}" content)
  string(FIND "${content}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${name} holds the raw string's end marker )${delimiter}\"")
  endif()
  file(SHA256 "${ASSET_DIR}/${name}" hash)
  string(SUBSTRING "${hash}" 0 16 etag)
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  elseif(name MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  elseif(name MATCHES "\\.svg$")
    set(type "image/svg+xml")
  else()
    message(FATAL_ERROR "${name}: no content type known for this kind of file")
  endif()
  string(APPEND body "    {\"${name}\", \"${type}\", \"\\\"${etag}\\\"\", R\"${delimiter}(${content})${delimiter}\"},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated at build time by coordinator/ui/embed_assets.cmake from coordinator/ui/assets/.
#include \"coordinator/ui/ui_assets.h\"

namespace podscope::coordinator {

const std::vector<UiAsset>& UiAssets() {
  static const std::vector<UiAsset> kAssets = {
${body}  };
  return kAssets;
}

}  // namespace podscope::coordinator
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
