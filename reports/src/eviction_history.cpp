#include "tec/reports/eviction_history.hpp"

#include <boost/url/parse_query.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

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

std::string eviction_history::document(const history_filter& filter,
                                       std::chrono::system_clock::time_point now) const {
  std::uint64_t total = 0;
  std::vector<history_record> kept;
  {
    std::lock_guard lock(mu_);
    total = total_;
    for (const history_record& rec : ring_) {
      if (selects(filter, rec)) {
        kept.push_back(rec);
      }
    }
  }
  ordered_json doc;
  doc["generatedAt"] = when(now);
  doc["capacity"] = capacity_;
  doc["total"] = total;
  ordered_json items = ordered_json::array();
  for (const history_record& rec : kept) {
    items.push_back(json_of(rec));
  }
  doc["records"] = std::move(items);
  return dump(doc);
}

}  // namespace tec::reports
