#pragma once

// Protobuf in, compact records out: the API server's `application/vnd.kubernetes.protobuf`
// encoding of Pods and Nodes (what kube-controller-manager's informers ask for), read by hand
// from the wire format. Only the fields decode.hpp's JSON walker reads are read, and handed to the
// same record builders (informers/src/record_builder.hpp), so the same rules make the records;
// everything else is skipped without a copy. Field numbers: protobuf_fields.hpp.
//
// The framing, as the API server writes it:
// - an object or a LIST page: "k8s\0" + runtime.Unknown{typeMeta = 1, raw = 2 (the message),
//   contentEncoding = 3, contentType = 4};
// - a watch stream: frames of a 4-byte big-endian length and a metav1.WatchEvent{type = 1,
//   object = 2: RawExtension{raw = 1: an object as above}} (k8sclient::frame_splitter).
//
// Errors: bytes that are not protobuf (a varint or a length running past its message, a group
// wire type, a missing magic) are errc::malformed_json ("malformed protobuf: ..."), so callers
// treat them as the JSON path treats malformed JSON; a message of the wrong shape (a missing
// metadata.name, a pod's missing metadata.uid, an unknown watch event type) is
// errc::unexpected_shape. Never throws; pure and thread-safe.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tec/base/result.hpp"
#include "tec/informers/protobuf_fields.hpp"
#include "tec/informers/records.hpp"
#include "tec/k8sclient/watch.hpp"

namespace tec::informers {

/// The Accept header that asks for protobuf and takes JSON where the server has no protobuf
/// (as client-go's default for kube-controller-manager). The decoders below and decode.hpp's
/// tell the two apart by their first bytes.
inline constexpr std::string_view protobuf_accept =
    "application/vnd.kubernetes.protobuf, application/json";

/// True when `body` starts with the protobuf envelope's magic "k8s\0".
bool is_protobuf(std::string_view body) noexcept;

/// True when a watch event (one frame) is protobuf: a WatchEvent starts with its type's tag,
/// 0x0a, which no JSON line can (the line splitter cuts at '\n').
inline bool is_protobuf_event(std::string_view frame) noexcept {
  constexpr auto type_tag =
      static_cast<char>((pb::watch_event::type << 3U) | pb::wire::length_delimited);
  static_assert(type_tag == '\x0a');
  return !frame.empty() && frame.front() == type_tag;
}

/// A Pod or Node envelope ("k8s\0" + Unknown).
base::result<pod_record> decode_pod_protobuf(std::string_view envelope);
base::result<node_record> decode_node_protobuf(std::string_view envelope);

/// A bare Pod or Node message (an item of a list page).
base::result<pod_record> decode_pod_message(std::string_view message);
base::result<node_record> decode_node_message(std::string_view message);

/// One watch frame (a WatchEvent message).
base::result<k8sclient::watch_event<pod_record>> decode_pod_event_protobuf(std::string_view frame);
base::result<k8sclient::watch_event<node_record>> decode_node_event_protobuf(
    std::string_view frame);

/// A metav1.Status envelope (an error response's body).
base::result<k8sclient::api_status> decode_status_protobuf(std::string_view envelope);

/// A LIST response body in protobuf, split as the bytes arrive: every item of the list's
/// repeated field 2 is handed over as its message bytes, and the list's metadata is kept; no
/// buffer of the whole body. A field is held only while it is incomplete, up to
/// `max_item_bytes`; more bytes than `max_page_bytes` in all fail the body
/// (errc::response_too_large). Not thread-safe: one per response body.
class protobuf_list_splitter {
public:
  protobuf_list_splitter(std::size_t max_item_bytes, std::size_t max_page_bytes)
      : max_item_(max_item_bytes), max_page_(max_page_bytes) {}

  /// Feeds bytes; calls `on_item(std::string_view message)` for every complete item (the view
  /// is valid during the call); returning false stops the body (call fail() first). False once
  /// the body is known to be broken.
  template <class OnItem>
  bool feed(std::string_view bytes, OnItem&& on_item) {
    if (failure_) {
      return false;
    }
    bytes_ += bytes.size();
    if (bytes_ > max_page_) {
      fail(base::make_error(base::errc::response_too_large,
                            "the list body is over " + std::to_string(max_page_) + " bytes"));
      return false;
    }
    buf_.append(bytes);
    std::size_t pos = 0;
    const bool ok = scan(pos, [&](std::string_view item) {
      ++items_;
      return on_item(item);
    });
    buf_.erase(0, pos);
    return ok && !failure_;
  }

  /// The end of the body: the list's resourceVersion and continue token, or why the body is
  /// broken or ended early.
  base::result<std::pair<std::string, std::string>> finish();

  [[nodiscard]] const std::optional<base::error>& failure() const noexcept { return failure_; }
  [[nodiscard]] std::size_t items() const noexcept { return items_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  void fail(base::error why) {
    if (!failure_) {
      failure_ = std::move(why);
    }
  }

private:
  enum class level : std::uint8_t { magic, envelope, list };
  /// What the field at `pos` is, once its header (and for the list's items, its whole
  /// content) is in the buffer.
  struct header {
    std::uint32_t number = 0;
    std::uint32_t wire = 0;
    std::size_t header_bytes = 0;
    std::size_t length = 0;  // content bytes (wire type 2), or the scalar's bytes
  };
  /// Reads the header at `pos`: nullopt when more bytes are needed (or on failure, set).
  std::optional<header> next_header(std::size_t pos);
  template <class OnItem>
  bool scan(std::size_t& pos, OnItem&& on_item);
  bool take_field(const header& h, std::string_view content);

  std::size_t max_item_;
  std::size_t max_page_;
  std::string buf_;
  level level_ = level::magic;
  std::size_t list_left_ = 0;  // bytes of the list message not yet consumed
  bool saw_list_ = false;
  std::string resource_version_;
  std::string continue_;
  std::size_t items_ = 0;
  std::size_t bytes_ = 0;
  std::optional<base::error> failure_;
};

template <class OnItem>
bool protobuf_list_splitter::scan(std::size_t& pos, OnItem&& on_item) {
  for (;;) {
    if (level_ == level::magic) {
      if (buf_.size() - pos < 4) {
        return true;
      }
      if (!is_protobuf(std::string_view(buf_).substr(pos, 4))) {
        fail(base::make_error(base::errc::malformed_json,
                              "malformed protobuf: the body does not start with k8s\\0"));
        return false;
      }
      pos += 4;
      level_ = level::envelope;
      continue;
    }
    if (level_ == level::list && list_left_ == 0) {
      level_ = level::envelope;
    }
    const auto h = next_header(pos);
    if (!h) {
      return !failure_;
    }
    if (level_ == level::envelope && h->number == pb::unknown::raw &&
        h->wire == pb::wire::length_delimited) {
      // Unknown.raw: the list message itself, walked field by field.
      pos += h->header_bytes;
      level_ = level::list;
      list_left_ = h->length;
      saw_list_ = true;
      continue;
    }
    const std::size_t whole = h->header_bytes + h->length;
    if (level_ == level::list && whole > list_left_) {
      fail(base::make_error(base::errc::malformed_json,
                            "malformed protobuf: a field runs past the end of the list"));
      return false;
    }
    if (h->length > max_item_) {
      fail(base::make_error(base::errc::response_too_large,
                            "a list item is over " + std::to_string(max_item_) + " bytes"));
      return false;
    }
    if (buf_.size() - pos < whole) {
      return true;  // wait for the rest of the field
    }
    const std::string_view content =
        std::string_view(buf_).substr(pos + h->header_bytes, h->length);
    if (level_ == level::list) {
      list_left_ -= whole;
      if (h->number == pb::list::items && h->wire == pb::wire::length_delimited) {
        pos += whole;
        if (!on_item(content)) {
          return false;
        }
        continue;
      }
      if (!take_field(*h, content)) {
        return false;
      }
    } else if (h->wire == pb::wire::length_delimited &&
               h->number == pb::unknown::content_encoding && !content.empty()) {
      fail(base::make_error(base::errc::malformed_json,
                            "malformed protobuf: unsupported contentEncoding"));
      return false;
    }
    pos += whole;
  }
}

}  // namespace tec::informers
