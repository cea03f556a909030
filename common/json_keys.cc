#include "common/json_keys.h"

#include <simdjson.h>

#include <string>

#include "absl/container/flat_hash_set.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

absl::Status Walk(simdjson::dom::element element, size_t depth, size_t max_depth) {
  if (depth > max_depth)
    return absl::InvalidArgumentError(StrCat("JSON is nested deeper than ", max_depth, " levels"));
  simdjson::dom::object object;
  simdjson::dom::array array;
  if (element.get(object) == simdjson::SUCCESS) {
    absl::flat_hash_set<std::string_view> keys;
    for (simdjson::dom::key_value_pair field : object) {
      if (!keys.insert(field.key).second) {
        return absl::InvalidArgumentError(
            StrCat("key \"", field.key, "\" appears twice in one object"));
      }
      RETURN_IF_ERROR(Walk(field.value, depth + 1, max_depth));
    }
  } else if (element.get(array) == simdjson::SUCCESS) {
    for (simdjson::dom::element item : array) {
      RETURN_IF_ERROR(Walk(item, depth + 1, max_depth));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckUniqueJsonKeys(std::string_view json, size_t max_depth) {
  simdjson::dom::parser parser(json.size() + 64);
  simdjson::dom::element root;
  if (auto error = parser.parse(json.data(), json.size()).get(root); error) {
    return absl::InvalidArgumentError(StrCat("not valid JSON: ", simdjson::error_message(error)));
  }
  return Walk(root, 0, max_depth);
}

}  // namespace podscope::common
