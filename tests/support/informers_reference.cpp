#include "support/informers_reference.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "json_walk.hpp"

namespace tec::informers::reference {
namespace {

using json_walk::value_kind;
using json_walk::walker;
using nlohmann::ordered_json;

/// The same view of nlohmann's (ordered) DOM: the reference engine of the tests.
struct nlohmann_dom {
  using node = ordered_json;

  static value_kind kind(const node& n) noexcept {
    switch (n.type()) {
      case ordered_json::value_t::boolean:
        return value_kind::boolean;
      case ordered_json::value_t::number_integer:
        return value_kind::signed_integer;
      case ordered_json::value_t::number_unsigned:
        return n.get<std::uint64_t>() >
                       static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                   ? value_kind::unsigned_integer
                   : value_kind::signed_integer;
      case ordered_json::value_t::number_float:
        return value_kind::floating;
      case ordered_json::value_t::string:
        return value_kind::string;
      case ordered_json::value_t::array:
        return value_kind::array;
      case ordered_json::value_t::object:
        return value_kind::object;
      default:
        return value_kind::null;
    }
  }
  static bool boolean(const node& n) { return n.get<bool>(); }
  static std::int64_t integer(const node& n) {
    return n.is_number_unsigned() ? static_cast<std::int64_t>(n.get<std::uint64_t>())
                                  : n.get<std::int64_t>();
  }
  static double floating(const node& n) { return n.get<double>(); }
  static std::string_view string(const node& n) { return n.get_ref<const std::string&>(); }
  template <class F>
  static bool each_member(const node& n, F&& f) {
    for (const auto& [key, value] : n.get_ref<const ordered_json::object_t&>()) {
      if (!f(std::string_view(key), value)) {
        return false;
      }
    }
    return true;
  }
  template <class F>
  static bool each_element(const node& n, F&& f) {
    for (const ordered_json& element : n.get_ref<const ordered_json::array_t&>()) {
      if (!f(element)) {
        return false;
      }
    }
    return true;
  }
};

/// Parses `text` with nlohmann's strict parser (simdjson's depth limit) and walks it.
struct nlohmann_parse {
  template <class Record>
  bool operator()(walker<Record>& w, std::string_view text) const {
    text = json_walk::without_bom(text);
    bool too_deep = false;
    const ordered_json::parser_callback_t depth_check =
        [&](int depth, ordered_json::parse_event_t event, ordered_json& /*parsed*/) {
          if ((event == ordered_json::parse_event_t::object_start ||
               event == ordered_json::parse_event_t::array_start) &&
              static_cast<std::size_t>(depth) >= json_walk::max_json_depth) {
            too_deep = true;
          }
          return true;
        };
    const ordered_json doc =
        ordered_json::parse(text.begin(), text.end(), depth_check, /*allow_exceptions=*/false);
    if (too_deep) {
      return w.malformed("too deep");
    }
    if (doc.is_discarded()) {
      return w.malformed("nlohmann rejected it");
    }
    return w.template walk<nlohmann_dom>(doc);
  }
};

}  // namespace

result<pod_event> decode_pod_event(std::string_view line) {
  return json_walk::decode_event<pod_record>(line, "pod watch event", nlohmann_parse{});
}

result<node_event> decode_node_event(std::string_view line) {
  return json_walk::decode_event<node_record>(line, "node watch event", nlohmann_parse{});
}

result<pod_list> decode_pod_list(std::string_view body) {
  return json_walk::decode_list<pod_record>(body, "pod list", nlohmann_parse{});
}

result<node_list> decode_node_list(std::string_view body) {
  return json_walk::decode_list<node_record>(body, "node list", nlohmann_parse{});
}

result<pod_record> decode_pod(std::string_view json) {
  return json_walk::decode_object<pod_record>(json, "pod", nlohmann_parse{});
}

result<node_record> decode_node(std::string_view json) {
  return json_walk::decode_object<node_record>(json, "node", nlohmann_parse{});
}

result<api_status> decode_status(std::string_view json) {
  return json_walk::decode_status(json, nlohmann_parse{});
}

}  // namespace tec::informers::reference
