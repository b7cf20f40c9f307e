// Fuzz target: the watch-event, list and object decoders (tec/informers/decode.hpp).
//
// Differential: every decoder runs the input through the production decoder (simdjson) and the
// reference decoder (informers_reference.hpp: nlohmann's DOM feeding the same field mapping); both
// must succeed or fail alike, with the same error code, and decode the same records. Known
// differences are skipped: a NUL byte (nlohmann stops there), an integer beyond 64 bits
// (simdjson rejects it) and a repeated key (nlohmann's DOM keeps one copy). Round trip:
// whatever `fast` decoded is encoded again as JSON (nlohmann) and must decode to the same
// record. Plus the decoders' own contract: a decoded pod or node has a name and a uid, a
// failure is malformed_json or unexpected_shape with a message.

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "support.hpp"
#include "support/informers_reference.hpp"
#include "tec/informers/decode.hpp"

namespace tec::informers {
namespace {

using nlohmann::json;

// --- encoding records back to JSON ----------------------------------------------------------

const char* effect_name(controller::taint_effect e) {
  switch (e) {
    case controller::taint_effect::no_schedule:
      return "NoSchedule";
    case controller::taint_effect::prefer_no_schedule:
      return "PreferNoSchedule";
    case controller::taint_effect::no_execute:
      return "NoExecute";
    case controller::taint_effect::unknown:
      break;
  }
  return "SomeFutureEffect";  // any other text decodes as unknown
}

const char* operator_name(controller::toleration_operator op) {
  switch (op) {
    case controller::toleration_operator::equal:
      return "Equal";
    case controller::toleration_operator::exists:
      return "Exists";
    case controller::toleration_operator::lt:
      return "Lt";
    case controller::toleration_operator::gt:
      return "Gt";
    case controller::toleration_operator::unknown:
      break;
  }
  return "SomeFutureOperator";
}

const char* phase_name(controller::pod_phase p) {
  switch (p) {
    case controller::pod_phase::pending:
      return "Pending";
    case controller::pod_phase::running:
      return "Running";
    case controller::pod_phase::succeeded:
      return "Succeeded";
    case controller::pod_phase::failed:
      return "Failed";
    case controller::pod_phase::unknown:
      break;
  }
  return "Unknown";
}

/// Howard Hinnant's civil_from_days: the proleptic Gregorian date of a day since 1970-01-01.
struct civil_date {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

civil_date civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0), m, d};
}

/// `unix_seconds` as RFC 3339 with a 4-digit year: in UTC when that fits, else with the
/// offset (at most 23:59 either way, as the parser allows) that brings it into 0000..9999.
/// nullopt when no offset does (the parser could not have produced the value).
std::optional<std::string> format_rfc3339(std::int64_t unix_seconds) {
  for (const int offset_minutes : {0, 23 * 60 + 59, -(23 * 60 + 59)}) {
    const std::int64_t local = unix_seconds + std::int64_t{offset_minutes} * 60;
    const std::int64_t days = local >= 0 ? local / 86400 : (local - 86399) / 86400;
    const std::int64_t secs = local - days * 86400;
    const civil_date date = civil_from_days(days);
    if (date.year < 0 || date.year > 9999) {
      continue;
    }
    std::array<char, 40> buf{};
    const int minutes = offset_minutes < 0 ? -offset_minutes : offset_minutes;
    const int n = std::snprintf(buf.data(), buf.size(), "%04d-%02u-%02uT%02d:%02d:%02d%c%02d:%02d",
                                static_cast<int>(date.year), date.month, date.day,
                                static_cast<int>(secs / 3600), static_cast<int>(secs / 60 % 60),
                                static_cast<int>(secs % 60), offset_minutes < 0 ? '-' : '+',
                                minutes / 60, minutes % 60);
    return std::string(buf.data(), static_cast<std::size_t>(n));
  }
  return std::nullopt;
}

json encode(const pod_record& r) {
  const controller::pod_view& p = r.pod;
  json metadata = {{"name", p.name},
                   {"namespace", p.namespace_},
                   {"uid", p.uid},
                   {"resourceVersion", r.resource_version}};
  if (p.terminating) {
    metadata["deletionTimestamp"] = "2024-05-01T12:34:56Z";
  }
  if (p.bound_unix != 0) {
    const auto text = format_rfc3339(p.bound_unix);
    TEC_FUZZ_CHECK(text.has_value(), "bind time out of range: " + std::to_string(p.bound_unix));
    metadata["creationTimestamp"] = *text;
  }
  if (p.mirror) {
    metadata["annotations"] = {{"kubernetes.io/config.mirror", "abc"}, {"other", "x"}};
  }
  // A non-controller reference first: only the first controller reference counts.
  json owners = json::array({{{"kind", "NotTheController"}, {"controller", false}}});
  if (!p.owner_kind.empty()) {
    owners.push_back({{"kind", p.owner_kind}, {"controller", true}});
    owners.push_back({{"kind", "SecondController"}, {"controller", true}});
  }
  metadata["ownerReferences"] = std::move(owners);
  json tolerations = json::array();
  for (const controller::toleration& t : p.tolerations) {
    json tol = {{"key", t.key}, {"operator", operator_name(t.op)}, {"value", t.value}};
    tol["effect"] = t.effect ? json(effect_name(*t.effect)) : json(nullptr);
    if (t.seconds) {
      tol["tolerationSeconds"] = *t.seconds;
    }
    tolerations.push_back(std::move(tol));
  }
  json out = {{"kind", "Pod"},
              {"metadata", std::move(metadata)},
              {"spec", {{"nodeName", p.node_name}, {"tolerations", std::move(tolerations)}}}};
  if (p.phase != controller::pod_phase::unknown) {
    out["status"] = {{"phase", phase_name(p.phase)}};
  }
  return out;
}

json encode(const node_record& r) {
  const controller::node_view& n = r.node;
  json taints = json::array();
  for (const controller::taint& t : n.taints) {
    json taint = {{"key", t.key}, {"value", t.value}};
    if (t.effect != controller::taint_effect::unknown) {
      taint["effect"] = effect_name(t.effect);
    }
    if (t.time_added_unix != 0) {
      const auto text = format_rfc3339(t.time_added_unix);
      TEC_FUZZ_CHECK(text.has_value(),
                     "timeAdded out of range: " + std::to_string(t.time_added_unix));
      taint["timeAdded"] = *text;
    }
    taints.push_back(std::move(taint));
  }
  return {{"kind", "Node"},
          {"metadata", {{"name", n.name}, {"resourceVersion", r.resource_version}}},
          {"spec", {{"taints", std::move(taints)}}},
          {"status", {{"conditions", json::array({{{"type", "Ready"}}})}}}};
}

json encode(const api_status& s) {
  return {{"kind", "Status"},
          {"code", s.code},
          {"reason", s.reason},
          {"message", s.message},
          {"status", s.status}};
}

template <class Record>
json encode(const watch_event<Record>& e) {
  json object;
  switch (e.type) {
    case event_type::error:
      object = encode(e.status);
      break;
    case event_type::bookmark:
      object = {{"metadata", {{"resourceVersion", e.object.resource_version}}}};
      break;
    default:
      object = encode(e.object);
      break;
  }
  return {{"type", std::string(to_string(e.type))}, {"object", std::move(object)}};
}

template <class Record>
json encode(const list_page<Record>& page) {
  json items = json::array();
  for (const Record& r : page.items) {
    items.push_back(encode(r));
  }
  return {
      {"kind", "List"},
      {"metadata", {{"resourceVersion", page.resource_version}, {"continue", page.continue_token}}},
      {"items", std::move(items)}};
}

/// Decoded strings come from valid JSON, so they are valid UTF-8: dump() must not throw.
std::string dump(const json& j) {
  try {
    return j.dump();
  } catch (const json::exception& e) {
    fuzz::invariant_failed(__FILE__, __LINE__, "decoded strings are valid UTF-8", e.what());
  }
}

// --- comparing ------------------------------------------------------------------------------

bool same(const pod_record& a, const pod_record& b) {
  return a == b;
}
bool same(const node_record& a, const node_record& b) {
  return a == b;
}
bool same(const api_status& a, const api_status& b) {
  return a == b;
}

template <class Record>
bool same(const watch_event<Record>& a, const watch_event<Record>& b) {
  return a.type == b.type && a.object == b.object && a.status == b.status;
}

template <class Record>
bool same(const list_page<Record>& a, const list_page<Record>& b) {
  return a.items == b.items && a.resource_version == b.resource_version &&
         a.continue_token == b.continue_token;
}

bool complete(const pod_record& r) {
  return !r.pod.name.empty() && !r.pod.uid.empty();
}
bool complete(const node_record& r) {
  return !r.node.name.empty();
}

/// The decoders' own contract on a successful result.
void check_contract(const pod_record& r) {
  TEC_FUZZ_CHECK(complete(r), "pod without name/uid");
}
void check_contract(const node_record& r) {
  TEC_FUZZ_CHECK(complete(r), "node without name");
}
void check_contract(const api_status& /*s*/) {}

template <class Record>
void check_contract(const watch_event<Record>& e) {
  if (e.type == event_type::bookmark) {
    TEC_FUZZ_CHECK(!e.resource_version().empty(), "BOOKMARK without resourceVersion");
  } else if (e.type != event_type::error) {
    TEC_FUZZ_CHECK(complete(e.object), "event object without name/uid");
  }
}

result<pod_record> decode_one(std::string_view json_text, pod_record* /*tag*/) {
  return decode_pod(json_text);
}
result<node_record> decode_one(std::string_view json_text, node_record* /*tag*/) {
  return decode_node(json_text);
}

/// `input` parsed by nlohmann, or nullopt when it is not JSON; `repeated` tells whether an
/// object repeats a key.
std::optional<json> parse_noting_repeated_keys(std::string_view input, bool& repeated) {
  std::vector<std::set<std::string>> keys;  // per open object
  repeated = false;
  const json::parser_callback_t note_keys = [&](int /*depth*/, json::parse_event_t event,
                                                json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty()) {
      repeated = repeated || !keys.back().insert(parsed.get<std::string>()).second;
    }
    return true;
  };
  json doc = json::parse(input, note_keys, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return std::nullopt;
  }
  return doc;
}

/// A list decodes each item as decode_pod/decode_node decodes it alone (the walker keeps
/// per-object state across the items of a page). `input` decoded as a list.
/// Skipped when an object repeats a key: the walker sees every copy, a DOM only the last
/// (Go's decoder lets the last one win too; the API server never repeats keys).
template <class Record>
void check_items_alone(std::string_view input, const list_page<Record>& page) {
  bool repeated = false;
  std::optional<json> parsed = parse_noting_repeated_keys(input, repeated);
  TEC_FUZZ_CHECK(parsed.has_value(), "a decoded list is valid JSON");
  if (repeated) {
    return;
  }
  const json& doc = *parsed;
  const json* items = doc.contains("items") ? &doc["items"] : nullptr;
  if (items == nullptr || !items->is_array()) {
    TEC_FUZZ_CHECK(page.items.empty(), "items without an items array");
    return;
  }
  TEC_FUZZ_CHECK(items->size() == page.items.size(), "item count");
  for (std::size_t i = 0; i < page.items.size(); ++i) {
    const std::string alone = dump((*items)[i]);
    const auto one = decode_one(alone, static_cast<Record*>(nullptr));
    TEC_FUZZ_CHECK(one.has_value() && same(one.value(), page.items[i]),
                   "items[" + std::to_string(i) + "] decodes differently alone: " + alone);
  }
}

template <class Record>
void check_contract(const list_page<Record>& page) {
  for (const Record& r : page.items) {
    TEC_FUZZ_CHECK(complete(r), "list item without name/uid");
  }
}

void check_error(const error& e) {
  TEC_FUZZ_CHECK(e.code == make_error_code(errc::malformed_json) ||
                     e.code == make_error_code(errc::unexpected_shape),
                 e.message);
  TEC_FUZZ_CHECK(!e.message.empty(), "an error without a message");
}

template <class T>
void check_against_input(std::string_view /*input*/, const T& /*value*/) {}

template <class Record>
void check_against_input(std::string_view input, const list_page<Record>& page) {
  check_items_alone(input, page);
}

/// Whether `input` has 19 digits in a row: it may hold an integer outside [-2^63, 2^64).
bool has_long_digit_run(std::string_view input) {
  std::size_t run = 0;
  for (const char c : input) {
    run = c >= '0' && c <= '9' ? run + 1 : 0;
    if (run >= 19) {
      return true;
    }
  }
  return false;
}

/// Runs the production decoder `decode` and its reference `reference_decode` (nlohmann's DOM,
/// informers_reference.hpp), compares, checks the contract and the round trip.
template <class Decode, class ReferenceDecode>
void differential(std::string_view input, Decode decode, ReferenceDecode reference_decode) {
  const auto fast = decode(input);
  if (input.find('\0') != std::string_view::npos) {
    // nlohmann's lexer takes a NUL byte for the end of the input, so the reference accepts
    // `{...}<NUL>anything`. JSON has no place for a NUL outside a string, nor inside one
    // unescaped: `fast` must reject it (as malformed, or for a wrong shape found before).
    TEC_FUZZ_CHECK(!fast, "accepted a NUL byte");
    check_error(fast.error());
    return;
  }
  const auto reference = reference_decode(input);
  bool repeated = false;
  if (parse_noting_repeated_keys(input, repeated) && repeated) {
    // The walker sees every copy of a repeated key, nlohmann's DOM the last: only the
    // contract holds.
    if (fast) {
      check_contract(fast.value());
    } else {
      check_error(fast.error());
    }
    return;
  }
  if (!fast && fast.error().code == make_error_code(errc::malformed_json) &&
      has_long_digit_run(input)) {
    return;  // an integer beyond 64 bits: simdjson rejects it, nlohmann reads a float
  }
  TEC_FUZZ_CHECK(fast.has_value() == reference.has_value(),
                 std::string("fast: ") + (fast ? "ok" : fast.error().message) +
                     "\nnlohmann: " + (reference ? "ok" : reference.error().message));
  if (!fast) {
    check_error(fast.error());
    check_error(reference.error());
    TEC_FUZZ_CHECK(fast.error().code == reference.error().code,
                   "fast: " + fast.error().message + "\nnlohmann: " + reference.error().message);
    return;
  }
  TEC_FUZZ_CHECK(same(fast.value(), reference.value()), "the engines decoded different records");
  check_contract(fast.value());
  check_against_input(input, fast.value());

  const std::string again = dump(encode(fast.value()));
  const auto round_trip = decode(again);
  TEC_FUZZ_CHECK(round_trip.has_value(), "re-encoded: " + again + "\nerror: " +
                                             (round_trip ? "" : round_trip.error().message));
  TEC_FUZZ_CHECK(same(fast.value(), round_trip.value()), "re-encoded: " + again);
}

}  // namespace
}  // namespace tec::informers

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tec::informers;
  const std::string_view input = tec::fuzz::as_text(data, size);
  differential(input, decode_pod_event, reference::decode_pod_event);
  differential(input, decode_node_event, reference::decode_node_event);
  differential(input, decode_pod_list, reference::decode_pod_list);
  differential(input, decode_node_list, reference::decode_node_list);
  differential(input, decode_pod, reference::decode_pod);
  differential(input, decode_node, reference::decode_node);
  differential(input, decode_status, reference::decode_status);
  return 0;
}
