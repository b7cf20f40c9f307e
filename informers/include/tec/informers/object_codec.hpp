#pragma once

// The reflector codec (kube/reflector.hpp) of a resource whose objects are decoded one at a time
// by functions of its own (shadow mode's Events, the namespaces), and its streamed LIST page
// decoder: decode.hpp's list_splitter hands each complete element of `items` to DecodeItem, and
// finish() reads the envelope's metadata with DecodeList. Same contract as decode.hpp's
// list_decoder: an element of the wrong shape (errc::unexpected_shape) is skipped through
// on_skip; malformed JSON or a bound (list_limits) fails the page.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tec/base/result.hpp"
#include "tec/informers/decode.hpp"
#include "tec/k8sclient/watch.hpp"

namespace tec::informers {

/// A LIST page decoded as it streams. Not thread-safe: one per response body.
template <class Record, result<Record> (*DecodeItem)(std::string_view),
          result<k8sclient::list_page<Record>> (*DecodeList)(std::string_view)>
class object_list_decoder {
public:
  explicit object_list_decoder(list_limits limits) : splitter_(limits) {}

  /// Feeds bytes; calls `on_item(Record&&)` for every decoded element and `on_skip(const
  /// error&)` for every skipped one, in order. False once the page is broken (failure()).
  template <class OnItem, class OnSkip>
  bool feed(std::string_view bytes, OnItem&& on_item, OnSkip&& on_skip) {
    return splitter_.feed(bytes, [&](std::string_view element) {
      return take_list_item(splitter_.items() - 1, DecodeItem(element), on_item, on_skip,
                            splitter_);
    });
  }

  /// The end of the body: metadata.resourceVersion and metadata.continue (items empty; they
  /// were delivered by feed()), or why the page is broken.
  result<k8sclient::list_page<Record>> finish() {
    auto envelope = splitter_.finish();
    if (!envelope) {
      return envelope.error();
    }
    return DecodeList(envelope.value());
  }

  [[nodiscard]] const std::optional<error>& failure() const noexcept { return splitter_.failure(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return splitter_.bytes(); }

private:
  list_splitter splitter_;
};

/// What a codec shares: object_type, decode_event, decode_status (metav1.Status) and
/// make_list_decoder. A codec derives from it and adds `path` and `kind`.
template <class Record, result<Record> (*DecodeItem)(std::string_view),
          result<k8sclient::watch_event<Record>> (*DecodeEvent)(std::string_view),
          result<k8sclient::list_page<Record>> (*DecodeList)(std::string_view)>
struct object_codec {
  using object_type = Record;
  using list_decoder_type = object_list_decoder<Record, DecodeItem, DecodeList>;
  static base::result<k8sclient::watch_event<Record>> decode_event(std::string_view line) {
    return DecodeEvent(line);
  }
  static base::result<k8sclient::api_status> decode_status(std::string_view body) {
    return informers::decode_status(body);
  }
  static list_decoder_type make_list_decoder(std::size_t max_item_bytes,
                                             std::size_t max_page_bytes) {
    return list_decoder_type(list_limits{max_item_bytes, max_page_bytes});
  }
};

}  // namespace tec::informers
