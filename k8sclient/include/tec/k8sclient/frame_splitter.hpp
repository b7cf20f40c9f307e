#pragma once

// Bytes in, watch events out, for either framing the API server uses: JSON watch events one
// per line, or (for application/vnd.kubernetes.protobuf) frames of a 4-byte big-endian length
// followed by that many bytes. The first byte of the stream tells which: a frame's length starts
// with a 0 byte (every frame is under 16 MiB), which no JSON text can.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tec/base/result.hpp"
#include "tec/k8sclient/line_splitter.hpp"

namespace tec::k8sclient {

/// Splits a watch stream into its events, lines or length-delimited frames (see above). A
/// frame longer than `max_bytes` is an errc::line_too_long error, and the frames after it are
/// lost (their boundaries are unknown): the caller ends the watch. Never buffers more than
/// `max_bytes` (+4) bytes. Not thread-safe: one per stream.
class watch_splitter {
public:
  explicit watch_splitter(std::size_t max_bytes = line_splitter::default_max_line_bytes) noexcept
      : max_(max_bytes), lines_(max_bytes) {}

  /// Calls `on_event(std::string_view)` for every complete event and `on_error(const error&)`
  /// for every over-long one, in stream order.
  template <class OnEvent, class OnError>
  void feed(std::string_view bytes, OnEvent&& on_event, OnError&& on_error) {
    if (!framed_ && !bytes.empty()) {
      framed_ = bytes.front() == '\0';
    }
    if (!framed_ || !*framed_) {
      lines_.feed(bytes, on_event, on_error);
      return;
    }
    if (broken_) {
      return;
    }
    buffer_.append(bytes);
    std::size_t pos = 0;
    while (buffer_.size() - pos >= 4) {
      const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + pos);
      const std::size_t len = (std::size_t{p[0]} << 24U) | (std::size_t{p[1]} << 16U) |
                              (std::size_t{p[2]} << 8U) | std::size_t{p[3]};
      if (len > max_) {
        broken_ = true;
        buffer_.clear();
        buffer_.shrink_to_fit();
        on_error(base::make_error(base::errc::line_too_long, "a watch event frame of " +
                                                                 std::to_string(len) +
                                                                 " bytes is over the bound of " +
                                                                 std::to_string(max_) + " bytes"));
        return;
      }
      if (buffer_.size() - pos - 4 < len) {
        break;
      }
      on_event(std::string_view(buffer_).substr(pos + 4, len));
      pos += 4 + len;
    }
    buffer_.erase(0, pos);
  }

  /// True when part of an event is buffered: a stream that ends now ended mid-event.
  [[nodiscard]] bool has_partial_line() const noexcept {
    return framed_ && *framed_ ? !buffer_.empty() : lines_.has_partial_line();
  }

private:
  std::size_t max_;
  line_splitter lines_;
  std::optional<bool> framed_;  // decided by the stream's first byte
  bool broken_ = false;
  std::string buffer_;
};

}  // namespace tec::k8sclient
