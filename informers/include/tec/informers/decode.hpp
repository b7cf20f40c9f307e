#pragma once

// JSON in, compact records out. Watch event lines, LIST items and bodies are parsed (and so
// fully validated) by simdjson's DOM parser (decode.cpp says why; it accepts RFC 8259 JSON, a
// leading UTF-8 byte order mark skipped, nested at most 1024 levels, integers in [-2^63, 2^64)),
// then a walker keeps only the fields the controller needs (of a pod's status conditions, the
// DisruptionTarget one as a disruption_state) and skips everything else without a copy.
//
// Contract for every function here: pure, thread-safe (each thread keeps its own simdjson
// parser), never throws for bad input. Memory: a parse needs about 15 times the text's size while
// it runs (simdjson sizes its tape for the worst case), so callers bound the text
// (max_line_bytes, list_limits, the client's 1 MiB error bodies); a thread keeps its parser's
// buffers only while they serve texts up to 128 KiB. Malformed JSON is errc::malformed_json;
// valid JSON of the wrong shape (a wrong type in a field we read, a missing metadata.name, a
// pod's missing metadata.uid) is errc::unexpected_shape, with the JSON path in the message
// ("items[3].spec.tolerations[0].tolerationSeconds: ..."). Unknown fields are ignored; null
// means absent wherever a value is optional (as for Go's decoder).
//
// tolerationSeconds must be an integer in int64 range, as for client-go (its Go decoder rejects
// 1.5, 1e30 or 2^63 for an *int64): such a pod is an unexpected_shape error, not silently
// clamped. Saturating huge *valid* values is the controller's job.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/informers/kube_names.hpp"
#include "tec/informers/protobuf.hpp"
#include "tec/informers/records.hpp"
#include "tec/k8sclient/line_splitter.hpp"
#include "tec/k8sclient/watch.hpp"

namespace tec::informers {

using k8sclient::api_status;
using k8sclient::event_type;
using k8sclient::list_page;
using k8sclient::watch_event;

/// "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR".
std::string_view to_string(event_type type) noexcept;
/// The inverse of to_string(); nullopt for anything else.
std::optional<event_type> parse_event_type(std::string_view text) noexcept;

using pod_event = watch_event<pod_record>;
using node_event = watch_event<node_record>;
using pod_list = list_page<pod_record>;
using node_list = list_page<node_record>;

/// Decodes one watch event line of a pod watch (`{"type":..., "object":{...}}`).
result<pod_event> decode_pod_event(std::string_view line);
/// Decodes one watch event line of a node watch.
result<node_event> decode_node_event(std::string_view line);

/// Decodes a PodList page.
result<pod_list> decode_pod_list(std::string_view body);
/// Decodes a NodeList page.
result<node_list> decode_node_list(std::string_view body);

/// Decodes a single Pod object.
result<pod_record> decode_pod(std::string_view json);
/// Decodes a single Node object.
result<node_record> decode_node(std::string_view json);

/// Whether pod decoders keep metadata.labels (pod_view::labels). Off by default: labels are
/// only needed by the policy's exclude.podSelector, so the daemon turns this on, before its
/// informers start, only when a policy file is configured (it may gain a selector on reload).
/// Any thread; applies to objects decoded after the call.
void keep_pod_labels(bool keep) noexcept;
/// What keep_pod_labels() last set.
bool keeping_pod_labels() noexcept;

/// Whether `text` is valid UTF-8 (simdjson's validator).
bool valid_utf8(std::string_view text) noexcept;

/// Decodes a metav1.Status body (e.g. the body of a 410 response). Fields that are absent
/// stay empty; only malformed JSON or a non-object is an error.
result<api_status> decode_status(std::string_view json);

/// Bounds of one streamed LIST page (list_splitter, list_decoder).
struct list_limits {
  /// One element of `items`, and everything outside `items` together (a pod is at most a
  /// few MiB: etcd's default request limit is 1.5 MiB; see line_splitter's default).
  std::size_t max_item_bytes = line_splitter::default_max_line_bytes;
  /// The whole body (client_options::max_response_bytes by default).
  std::size_t max_page_bytes = std::size_t{256} << 20U;
};

/// Bytes of a LIST response body in, the elements of its top-level `items` array out, as the
/// bytes arrive: no buffer of the whole body. An element is held only while it is incomplete
/// (up to max_item_bytes), so memory is bounded by the limits, not by the body.
///
/// It checks the JSON structure it scans (strings, nesting, the separators between elements)
/// and keeps everything outside `items` (kind, metadata, ...) as the *envelope*: the body with
/// `items` emptied, which finish() decodes with the ordinary decoder, so `metadata` is found
/// wherever it is, before or after `items`. Elements themselves are validated by whoever
/// decodes them. Errors: errc::malformed_json (a broken structure, a body cut short) and
/// errc::response_too_large (an element, the envelope or the body over its bound).
///
/// Not thread-safe: one per response body.
class list_splitter {
public:
  explicit list_splitter(list_limits limits = {}) : limits_(limits) {}

  /// Feeds the next bytes. Calls `on_item(std::string_view element)` for every complete
  /// element, in order (the view is valid only during the call); returning false stops the
  /// body (call fail() first to say why). Returns false once the body is known to be broken
  /// (failure() tells why); later feeds then do nothing.
  template <class OnItem>
  bool feed(std::string_view bytes, OnItem&& on_item);

  /// The end of the body: the envelope (the body with every `items` array emptied), or the
  /// error when the body was broken or ended early.
  result<std::string> finish();

  /// Why the body is broken, once it is.
  [[nodiscard]] const std::optional<error>& failure() const noexcept { return failure_; }

  /// Elements delivered so far.
  [[nodiscard]] std::size_t items() const noexcept { return items_; }

  /// Bytes fed so far.
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

  /// Fails the splitter from outside (e.g. an element that did not decode): later feeds do
  /// nothing and finish() returns `why`.
  void fail(error why);

private:
  enum class state : std::uint8_t {
    envelope,         // outside items, not in a string
    envelope_string,  // in a string outside items
    envelope_escape,  // after a backslash in such a string
    items_start,      // just after the '[' of items: an element or ']'
    items_next,       // after a ',': an element
    items_after,      // after an element: ',' or ']'
    element,          // in an object or array element, not in a string
    element_string,   // in a string inside an element (or a string element)
    element_escape,   // after a backslash in such a string
    element_scalar,   // in a number or literal element
  };

  /// The feed loop over one chunk; calls `emit(element)` per element (false = stop).
  bool scan(std::string_view bytes, const std::function<bool(std::string_view)>& emit);
  bool envelope_byte(char c);
  bool complete_element(std::string_view chunk, std::size_t end,
                        const std::function<bool(std::string_view)>& emit);
  bool keep_partial_element(std::string_view chunk);
  /// One byte between the items of the array (whitespace, ',' or the closing ']') or the
  /// first of an item, at offset `i` of the chunk (`at` in the body); false on a malformed one.
  bool between_items(char c, std::size_t i, std::size_t at);
  bool scan_element(std::string_view chunk, std::size_t& i,
                    const std::function<bool(std::string_view)>& emit);
  bool scan_element_string(std::string_view chunk, std::size_t& i,
                           const std::function<bool(std::string_view)>& emit);
  bool malformed(std::string_view what, std::size_t at);
  bool too_large(std::string_view what, std::size_t limit);

  list_limits limits_;
  state state_ = state::envelope;
  std::optional<error> failure_;
  std::size_t bytes_ = 0;
  std::size_t items_ = 0;

  // The envelope and where in it we are.
  std::string envelope_;
  std::size_t depth_ = 0;          // open containers of the envelope
  bool root_is_object_ = false;    // the container at depth 1 is an object
  bool expect_key_ = false;        // at depth 1, the next string is a key
  bool in_key_ = false;            // reading a key at depth 1
  std::string key_;                // its raw text (at most a few bytes are kept)
  bool key_too_long_ = false;      // longer than any spelling of "items"
  bool items_key_ = false;         // the last key at depth 1 was "items"
  bool items_value_next_ = false;  // after `"items":`, the value comes next

  // The element being read.
  std::string element_;  // its bytes from earlier chunks
  std::size_t element_depth_ = 0;
  bool string_element_ = false;  // the element is a string (ends with its closing quote)
  std::size_t offset_ = 0;       // start of the element in the current chunk
};

template <class OnItem>
bool list_splitter::feed(std::string_view bytes, OnItem&& on_item) {
  return scan(bytes, [&](std::string_view element) { return on_item(element); });
}

/// Element `index` of a streamed LIST page (`element`: its JSON text, empty for protobuf),
/// decoded: to on_item(Record&&), or when it is valid JSON of the wrong shape
/// (errc::unexpected_shape), or JSON text that is not UTF-8, to on_skip(const error&), since one
/// bad object must not fail the whole list forever (the server would send it again on every
/// relist, and the controller would never be ready). The splitter found the element's bounds
/// without decoding its strings, so a byte that is not UTF-8 inside them leaves the rest of the
/// page sound. Any other error fails `splitter` (false).
template <class Record, class OnItem, class OnSkip, class Splitter>
bool take_list_item(std::size_t index, result<Record> decoded, OnItem& on_item, OnSkip& on_skip,
                    Splitter& splitter, std::string_view element = {}) {
  if (decoded) {
    on_item(std::move(decoded).value());
    return true;
  }
  error e = decoded.error();
  e.message = "items[" + std::to_string(index) + "]: " + e.message;
  if (e.code == make_error_code(errc::malformed_json) && !element.empty() && !valid_utf8(element)) {
    e.code = make_error_code(errc::unexpected_shape);
    e.message = "items[" + std::to_string(index) + "]: not UTF-8";
  }
  if (e.code == make_error_code(errc::unexpected_shape)) {
    on_skip(e);
    return true;
  }
  splitter.fail(std::move(e));
  return false;
}

/// A JSON LIST page decoded as it streams: a list_splitter whose elements are decoded with
/// DecodeItem as they complete, and whose envelope finish() reads with DecodeList. An element
/// that is valid JSON of the wrong shape (a missing uid, a string where a number belongs, a null)
/// is skipped and reported through `on_skip` (take_list_item). Malformed JSON anywhere fails the
/// page (the stream cannot be trusted), as does any bound (list_limits).
/// Not thread-safe: one per response body.
template <class Record, result<Record> (*DecodeItem)(std::string_view),
          result<list_page<Record>> (*DecodeList)(std::string_view)>
class object_list_decoder {
public:
  explicit object_list_decoder(list_limits limits) : splitter_(limits) {}

  /// Feeds bytes; calls `on_item(Record&&)` for every decoded element and `on_skip(const
  /// error&)` for every skipped one, in order. False once the page is broken (failure()).
  template <class OnItem, class OnSkip>
  bool feed(std::string_view bytes, OnItem&& on_item, OnSkip&& on_skip) {
    return splitter_.feed(bytes, [&](std::string_view element) {
      return take_list_item(splitter_.items() - 1, DecodeItem(element), on_item, on_skip, splitter_,
                            element);
    });
  }

  /// The end of the body: metadata.resourceVersion and metadata.continue (items empty; they
  /// were delivered by feed()), or why the page is broken.
  result<list_page<Record>> finish() {
    auto envelope = splitter_.finish();
    if (!envelope) {
      return envelope.error();
    }
    return DecodeList(envelope.value());
  }

  [[nodiscard]] const std::optional<error>& failure() const noexcept { return splitter_.failure(); }
  /// Bytes fed so far.
  [[nodiscard]] std::size_t bytes() const noexcept { return splitter_.bytes(); }

private:
  list_splitter splitter_;
};

/// A pod or node LIST page decoded as it streams: as object_list_decoder with decode_pod /
/// decode_node, or, when the body starts with protobuf's magic (protobuf.hpp), as protobuf with
/// the same contract. Not thread-safe: one per response body.
template <class Record>
class list_decoder {
  static constexpr bool is_pod = std::is_same_v<Record, pod_record>;

public:
  explicit list_decoder(list_limits limits = {}) : json_(limits), limits_(limits) {}

  /// As object_list_decoder::feed().
  template <class OnItem, class OnSkip>
  bool feed(std::string_view bytes, OnItem&& on_item, OnSkip&& on_skip) {
    if (!protobuf_ && json_.bytes() == 0 && !bytes.empty() && bytes.front() == 'k') {
      protobuf_.emplace(limits_.max_item_bytes, limits_.max_page_bytes);
    }
    if (!protobuf_) {
      return json_.feed(bytes, on_item, on_skip);
    }
    return protobuf_->feed(bytes, [&](std::string_view message) {
      return take_list_item(protobuf_->items() - 1, decode_message(message), on_item, on_skip,
                            *protobuf_);
    });
  }

  /// As object_list_decoder::finish().
  result<list_page<Record>> finish() {
    if (!protobuf_) {
      return json_.finish();
    }
    auto meta = protobuf_->finish();
    if (!meta) {
      return meta.error();
    }
    list_page<Record> page;
    page.resource_version = std::move(meta.value().first);
    page.continue_token = std::move(meta.value().second);
    return page;
  }

  [[nodiscard]] const std::optional<error>& failure() const noexcept {
    return protobuf_ ? protobuf_->failure() : json_.failure();
  }

  /// Bytes fed so far.
  [[nodiscard]] std::size_t bytes() const noexcept {
    return protobuf_ ? protobuf_->bytes() : json_.bytes();
  }

private:
  static result<Record> decode_message(std::string_view message) {
    if constexpr (is_pod) {
      return decode_pod_message(message);
    } else {
      return decode_node_message(message);
    }
  }

  std::conditional_t<is_pod, object_list_decoder<pod_record, &decode_pod, &decode_pod_list>,
                     object_list_decoder<node_record, &decode_node, &decode_node_list>>
      json_;
  std::optional<protobuf_list_splitter> protobuf_;
  list_limits limits_;
};

}  // namespace tec::informers
