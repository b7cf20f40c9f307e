#pragma once

// The pod and node informers: kube's reflector over the codecs below and the stores the
// controller reads (see tec/k8sclient/reflector.hpp for the list/watch contract).

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/informers/decode.hpp"
#include "tec/informers/protobuf.hpp"
#include "tec/informers/records.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/reflector.hpp"
#include "tec/metrics/table.hpp"

namespace tec::informers {

/// What the pod and node codecs share: Status bodies and LIST pages streamed item by item.
/// Each body and watch event is read as JSON or protobuf by its first bytes (protobuf.hpp), so
/// the reflector may ask for either (reflector_options::accept).
template <class Record>
struct record_codec {
  using object_type = Record;
  static base::result<k8sclient::api_status> decode_status(std::string_view body) {
    return is_protobuf(body) ? decode_status_protobuf(body) : informers::decode_status(body);
  }
  static list_decoder<Record> make_list_decoder(std::size_t max_item_bytes,
                                                std::size_t max_page_bytes) {
    return list_decoder<Record>(list_limits{max_item_bytes, max_page_bytes});
  }
};

/// Pods of every namespace, as pod_records.
struct pod_codec : record_codec<pod_record> {
  static constexpr const char* path = "/api/v1/pods";
  static constexpr const char* kind = "pods";
  static base::result<pod_event> decode_event(std::string_view line) {
    return is_protobuf_event(line) ? decode_pod_event_protobuf(line) : decode_pod_event(line);
  }
};

/// Nodes, as node_records.
struct node_codec : record_codec<node_record> {
  static constexpr const char* path = "/api/v1/nodes";
  static constexpr const char* kind = "nodes";
  static base::result<node_event> decode_event(std::string_view line) {
    return is_protobuf_event(line) ? decode_node_event_protobuf(line) : decode_node_event(line);
  }
};

using pod_informer = k8sclient::reflector<pod_codec, pod_store>;
using node_informer = k8sclient::reflector<node_codec, node_store>;

/// One informer for watch_metric_table(): the resource it watches ("pods") and its stats().
struct watched_resource {
  std::string resource;
  std::function<k8sclient::reflector_stats()> stats;
};

/// The watches' metrics for registry::publish(): watch_restarts_total, relists_total,
/// list_watch_backoffs_total and watch_decode_errors_total, each with one child per informer,
/// labelled `resource`. The readers call `watched`'s stats() at each scrape: the informers must
/// outlive their use.
[[nodiscard]] metrics::table watch_metric_table(std::vector<watched_resource> watched);

}  // namespace tec::informers

extern template class tec::k8sclient::reflector<tec::informers::pod_codec,
                                                tec::informers::pod_store>;
extern template class tec::k8sclient::reflector<tec::informers::node_codec,
                                                tec::informers::node_store>;
