#pragma once

// Test-only: decodes a watch stream the way the informers do (k8sclient::line_splitter, then the
// informers' event decoders), so tests and the line_splitter fuzz target can check both together.

#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tec/informers/decode.hpp"
#include "tec/k8sclient/line_splitter.hpp"

namespace tec::informers {

/// Bytes of a watch response in, decoded events out: a line_splitter feeding
/// decode_pod_event / decode_node_event (by Record type).
///
/// Errors do not stop the decoder: an over-long line (errc::line_too_long) or a line that
/// does not decode is reported through `on_error` and skipped. client-go ends the watch on a
/// decode error and re-watches from the last resourceVersion; the reflector decides that.
/// Not thread-safe: one per watch stream, on the stream's executor.
template <class Record>
class watch_decoder {
public:
  explicit watch_decoder(
      std::size_t max_line_bytes = line_splitter::default_max_line_bytes) noexcept
      : splitter_(max_line_bytes) {}

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
            on_error(event.error());
          }
        },
        on_error);
  }

  /// True when the stream so far ended in the middle of a line.
  [[nodiscard]] bool has_partial_line() const noexcept { return splitter_.has_partial_line(); }

  /// Forgets a partial line (call when a new watch starts).
  void reset() noexcept { splitter_.reset(); }

private:
  static result<watch_event<Record>> decode(std::string_view line) {
    if constexpr (std::is_same_v<Record, pod_record>) {
      return decode_pod_event(line);
    } else {
      return decode_node_event(line);
    }
  }

  line_splitter splitter_;
};

}  // namespace tec::informers
