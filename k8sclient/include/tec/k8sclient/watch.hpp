#pragma once

// What a list/watch session exchanges with the API server, independent of the object type:
// watch events (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR), the metav1.Status of an ERROR event
// or an error response, and LIST pages. A codec (see reflector.hpp) decodes the bytes into them.

#include <cstdint>
#include <string>
#include <vector>

namespace tec::k8sclient {

enum class event_type : std::uint8_t { added, modified, deleted, bookmark, error };

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

}  // namespace tec::k8sclient
