#pragma once

// JSON in, compact records out. Watch event lines and LIST bodies are decoded by one field
// handler (a SAX-style state machine over the few paths we need) that keeps only the fields
// the controller needs (and, of a pod's status conditions, the DisruptionTarget one as a
// disruption_state); everything else (managedFields, containers, other conditions,
// images, ...) is validated and skipped without building a DOM or copying it.
//
// Contract for every function here: pure, thread-safe (no shared state), never throws for
// bad input. Malformed JSON is errc::malformed_json; valid JSON of the wrong shape (a wrong
// type in a field we read, a missing metadata.name or metadata.uid) is errc::unexpected_shape,
// with the JSON path in the message ("items[3].spec.tolerations[0].tolerationSeconds: ...").
// Unknown fields are ignored. null is accepted wherever a value is optional and means absent
// (as Go's decoder treats it).
//
// tolerationSeconds must be an integer in int64 range, as for client-go (its Go decoder
// rejects 1.5, 1e30 or 2^63 for an *int64): such a pod is an unexpected_shape error, not
// silently clamped. (The API server validates the same type, so a real server never sends
// them.) Saturating huge *valid* values is the controller's job.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tec/k8s/line_splitter.hpp"
#include "tec/k8s/records.hpp"
#include "tec/k8s/result.hpp"

namespace tec::k8s {

/// Which tokenizer drives the decoder. `fast` (the default) is our own strict, validating
/// reader that skips unneeded values without copying them (~3x nlohmann's SAX speed);
/// `nlohmann` drives the same field handler through nlohmann::json::sax_parse and is kept as
/// the reference the tests compare `fast` against. Both accept exactly RFC 8259 JSON.
enum class json_engine : std::uint8_t { fast, nlohmann };

enum class event_type : std::uint8_t { added, modified, deleted, bookmark, error };

/// "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR".
std::string_view to_string(event_type type) noexcept;

/// The fields of a metav1.Status we act on (an ERROR event's object, an error response).
struct api_status {
  std::int32_t code = 0;  ///< HTTP-like code, e.g. 410; 0 when absent.
  std::string reason;     ///< e.g. "Expired", "Gone".
  std::string message;
  std::string status;  ///< "Failure" or "Success".

  friend bool operator==(const api_status&, const api_status&) = default;
};

/// One watch event. For ADDED/MODIFIED/DELETED `object` is complete (name and uid present);
/// for BOOKMARK only object.resource_version is meaningful; for ERROR `status` is set and
/// `object` is empty.
template <class Record>
struct watch_event {
  event_type type = event_type::added;
  Record object;
  api_status status;

  /// The resourceVersion to resume a watch from after this event.
  [[nodiscard]] const std::string& resource_version() const noexcept {
    return object.resource_version;
  }
};

/// One page of a LIST response.
template <class Record>
struct list_page {
  std::vector<Record> items;
  std::string resource_version;  ///< metadata.resourceVersion: start the watch from here.
  std::string continue_token;    ///< metadata.continue: empty on the last page.
};

using pod_event = watch_event<pod_record>;
using node_event = watch_event<node_record>;
using pod_list = list_page<pod_record>;
using node_list = list_page<node_record>;

/// Decodes one watch event line of a pod watch (`{"type":..., "object":{...}}`).
result<pod_event> decode_pod_event(std::string_view line, json_engine engine = json_engine::fast);
/// Decodes one watch event line of a node watch.
result<node_event> decode_node_event(std::string_view line, json_engine engine = json_engine::fast);

/// Decodes a PodList page.
result<pod_list> decode_pod_list(std::string_view body, json_engine engine = json_engine::fast);
/// Decodes a NodeList page.
result<node_list> decode_node_list(std::string_view body, json_engine engine = json_engine::fast);

/// Decodes a single Pod object.
result<pod_record> decode_pod(std::string_view json, json_engine engine = json_engine::fast);
/// Decodes a single Node object.
result<node_record> decode_node(std::string_view json, json_engine engine = json_engine::fast);

/// Decodes a metav1.Status body (e.g. the body of a 410 response). Fields that are absent
/// stay empty; only malformed JSON or a non-object is an error.
result<api_status> decode_status(std::string_view json, json_engine engine = json_engine::fast);

/// Bytes of a watch response in, decoded events out: a line_splitter feeding
/// decode_pod_event / decode_node_event (by Record type).
///
/// Errors do not stop the decoder: an over-long line (errc::line_too_long) or a line that
/// does not decode is reported through `on_error` and skipped. client-go ends the watch on a
/// decode error and re-watches from the last resourceVersion; the informer decides that.
/// Not thread-safe: one per watch stream, on the stream's executor.
template <class Record>
class watch_decoder {
public:
  explicit watch_decoder(std::size_t max_line_bytes = line_splitter::default_max_line_bytes,
                         json_engine engine = json_engine::fast) noexcept
      : splitter_(max_line_bytes), engine_(engine) {}

  /// Calls `on_event(watch_event<Record>&&)` for every complete, decodable line and
  /// `on_error(const error&)` for every bad one, in stream order.
  template <class OnEvent, class OnError>
  void feed(std::string_view bytes, OnEvent&& on_event, OnError&& on_error) {
    splitter_.feed(
        bytes,
        [&](std::string_view line) {
          auto event = decode(line);
          if (event) {
            on_event(std::move(event).value());
          } else {
            on_error(event.err());
          }
        },
        on_error);
  }

  /// True when the stream so far ended in the middle of a line.
  [[nodiscard]] bool has_partial_line() const noexcept { return splitter_.has_partial_line(); }

  /// Forgets a partial line (call when a new watch starts).
  void reset() noexcept { splitter_.reset(); }

private:
  result<watch_event<Record>> decode(std::string_view line) const {
    if constexpr (std::is_same_v<Record, pod_record>) {
      return decode_pod_event(line, engine_);
    } else {
      return decode_node_event(line, engine_);
    }
  }

  line_splitter splitter_;
  json_engine engine_;
};

}  // namespace tec::k8s
