#include "tec/informers/decode.hpp"

#include <simdjson.h>

#include "json_walk.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

// The JSON path: simdjson's DOM parser validates the whole text (RFC 8259, UTF-8, numbers,
// escapes), then the walker (json_walk.hpp) reads the few fields we need from its tape and skips
// every other value uncopied. Not simdjson's On-Demand API: it is lazy (malformed text in a
// skipped value may pass) and was slower than a DOM parse per object on 10,000 realistic pods;
// not nlohmann's DOM: over ten times as long for the same mapping (BENCHMARKS.md). The walker is
// generic over the DOM so that the tests' reference decoder (tests/support/) can feed it from
// nlohmann's, an independent parser, and compare.

namespace tec::informers {
namespace {

using json_walk::value_kind;
using json_walk::walker;

/// keep_pod_labels(): read once per metadata object, set once at start-up.
std::atomic<bool> keep_labels{false};

static_assert(json_walk::max_json_depth == simdjson::DEFAULT_MAX_DEPTH);

/// The walker's view of simdjson's DOM (the production engine). Only called on values of the
/// kind asked for, so the unchecked accessors cannot fail.
struct simdjson_dom {
  using node = simdjson::dom::element;

  static value_kind kind(const node& n) noexcept {
    switch (n.type()) {
      case simdjson::dom::element_type::NULL_VALUE:
        return value_kind::null;
      case simdjson::dom::element_type::BOOL:
        return value_kind::boolean;
      case simdjson::dom::element_type::INT64:
        return value_kind::signed_integer;
      case simdjson::dom::element_type::UINT64:
        return n.get_uint64().value_unsafe() >
                       static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                   ? value_kind::unsigned_integer
                   : value_kind::signed_integer;
      case simdjson::dom::element_type::DOUBLE:
        return value_kind::floating;
      case simdjson::dom::element_type::STRING:
        return value_kind::string;
      case simdjson::dom::element_type::ARRAY:
        return value_kind::array;
      case simdjson::dom::element_type::OBJECT:
        return value_kind::object;
    }
    return value_kind::null;
  }
  static bool boolean(const node& n) noexcept { return n.get_bool().value_unsafe(); }
  static std::int64_t integer(const node& n) noexcept {
    return n.type() == simdjson::dom::element_type::INT64
               ? n.get_int64().value_unsafe()
               : static_cast<std::int64_t>(n.get_uint64().value_unsafe());
  }
  static double floating(const node& n) noexcept { return n.get_double().value_unsafe(); }
  static std::string_view string(const node& n) noexcept { return n.get_string().value_unsafe(); }
  /// Calls f(key, value) for every member in document order (repeated keys included) until
  /// f returns false.
  template <class F>
  static bool each_member(const node& n, F&& f) {
    const simdjson::dom::object object = n.get_object().value_unsafe();
    for (const simdjson::dom::key_value_pair member : object) {
      if (!f(member.key, member.value)) {
        return false;
      }
    }
    return true;
  }
  template <class F>
  static bool each_element(const node& n, F&& f) {
    const simdjson::dom::array array = n.get_array().value_unsafe();
    for (const simdjson::dom::element element : array) {
      if (!f(element)) {
        return false;
      }
    }
    return true;
  }
};

/// simdjson's DOM parser for this thread. Reused, so that decoding a stream allocates only
/// the records once the parser has grown to the largest object; a parse that grew it past
/// retained_capacity gives that memory back when the lease ends. Not reentrant: one lease at
/// a time per thread (nothing decodes while holding one).
class parser_lease {
public:
  parser_lease() = default;
  parser_lease(const parser_lease&) = delete;
  parser_lease& operator=(const parser_lease&) = delete;
  ~parser_lease() {
    if (parser().capacity() > retained_capacity) {
      parser() = simdjson::dom::parser{};
    }
  }

  /// Parses `text` (copied into the parser's padded buffer: simdjson reads up to
  /// SIMDJSON_PADDING bytes past the end). The result lives until the next parse.
  simdjson::simdjson_result<simdjson::dom::element> parse(std::string_view text) {
    return parser().parse(text.data(), text.size(), /*realloc_if_needed=*/true);
  }

private:
  static constexpr std::size_t retained_capacity = std::size_t{128} << 10U;

  static simdjson::dom::parser& parser() {
    thread_local simdjson::dom::parser p;
    return p;
  }
};

/// Parses `text` with simdjson and walks it; false when the walker recorded an error.
struct simdjson_parse {
  template <class Record>
  bool operator()(walker<Record>& w, std::string_view text) const {
    parser_lease lease;
    const auto doc = lease.parse(json_walk::without_bom(text));
    if (doc.error() != simdjson::SUCCESS) {
      return w.malformed(simdjson::error_message(doc.error()));
    }
    return w.template walk<simdjson_dom>(doc.value_unsafe());
  }
};

/// The watch event types as the API server spells them, in event_type's order.
constexpr std::array<std::string_view, 5> event_type_names = {"ADDED", "MODIFIED", "DELETED",
                                                              "BOOKMARK", "ERROR"};

}  // namespace

std::optional<event_type> parse_event_type(std::string_view text) noexcept {
  const auto* const it = std::find(event_type_names.begin(), event_type_names.end(), text);
  if (it == event_type_names.end()) {
    return std::nullopt;
  }
  return static_cast<event_type>(it - event_type_names.begin());
}

std::string_view to_string(event_type type) noexcept {
  const auto i = static_cast<std::size_t>(type);
  return i < event_type_names.size() ? event_type_names[i] : "UNKNOWN";
}

result<pod_event> decode_pod_event(std::string_view line) {
  return json_walk::decode_event<pod_record>(line, "pod watch event", simdjson_parse{});
}

result<node_event> decode_node_event(std::string_view line) {
  return json_walk::decode_event<node_record>(line, "node watch event", simdjson_parse{});
}

result<pod_list> decode_pod_list(std::string_view body) {
  return json_walk::decode_list<pod_record>(body, "pod list", simdjson_parse{});
}

result<node_list> decode_node_list(std::string_view body) {
  return json_walk::decode_list<node_record>(body, "node list", simdjson_parse{});
}

bool valid_utf8(std::string_view text) noexcept {
  return simdjson::validate_utf8(text.data(), text.size());
}

result<pod_record> decode_pod(std::string_view json_text) {
  return json_walk::decode_object<pod_record>(json_text, "pod", simdjson_parse{});
}

result<node_record> decode_node(std::string_view json_text) {
  return json_walk::decode_object<node_record>(json_text, "node", simdjson_parse{});
}

// ---- list_splitter ------------------------------------------------------------------------

namespace {

constexpr bool is_ws(char c) noexcept {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/// Bytes that matter while skipping through an element outside its strings.
constexpr std::array<bool, 256> element_marks = [] {
  std::array<bool, 256> t{};
  for (const char c : {'"', '{', '[', '}', ']'}) {
    t[static_cast<unsigned char>(c)] = true;
  }
  return t;
}();

/// A key of the root object as written (escapes included) is "items".
bool is_items_key(const std::string& raw) {
  if (raw.find('\\') == std::string::npos) {
    return raw == "items";
  }
  // Called between elements, never while a decode holds the thread's parser.
  parser_lease lease;
  const auto key = lease.parse("\"" + raw + "\"");
  return key.error() == simdjson::SUCCESS && key.value_unsafe().is_string() &&
         key.value_unsafe().get_string().value_unsafe() == "items";
}

}  // namespace

void list_splitter::fail(error why) {
  if (!failure_) {
    failure_ = std::move(why);
  }
  std::string().swap(element_);
  std::string().swap(envelope_);
}

bool list_splitter::malformed(std::string_view what, std::size_t at) {
  fail(make_error(errc::malformed_json,
                  "list: malformed JSON at byte " + std::to_string(at) + ": " + std::string(what)));
  return false;
}

bool list_splitter::too_large(std::string_view what, std::size_t limit) {
  fail(make_error(errc::response_too_large, "list: " + std::string(what) + " is larger than " +
                                                std::to_string(limit) + " bytes (after " +
                                                std::to_string(items_) + " items)"));
  return false;
}

bool list_splitter::envelope_byte(char c) {
  if (envelope_.size() >= limits_.max_item_bytes) {
    return too_large("the part of the body outside items", limits_.max_item_bytes);
  }
  envelope_.push_back(c);
  switch (state_) {
    case state::envelope_escape:
      state_ = state::envelope_string;
      break;
    case state::envelope_string:
      if (c == '\\') {
        state_ = state::envelope_escape;
      } else if (c == '"') {
        state_ = state::envelope;
        if (in_key_) {
          in_key_ = false;
          expect_key_ = false;
          items_key_ = !key_too_long_ && is_items_key(key_);
        }
        return true;
      }
      break;
    default:
      switch (c) {
        case '"':
          state_ = state::envelope_string;
          if (depth_ == 1 && root_is_object_ && expect_key_) {
            in_key_ = true;
            key_.clear();
            key_too_long_ = false;
          }
          return true;
        case '{':
        case '[':
          if (++depth_ == 1) {
            root_is_object_ = c == '{';
            expect_key_ = root_is_object_;
          }
          return true;
        case '}':
        case ']':
          // A mismatched bracket is left for the envelope's decoder to report.
          if (depth_ > 0) {
            --depth_;
          }
          return true;
        case ',':
          expect_key_ = depth_ == 1 && root_is_object_;
          return true;
        case ':':
          if (depth_ == 1 && root_is_object_) {
            items_value_next_ = items_key_;
            items_key_ = false;
          }
          return true;
        default:
          return true;
      }
  }
  if (in_key_) {
    // No spelling of "items" (even fully \u-escaped) is longer than this.
    if (key_.size() < 32) {
      key_.push_back(c);
    } else {
      key_too_long_ = true;
    }
  }
  return true;
}

bool list_splitter::keep_partial_element(std::string_view chunk) {
  const std::size_t piece = chunk.size() - offset_;
  if (element_.size() + piece > limits_.max_item_bytes) {
    return too_large("item " + std::to_string(items_), limits_.max_item_bytes);
  }
  element_.append(chunk.substr(offset_));
  return true;
}

bool list_splitter::complete_element(std::string_view chunk, std::size_t end,
                                     const std::function<bool(std::string_view)>& emit) {
  const std::size_t piece = end - offset_;
  if (element_.size() + piece > limits_.max_item_bytes) {
    return too_large("item " + std::to_string(items_), limits_.max_item_bytes);
  }
  std::string_view text = chunk.substr(offset_, piece);
  if (!element_.empty()) {
    element_.append(text);
    text = element_;
  }
  ++items_;
  state_ = state::items_after;
  const bool keep = emit(text);
  // Keep a modest buffer for reuse; give back what an unusually large item grew it to.
  if (element_.capacity() > (std::size_t{1} << 20U)) {
    std::string().swap(element_);
  } else {
    element_.clear();
  }
  if (!keep) {
    if (!failure_) {
      fail(make_error(errc::malformed_json, "list: stopped at item " + std::to_string(items_)));
    }
    return false;
  }
  return true;
}

bool list_splitter::between_items(char c, std::size_t i, std::size_t at) {
  if (is_ws(c)) {
    return true;
  }
  if (state_ == state::items_after || c == ']') {
    if (c == ']' && state_ != state::items_next) {
      envelope_.push_back(']');  // the '[' was counted against the bound
      state_ = state::envelope;
    } else if (c == ',' && state_ == state::items_after) {
      state_ = state::items_next;
    } else {
      return malformed(state_ == state::items_after ? "expected ',' or ']' after an item"
                                                    : "expected an item after ','",
                       at);
    }
    return true;
  }
  offset_ = i;
  element_.clear();
  string_element_ = false;
  if (c == '{' || c == '[') {
    element_depth_ = 1;
    state_ = state::element;
  } else if (c == '"') {
    string_element_ = true;
    state_ = state::element_string;
  } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
    state_ = state::element_scalar;
  } else {
    return malformed("expected an item", at);
  }
  return true;
}

// Inside an element, outside its strings, from chunk[i]: to the next mark (a string, a
// nested value, its end), i past it; false when its end was refused.
bool list_splitter::scan_element(std::string_view chunk, std::size_t& i,
                                 const std::function<bool(std::string_view)>& emit) {
  const char* const p = chunk.data();
  const std::size_t n = chunk.size();
  while (i < n && !element_marks[static_cast<unsigned char>(p[i])]) {
    ++i;
  }
  if (i == n) {
    return true;
  }
  if (p[i] == '"') {
    state_ = state::element_string;
  } else if (p[i] == '{' || p[i] == '[') {
    ++element_depth_;
  } else if (--element_depth_ == 0) {
    if (!complete_element(chunk, i + 1, emit)) {
      return false;
    }
  }
  ++i;
  return true;
}

// Inside a string of an element (or an element that is a string), from chunk[i]: to its end or
// an escape, i past it; false when a string element's end was refused.
bool list_splitter::scan_element_string(std::string_view chunk, std::size_t& i,
                                        const std::function<bool(std::string_view)>& emit) {
  const char* const p = chunk.data();
  const std::size_t n = chunk.size();
  while (i < n && p[i] != '"' && p[i] != '\\') {
    ++i;
  }
  if (i == n) {
    return true;
  }
  ++i;
  if (p[i - 1] == '\\') {
    state_ = state::element_escape;
  } else if (string_element_) {
    return complete_element(chunk, i, emit);
  } else {
    state_ = state::element;
  }
  return true;
}

bool list_splitter::scan(std::string_view chunk,
                         const std::function<bool(std::string_view)>& emit) {
  if (failure_) {
    return false;
  }
  const std::size_t base = bytes_;
  if (chunk.size() > limits_.max_page_bytes - std::min(bytes_, limits_.max_page_bytes)) {
    bytes_ += chunk.size();
    return too_large("the body", limits_.max_page_bytes);
  }
  bytes_ += chunk.size();
  offset_ = 0;  // an element in progress continues at the start of this chunk
  const char* const p = chunk.data();
  const std::size_t n = chunk.size();
  std::size_t i = 0;
  while (i < n) {
    switch (state_) {
      case state::envelope:
        if (items_value_next_ && !is_ws(p[i])) {
          items_value_next_ = false;
          if (p[i] == '[') {
            if (envelope_.size() >= limits_.max_item_bytes) {
              return too_large("the part of the body outside items", limits_.max_item_bytes);
            }
            envelope_.push_back('[');
            state_ = state::items_start;
            ++i;
            break;
          }
        }
        [[fallthrough]];
      case state::envelope_string:
      case state::envelope_escape:
        if (!envelope_byte(p[i])) {
          return false;
        }
        ++i;
        break;
      case state::items_start:
      case state::items_next:
      case state::items_after:
        if (!between_items(p[i], i, base + i)) {
          return false;
        }
        ++i;
        break;
      case state::element:
        if (!scan_element(chunk, i, emit)) {
          return false;
        }
        break;
      case state::element_string:
        if (!scan_element_string(chunk, i, emit)) {
          return false;
        }
        break;
      case state::element_escape:
        state_ = state::element_string;
        ++i;
        break;
      case state::element_scalar:
        while (i < n && p[i] != ',' && p[i] != ']' && !is_ws(p[i])) {
          ++i;
        }
        if (i < n && !complete_element(chunk, i, emit)) {
          return false;
        }
        break;
    }
  }
  switch (state_) {
    case state::element:
    case state::element_string:
    case state::element_escape:
    case state::element_scalar:
      return keep_partial_element(chunk);
    default:
      return true;
  }
}

result<std::string> list_splitter::finish() {
  if (failure_) {
    return *failure_;
  }
  switch (state_) {
    case state::envelope:
    case state::envelope_string:
    case state::envelope_escape:
      // An envelope cut short is reported by its decoder ("unexpected end of input").
      return std::move(envelope_);
    default:
      malformed("unexpected end of input inside items", bytes_);
      return *failure_;
  }
}

bool keeping_pod_labels() noexcept {
  return keep_labels.load(std::memory_order_relaxed);
}

void keep_pod_labels(bool keep) noexcept {
  keep_labels.store(keep, std::memory_order_relaxed);
}

result<api_status> decode_status(std::string_view json_text) {
  return json_walk::decode_status(json_text, simdjson_parse{});
}

}  // namespace tec::informers
