#pragma once

// The reflector codec (k8sclient/reflector.hpp) of a resource whose objects are decoded one at a
// time by functions of its own (shadow mode's Events, the namespaces); its LIST pages stream
// through decode.hpp's object_list_decoder.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tec/base/result.hpp"
#include "tec/informers/decode.hpp"
#include "tec/k8sclient/watch.hpp"

namespace tec::informers {

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
