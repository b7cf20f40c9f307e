#pragma once

// Bytes in, lines out: the first stage of watch decoding. A watch response body is a stream
// of JSON documents, one per line, cut into chunks at arbitrary places by TCP and HTTP
// chunked encoding. line_splitter reassembles complete lines with bounded memory.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "tec/base/result.hpp"

namespace tec::k8sclient {

/// Splits a byte stream into newline-terminated lines. CRLF is accepted (the CR is dropped),
/// empty lines are skipped. A line longer than `max_line_bytes` is reported once as an
/// errc::line_too_long error and dropped; the splitter resynchronises at the next newline,
/// and never buffers more than `max_line_bytes` (+1) bytes.
///
/// Not thread-safe: one splitter per stream, fed from the stream's executor.
class line_splitter {
public:
  /// 8 MiB: a Kubernetes object is far smaller (etcd stores at most 1.5 MiB per object by
  /// default, the apiserver takes request bodies up to 3 MiB), and a JSON parser needs several
  /// times the text while parsing (simdjson's DOM about 15 times), which must fit the
  /// Deployment's memory limit.
  static constexpr std::size_t default_max_line_bytes = std::size_t{8} << 20U;  // 8 MiB

  explicit line_splitter(std::size_t max_line_bytes = default_max_line_bytes) noexcept
      : max_(max_line_bytes) {}

  /// Feeds one chunk. Calls `on_line(std::string_view)` for every complete non-empty line (the
  /// view is valid only during the call) and `on_error(const error&)` for every over-long
  /// line, in stream order. A partial line at the end of the chunk is kept for the next feed.
  template <class OnLine, class OnError>
  void feed(std::string_view bytes, OnLine&& on_line, OnError&& on_error);

  /// True when bytes of an unfinished line are buffered (or being discarded): a stream that
  /// ends now ended mid-line.
  [[nodiscard]] bool has_partial_line() const noexcept { return !buffer_.empty() || discarding_; }

  /// Bytes currently buffered.
  [[nodiscard]] std::size_t buffered_bytes() const noexcept { return buffer_.size(); }

  /// Forgets any partial line (call when a new stream starts).
  void reset() noexcept;

private:
  [[nodiscard]] base::error too_long() const;
  void release_buffer() noexcept;

  std::size_t max_;
  std::string buffer_;
  bool discarding_ = false;
};

template <class OnLine, class OnError>
void line_splitter::feed(std::string_view bytes, OnLine&& on_line, OnError&& on_error) {
  while (!bytes.empty()) {
    const std::size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      if (discarding_) {
        return;
      }
      // +1: the line may still end in a CR that does not count.
      if (buffer_.size() + bytes.size() > max_ + 1) {
        release_buffer();
        discarding_ = true;
        on_error(too_long());
        return;
      }
      buffer_.append(bytes);
      return;
    }
    std::string_view piece = bytes.substr(0, newline);
    bytes.remove_prefix(newline + 1);
    if (discarding_) {
      discarding_ = false;  // the over-long line ends here; it was reported already
      continue;
    }
    std::string_view line;
    if (buffer_.empty()) {
      line = piece;
    } else {
      if (buffer_.size() + piece.size() > max_ + 1) {
        release_buffer();
        on_error(too_long());
        continue;
      }
      buffer_.append(piece);
      line = buffer_;
    }
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.size() > max_) {
      on_error(too_long());
    } else if (!line.empty()) {
      on_line(line);
    }
    release_buffer();
  }
}

}  // namespace tec::k8sclient
