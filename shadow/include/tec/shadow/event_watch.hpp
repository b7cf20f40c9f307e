#pragma once

// Shadow mode's view of the built-in taint manager's Events: core/v1 Events with reason
// TaintManagerEviction (a LIST and WATCH of /api/v1/events with that fieldSelector), decoded
// into compact records, an event_store for the reflector, and the event_informer type.
//
// Decoding: nlohmann's DOM parser (these Events are few: a field selector picks them on the
// server); depth-limited like decode.hpp; malformed JSON is errc::malformed_json, valid JSON
// of the wrong shape (a wrong type, a missing metadata.name or involvedObject.name) is
// errc::unexpected_shape with the JSON path. The message is made printable and clipped
// (base::sanitize_message). Pure and thread-safe; never throws for bad input.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/informers/object_codec.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/reflector.hpp"
#include "tec/k8sclient/watch.hpp"
#include "tec/shadow/shadow_tracker.hpp"

namespace tec::shadow {

/// The most bytes of an Event's message kept (a longer one is cut there and ends in "...").
inline constexpr std::size_t max_event_message = 1024;

/// The fields of a core/v1 Event shadow mode reads.
struct event_record {
  std::string namespace_;  ///< metadata.namespace
  std::string name;        ///< metadata.name
  std::string resource_version;
  std::string reason;
  std::string message;  ///< base::sanitize_message(), max_event_message bytes plus "...".
  /// source.component, else reportingComponent: "taint-controller" (kube-controller-manager
  /// before 1.29) or "taint-eviction-controller" (1.29 and later).
  std::string component;
  std::int64_t count = 0;  ///< 0 when absent.
  std::string involved_kind;
  std::string involved_namespace;
  std::string involved_name;
  std::string involved_uid;  ///< Empty before 1.29 (kube-controller-manager set none).

  friend bool operator==(const event_record&, const event_record&) = default;
};

using event_watch_event = k8sclient::watch_event<event_record>;

/// One Event object.
base::result<event_record> decode_event_object(std::string_view json);
/// One watch event line of an Event watch. BOOKMARK carries only the resourceVersion.
base::result<event_watch_event> decode_event_watch_line(std::string_view line);
/// An EventList page (items decoded too).
base::result<k8sclient::list_page<event_record>> decode_event_list(std::string_view body);

/// What an Event record says to shadow mode: a Marking or Cancelling event of a taint
/// manager for a pod, or nullopt (another reason, message or kind).
std::optional<shadow_event> to_shadow_event(const event_record& e);

/// The reflector's codec: /api/v1/events (the daemon adds the fieldSelector).
struct event_codec : informers::object_codec<event_record, &decode_event_object,
                                             &decode_event_watch_line, &decode_event_list> {
  static constexpr const char* path = "/api/v1/events";
  static constexpr const char* kind = "events";
};

/// The Events seen, by namespace/name, bounded: beyond `max_events` a new Event is not kept
/// (its change is still delivered; a relist delivers it again as new). Thread-safe.
class event_store {
public:
  explicit event_store(std::size_t max_events = 100'000) : max_(max_events) {}
  std::optional<event_record> upsert(const event_record& r);
  std::optional<event_record> erase(const event_record& r);
  informers::replace_result<event_record> replace_all(std::vector<event_record> records);
  [[nodiscard]] std::size_t size() const;
  /// Events not kept because the store was full.
  [[nodiscard]] std::uint64_t refused() const;

private:
  static std::string key(const event_record& r) { return r.namespace_ + "/" + r.name; }
  std::size_t max_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, event_record> events_;
  std::uint64_t refused_ = 0;
};

using event_informer = k8sclient::reflector<event_codec, event_store>;

/// The fieldSelector query of the event informer (reflector_options::query).
inline constexpr std::string_view taint_manager_events_query =
    "fieldSelector=reason%3DTaintManagerEviction";

/// The most occurrences one change of an Event stands for (a relist may skip many steps).
inline constexpr std::uint32_t max_occurrences = 16;

/// How many times `new_event` happened since `old_event` (its earlier state, nullptr when new):
/// the rise of its count (client-go's recorder PATCHes the count of an identical message about
/// the same object instead of writing a new Event), at most max_occurrences; 1 for a new
/// Event, a changed message or a count that did not rise.
[[nodiscard]] std::uint32_t occurrences(const event_record* old_event,
                                        const event_record& new_event);

/// The event informer's handler for shadow mode: a new Event, or one whose count or message
/// changed (the recorder counts a repeat on the same Event), goes to `tracker` as a
/// shadow_event carrying its occurrences(); deletions (the Event's TTL) are ignored.
[[nodiscard]] event_informer::handler shadow_event_handler(shadow_tracker& tracker);

}  // namespace tec::shadow

extern template class tec::k8sclient::reflector<tec::shadow::event_codec, tec::shadow::event_store>;
