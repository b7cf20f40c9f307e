#include "tec/reports/evictions_report.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "tec/base/error.hpp"
#include "tec/base/rfc3339.hpp"

namespace tec::reports {

namespace {

using nlohmann::ordered_json;  // the fields in the documented order

std::string ms(base::wall_clock::time_point t) {
  return base::format_rfc3339(t, base::rfc3339_digits::milliseconds);
}

std::string str(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

std::optional<std::string> optional_str(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return std::nullopt;
  }
  return it->get<std::string>();
}

bool flag(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

eviction_entry entry_from(const nlohmann::json& e) {
  eviction_entry out;
  out.pod = str(e, "pod");
  out.uid = str(e, "uid");
  out.node = str(e, "node");
  if (const auto t = e.find("taints"); t != e.end() && t->is_array()) {
    for (const auto& x : *t) {
      if (x.is_string()) {
        out.taints.push_back(x.get<std::string>());
      }
    }
  }
  out.due = str(e, "due");
  out.state = str(e, "state");
  out.why = str(e, "why");
  if (const auto a = e.find("attempts"); a != e.end() && a->is_number_integer()) {
    out.attempts = a->get<std::int64_t>();
  }
  out.last_error = str(e, "lastError");
  out.blocked_since = optional_str(e, "blockedSince");
  if (out.blocked_since) {
    out.fallback_at = optional_str(e, "fallbackAt");
  }
  return out;
}

ordered_json entry_json(const eviction_entry& e) {
  ordered_json item;
  item["pod"] = e.pod;
  item["uid"] = e.uid;
  item["node"] = e.node;
  item["taints"] = e.taints;
  item["due"] = e.due;
  item["state"] = e.state;
  item["why"] = e.why;
  item["attempts"] = e.attempts;
  item["lastError"] = e.last_error;
  if (e.blocked_since) {
    item["blockedSince"] = *e.blocked_since;
    item["fallbackAt"] = e.fallback_at ? ordered_json(*e.fallback_at) : ordered_json();
  }
  return item;
}

std::string text(const ordered_json& j) {
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace

evictions_document evictions_document_of(const controller::eviction_list& list, bool acting,
                                         const base::clock_bridge& clock,
                                         base::wall_clock::time_point generated_at) {
  evictions_document doc;
  doc.generated_at = ms(generated_at);
  doc.acting = acting;
  doc.total = list.total;
  doc.truncated = list.total > list.evictions.size();
  doc.evictions.reserve(list.evictions.size());
  for (const controller::eviction_view& v : list.evictions) {
    eviction_entry e;
    e.pod = v.pod.namespace_ + "/" + v.pod.name;
    e.uid = v.pod.uid;
    e.node = v.node;
    for (const controller::taint& t : v.taints) {
      e.taints.push_back(controller::describe_taint(t));
    }
    e.due = ms(clock.wall(v.due));
    e.state = v.state;
    e.why = v.why;
    e.attempts = static_cast<std::int64_t>(v.attempts);
    e.last_error = v.last_error;
    if (v.blocked_since) {
      e.blocked_since = ms(clock.wall(*v.blocked_since));
      if (v.fallback_at) {
        e.fallback_at = ms(clock.wall(*v.fallback_at));
      }
    }
    doc.evictions.push_back(std::move(e));
  }
  return doc;
}

std::string to_json(const evictions_document& doc) {
  ordered_json out;
  out["generatedAt"] = doc.generated_at;
  out["acting"] = doc.acting;
  out["total"] = doc.total;
  out["truncated"] = doc.truncated;
  ordered_json items = ordered_json::array();
  for (const eviction_entry& e : doc.evictions) {
    items.push_back(entry_json(e));
  }
  out["evictions"] = std::move(items);
  return text(out);
}

std::string to_json(const eviction_entry& e) {
  return text(entry_json(e));
}

std::string_view namespace_of(const eviction_entry& e) {
  const auto slash = e.pod.find('/');
  return slash == std::string::npos ? std::string_view{} : std::string_view(e.pod).substr(0, slash);
}

std::string_view name_of(const eviction_entry& e) {
  const auto slash = e.pod.find('/');
  return slash == std::string::npos ? std::string_view(e.pod)
                                    : std::string_view(e.pod).substr(slash + 1);
}

base::result<evictions_document> parse_evictions_document(std::string_view body) {
  const auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("evictions") ||
      !doc["evictions"].is_array()) {
    return base::make_error(base::errc::unexpected_shape,
                            "/debug/evictions: not the evictions document");
  }
  evictions_document out;
  out.generated_at = str(doc, "generatedAt");
  out.acting = flag(doc, "acting");
  if (const auto t = doc.find("total"); t != doc.end() && t->is_number_unsigned()) {
    out.total = t->get<std::size_t>();
  }
  out.truncated = flag(doc, "truncated");
  for (const auto& e : doc["evictions"]) {
    if (e.is_object()) {
      out.evictions.push_back(entry_from(e));
    }
  }
  return out;
}

std::string evictions_json(const controller::eviction_list& list, bool acting,
                           const base::clock_bridge& clock,
                           base::wall_clock::time_point generated_at) {
  return to_json(evictions_document_of(list, acting, clock, generated_at));
}

}  // namespace tec::reports
