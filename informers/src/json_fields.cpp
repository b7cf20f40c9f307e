#include "tec/informers/json_fields.hpp"

namespace tec::informers::json_fields {

result<json> parse(std::string_view text) {
  bool too_deep = false;
  const json::parser_callback_t depth_check = [&](int depth, json::parse_event_t event,
                                                  json& /*parsed*/) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        static_cast<std::size_t>(depth) >= max_depth) {
      too_deep = true;
      return false;
    }
    return !too_deep;
  };
  json doc = json::parse(text.begin(), text.end(), depth_check, /*allow_exceptions=*/false);
  if (too_deep) {
    return base::make_error(errc::malformed_json, "malformed JSON: too deep");
  }
  if (doc.is_discarded()) {
    return base::make_error(errc::malformed_json, "malformed JSON");
  }
  return doc;
}

error shape(const std::string& path, std::string_view why) {
  return base::make_error(errc::unexpected_shape, path + ": " + std::string(why));
}

std::optional<error> read_string(const json& obj, const char* key, const std::string& path,
                                 std::string& out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::nullopt;
  }
  if (!it->is_string()) {
    return shape(path + "." + key, "not a string");
  }
  out = it->get<std::string>();
  return std::nullopt;
}

result<const json*> read_object(const json& obj, const char* key, const std::string& path) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return static_cast<const json*>(nullptr);
  }
  if (!it->is_object()) {
    return shape(path + "." + key, "not an object");
  }
  return &*it;
}

}  // namespace tec::informers::json_fields
