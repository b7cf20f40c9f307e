#pragma once

// nlohmann-based decoding shared by the codecs of few, small objects (shadow mode's Events, the
// namespaces), public for shadow mode's Event codec. The API's big collections (pods, nodes) go
// through decode.hpp's simdjson walker instead.
//
// Errors follow decode.hpp's contract: malformed JSON (including nesting deeper than
// max_depth) is errc::malformed_json; valid JSON of the wrong shape in a field read is
// errc::unexpected_shape with the JSON path in the message. Nothing here throws for bad
// input; everything is pure and thread-safe.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tec/base/error.hpp"
#include "tec/base/result.hpp"
#include "tec/informers/decode.hpp"
#include "tec/k8sclient/watch.hpp"

namespace tec::informers::json_fields {

using json = nlohmann::json;

/// Deeper JSON is refused before nlohmann's DOM is built (as decode.hpp's limit, lower: these
/// objects are flat).
inline constexpr std::size_t max_depth = 64;

/// The document, or errc::malformed_json.
result<json> parse(std::string_view text);

/// errc::unexpected_shape, "path: why".
error shape(const std::string& path, std::string_view why);

/// The string at `key` of `obj` into `out` (absent or null: left as it is); a value of another
/// type is an unexpected_shape error naming `path.key`.
std::optional<error> read_string(const json& obj, const char* key, const std::string& path,
                                 std::string& out);

/// The object at `key` of `obj` (nullptr when absent or null); another type is an error.
result<const json*> read_object(const json& obj, const char* key, const std::string& path);

/// One object: the document at `text`, read by `decode_object(const json& obj, const
/// std::string& path, bool bookmark) -> result<Record>` with `path` as its root.
template <class Record, class DecodeObject>
result<Record> decode_document(std::string_view text, const std::string& path,
                               DecodeObject&& decode_object) {
  auto doc = parse(text);
  if (!doc) {
    return doc.error();
  }
  return decode_object(*doc, path, false);
}

/// One watch event line: `{"type": ..., "object": {...}}`, its object read by
/// `decode_object` (as for decode_document); for a
/// BOOKMARK it only needs metadata.resourceVersion. An ERROR event's object is decoded as a
/// metav1.Status.
template <class Record, class DecodeObject>
result<k8sclient::watch_event<Record>> decode_watch_line(std::string_view line,
                                                         DecodeObject&& decode_object) {
  auto doc = parse(line);
  if (!doc) {
    return doc.error();
  }
  if (!doc->is_object()) {
    return shape("watch event", "not an object");
  }
  std::string type;
  if (auto e = read_string(*doc, "type", "watch event", type)) {
    return *e;
  }
  k8sclient::watch_event<Record> ev;
  if (const auto parsed = parse_event_type(type)) {
    ev.type = *parsed;
  } else {
    return shape("watch event.type", "unknown type \"" + base::printable(type, 32) + "\"");
  }
  const auto obj = doc->find("object");
  if (obj == doc->end() || !obj->is_object()) {
    return shape("watch event.object", "missing or not an object");
  }
  if (ev.type == k8sclient::event_type::error) {
    auto status = informers::decode_status(obj->dump());
    if (!status) {
      return status.error();
    }
    ev.status = std::move(status).value();
    return ev;
  }
  auto rec = decode_object(*obj, std::string("object"), ev.type == k8sclient::event_type::bookmark);
  if (!rec) {
    return rec.error();
  }
  ev.object = std::move(rec).value();
  return ev;
}

/// A LIST page: metadata.resourceVersion, metadata.continue and the items, each read by
/// `decode_object` (as for decode_watch_line, never as a bookmark). A streamed page's
/// envelope (list_splitter) has no items left, so this reads only its metadata.
template <class Record, class DecodeObject>
result<k8sclient::list_page<Record>> decode_list(std::string_view body,
                                                 DecodeObject&& decode_object) {
  auto doc = parse(body);
  if (!doc) {
    return doc.error();
  }
  if (!doc->is_object()) {
    return shape("list", "not an object");
  }
  k8sclient::list_page<Record> page;
  auto meta = read_object(*doc, "metadata", "list");
  if (!meta) {
    return meta.error();
  }
  if (*meta != nullptr) {
    if (auto e = read_string(**meta, "resourceVersion", "list.metadata", page.resource_version)) {
      return *e;
    }
    if (auto e = read_string(**meta, "continue", "list.metadata", page.continue_token)) {
      return *e;
    }
  }
  if (const auto items = doc->find("items"); items != doc->end() && !items->is_null()) {
    if (!items->is_array()) {
      return shape("list.items", "not an array");
    }
    for (std::size_t i = 0; i < items->size(); ++i) {
      auto rec = decode_object((*items)[i], "items[" + std::to_string(i) + "]", false);
      if (!rec) {
        return rec.error();
      }
      page.items.push_back(std::move(rec).value());
    }
  }
  return page;
}

}  // namespace tec::informers::json_fields
