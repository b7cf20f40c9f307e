#include "tec/reports/eviction_history.hpp"

#include <boost/url/parse_query.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "tec/base/error.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/base/sanitize.hpp"

namespace tec::reports {

namespace {

using nlohmann::ordered_json;  // the fields in the documented order

void clip(std::string& s) {
  if (s.size() > max_history_string || std::any_of(s.begin(), s.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20;
      })) {
    s = base::sanitize_message(s, max_history_string);
  }
}

void clip(std::vector<std::string>& list) {
  if (list.size() > max_history_list) {
    const std::size_t dropped = list.size() - (max_history_list - 1);
    list.resize(max_history_list - 1);
    list.push_back("... " + std::to_string(dropped) + " more");
  }
  for (std::string& s : list) {
    clip(s);
  }
}

std::string when(std::chrono::system_clock::time_point t) {
  return base::format_rfc3339(t, base::rfc3339_digits::milliseconds);
}

ordered_json json_of(const history_record& rec) {
  ordered_json j;
  j["pod"] = rec.pod;
  j["uid"] = rec.uid;
  j["node"] = rec.node;
  j["taints"] = rec.taints;
  if (rec.toleration) {
    const history_toleration& t = *rec.toleration;
    ordered_json tol;
    tol["key"] = t.key;
    tol["operator"] = t.op;
    tol["value"] = t.value;
    tol["effect"] = t.effect;
    tol["tolerationSeconds"] = t.seconds ? ordered_json(*t.seconds) : ordered_json();
    j["toleration"] = std::move(tol);
  } else {
    j["toleration"] = nullptr;
  }
  j["scheduledAt"] = when(rec.scheduled_at);
  j["due"] = when(rec.due);
  j["done"] = when(rec.done);
  j["attempts"] = rec.attempts;
  j["policy"] = rec.policy;
  j["result"] = rec.result;
  j["lastError"] = rec.last_error;
  return j;
}

std::string dump(const ordered_json& j) {
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

bool selects(const history_filter& f, const history_record& rec) {
  return (f.pod.empty() || f.pod == rec.pod) && (f.node.empty() || f.node == rec.node);
}

std::string str(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

std::uint64_t count_of(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

std::vector<std::string> strings(const nlohmann::json& obj, const char* key) {
  std::vector<std::string> out;
  if (const auto it = obj.find(key); it != obj.end() && it->is_array()) {
    for (const auto& x : *it) {
      if (x.is_string()) {
        out.push_back(x.get<std::string>());
      }
    }
  }
  return out;
}

// A time as when() wrote it, its milliseconds kept (base::parse_rfc3339 reads the seconds);
// the epoch when it does not parse.
std::chrono::system_clock::time_point time_of(std::string_view text) {
  const auto seconds = base::parse_rfc3339(text);
  if (!seconds) {
    return {};
  }
  std::chrono::system_clock::time_point t{std::chrono::seconds(*seconds)};
  if (const auto dot = text.find('.'); dot != std::string_view::npos) {
    std::int64_t ms = 0;
    int digits = 0;
    for (std::size_t i = dot + 1; i < text.size() && digits < 3; ++i, ++digits) {
      if (text[i] < '0' || text[i] > '9') {
        break;
      }
      ms = ms * 10 + (text[i] - '0');
    }
    for (; digits < 3; ++digits) {
      ms *= 10;
    }
    t += std::chrono::milliseconds(ms);
  }
  return t;
}

history_record record_of(const nlohmann::json& r) {
  history_record rec;
  rec.pod = str(r, "pod");
  rec.uid = str(r, "uid");
  rec.node = str(r, "node");
  rec.taints = strings(r, "taints");
  if (const auto t = r.find("toleration"); t != r.end() && t->is_object()) {
    history_toleration tol;
    tol.key = str(*t, "key");
    tol.op = str(*t, "operator");
    tol.value = str(*t, "value");
    tol.effect = str(*t, "effect");
    if (const auto s = t->find("tolerationSeconds"); s != t->end() && s->is_number_integer()) {
      tol.seconds = s->get<std::int64_t>();
    }
    rec.toleration = std::move(tol);
  }
  rec.scheduled_at = time_of(str(r, "scheduledAt"));
  rec.due = time_of(str(r, "due"));
  rec.done = time_of(str(r, "done"));
  rec.attempts =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(count_of(r, "attempts"), UINT32_MAX));
  rec.policy = strings(r, "policy");
  rec.result = str(r, "result");
  rec.last_error = str(r, "lastError");
  return rec;
}

}  // namespace

history_record clipped(history_record rec) {
  clip(rec.pod);
  clip(rec.uid);
  clip(rec.node);
  clip(rec.taints);
  if (rec.toleration) {
    clip(rec.toleration->key);
    clip(rec.toleration->op);
    clip(rec.toleration->value);
    clip(rec.toleration->effect);
  }
  clip(rec.policy);
  clip(rec.result);
  clip(rec.last_error);
  return rec;
}

std::string to_json(const history_record& rec) {
  return dump(json_of(rec));
}

base::result<history_filter> parse_history_query(std::string_view query) {
  const auto bad = [](std::string what) {
    return base::error{std::make_error_code(std::errc::invalid_argument),
                       "/debug/history: " + std::move(what), 400};
  };
  history_filter f;
  if (query.empty()) {
    return f;
  }
  const auto params = boost::urls::parse_query(query);
  if (!params) {
    return bad("the query string does not parse");
  }
  bool pod_seen = false;
  bool node_seen = false;
  for (const auto& p : *params) {
    const std::string key = p.key.decode();
    bool* seen = nullptr;
    std::string* into = nullptr;
    if (key == "pod") {
      seen = &pod_seen;
      into = &f.pod;
    } else if (key == "node") {
      seen = &node_seen;
      into = &f.node;
    } else {
      return bad("unknown query parameter (pod= and node= are known)");
    }
    if (*seen) {
      return bad("query parameter " + key + " given twice");
    }
    *seen = true;
    if (p.value.decoded_size() > max_history_string) {
      return bad("query parameter " + key + " is too long");
    }
    *into = p.value.decode();
  }
  return f;
}

void eviction_history::add(history_record rec) {
  rec = clipped(std::move(rec));
  std::lock_guard lock(mu_);
  ++total_;
  if (capacity_ == 0) {
    return;
  }
  if (ring_.size() == capacity_) {
    ring_.pop_front();
  }
  ring_.push_back(std::move(rec));
}

std::uint64_t eviction_history::total() const {
  std::lock_guard lock(mu_);
  return total_;
}

std::vector<history_record> eviction_history::records(const history_filter& filter) const {
  std::vector<history_record> out;
  std::lock_guard lock(mu_);
  for (const history_record& rec : ring_) {
    if (selects(filter, rec)) {
      out.push_back(rec);
    }
  }
  return out;
}

history_document eviction_history::document(const history_filter& filter,
                                            std::chrono::system_clock::time_point now) const {
  history_document doc;
  doc.generated_at = now;
  doc.capacity = capacity_;
  std::lock_guard lock(mu_);  // the total and the records of one moment
  doc.total = total_;
  for (const history_record& rec : ring_) {
    if (selects(filter, rec)) {
      doc.records.push_back(rec);
    }
  }
  return doc;
}

std::string to_json(const history_document& doc) {
  ordered_json out;
  out["generatedAt"] = when(doc.generated_at);
  out["capacity"] = doc.capacity;
  out["total"] = doc.total;
  ordered_json items = ordered_json::array();
  for (const history_record& rec : doc.records) {
    items.push_back(json_of(rec));
  }
  out["records"] = std::move(items);
  return dump(out);
}

base::result<history_document> parse_history_document(std::string_view body) {
  const auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("records") ||
      !doc["records"].is_array()) {
    return base::make_error(base::errc::unexpected_shape,
                            "/debug/history: not the history document");
  }
  history_document out;
  out.generated_at = time_of(str(doc, "generatedAt"));
  out.capacity = static_cast<std::size_t>(count_of(doc, "capacity"));
  out.total = count_of(doc, "total");
  for (const auto& r : doc["records"]) {
    if (r.is_object()) {
      out.records.push_back(record_of(r));
    }
  }
  return out;
}

}  // namespace tec::reports
