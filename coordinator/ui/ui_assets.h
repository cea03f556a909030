// The web UI's static files (coordinator/ui/assets/), built into the binary: the coordinator
// serves its UI with no CDN, no files beside it and no network at run time.
#pragma once

#include <string_view>
#include <vector>

namespace podscope::coordinator {

struct UiAsset {
  std::string_view name;  // "app.js": served at /ui/app.js (index.html also at /)
  std::string_view content_type;
  std::string_view etag;  // quoted, as the ETag header carries it
  std::string_view body;
};

// Every asset, in file-name order. Generated at build time.
const std::vector<UiAsset>& UiAssets();

}  // namespace podscope::coordinator
