#include "tec/shadow/report_records.hpp"

#include <array>
#include <cmath>
#include <utility>

#include "tec/base/error.hpp"

namespace tec::shadow {
namespace {

std::string text(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// A record's fields, in their JSON order: a text field by its key, or (member nullptr) the
// fields every record has, "pod" ("ns/name"), "uid", "node" and "taints". One list serves both
// directions, so a key is written once.
template <class Record>
struct field {
  const char* key;
  std::string Record::*member;
};

constexpr std::array<field<disagreement>, 5> disagreement_fields{
    {{"outcome", &disagreement::outcome},
     {"pod", nullptr},
     {"ours", &disagreement::ours},
     {"theirs", &disagreement::theirs},
     {"at", &disagreement::at}}};

// Then "delaySeconds" and "early".
constexpr std::array<field<builtin_eviction>, 7> builtin_eviction_fields{
    {{"pod", nullptr},
     {"deletedAt", &builtin_eviction::deleted_at},
     {"evidence", &builtin_eviction::evidence},
     {"oursAt", &builtin_eviction::ours_at},
     {"verdict", &builtin_eviction::verdict},
     {"reason", &builtin_eviction::reason},
     {"settledAt", &builtin_eviction::settled_at}}};

template <class Record, std::size_t N>
nlohmann::ordered_json write(const Record& r, const std::array<field<Record>, N>& fields) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& f : fields) {
    if (f.member != nullptr) {
      j[f.key] = r.*f.member;
      continue;
    }
    j["pod"] = r.namespace_ + "/" + r.name;
    j["uid"] = r.uid;
    j["node"] = r.node;
    j["taints"] = r.taints;
  }
  return j;
}

template <class Record, std::size_t N>
Record read(const nlohmann::json& j, const std::array<field<Record>, N>& fields) {
  Record r;
  if (!j.is_object()) {
    return r;
  }
  for (const auto& f : fields) {
    if (f.member != nullptr) {
      r.*f.member = text(j, f.key);
      continue;
    }
    const std::string pod = text(j, "pod");
    const auto slash = pod.find('/');
    r.namespace_ = slash == std::string::npos ? std::string{} : pod.substr(0, slash);
    r.name = slash == std::string::npos ? pod : pod.substr(slash + 1);
    r.uid = text(j, "uid");
    r.node = text(j, "node");
    if (const auto t = j.find("taints"); t != j.end() && t->is_array()) {
      for (const auto& x : *t) {
        if (x.is_string()) {
          r.taints.push_back(x.get<std::string>());
        }
      }
    }
  }
  return r;
}

std::uint64_t count(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

double number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

nlohmann::ordered_json summary_json(const shadow_document& doc) {
  const shadow_counts& c = doc.counts;
  nlohmann::ordered_json j;
  const double w = doc.window_seconds;
  if (std::trunc(w) == w && std::abs(w) < 1e15) {
    j["windowSeconds"] = static_cast<std::int64_t>(w);
  } else {
    j["windowSeconds"] = w;
  }
  j["counts"] = {{"agreed", c.agreed},       {"onlyThem", c.only_them},
                 {"onlyUs", c.only_us},      {"cancelledBoth", c.cancelled_both},
                 {"ambiguous", c.ambiguous}, {"deletedByOthers", c.deleted_by_others},
                 {"pending", c.pending}};
  j["settledEarly"] = c.settled_early;
  j["agreedDelaySeconds"] = {
      {"max", c.agreed_delay_max},
      {"mean", c.agreed == 0 ? 0.0 : c.agreed_delay_sum / static_cast<double>(c.agreed)}};
  return j;
}

std::string to_json(const shadow_document& doc) {
  nlohmann::ordered_json j = summary_json(doc);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& d : doc.disagreements) {
    list.push_back(to_json(d));
  }
  j["disagreements"] = std::move(list);
  nlohmann::ordered_json history = nlohmann::ordered_json::array();
  for (const auto& e : doc.builtin_evictions) {
    history.push_back(to_json(e));
  }
  j["builtinEvictions"] = std::move(history);
  j["builtinEvictionsDropped"] = doc.counts.builtin_evictions_dropped;
  // Replace invalid UTF-8 (a pod name cannot hold any, an event message might) rather than
  // throw.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

base::result<shadow_document> parse_shadow_document(std::string_view body) {
  const auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("counts") ||
      !doc["counts"].is_object() || !doc.contains("disagreements") ||
      !doc["disagreements"].is_array()) {
    return base::make_error(base::errc::unexpected_shape, "/debug/shadow: not the shadow report");
  }
  shadow_document out;
  out.window_seconds = number(doc, "windowSeconds");
  const auto& c = doc["counts"];
  out.counts.agreed = count(c, "agreed");
  out.counts.only_them = count(c, "onlyThem");
  out.counts.only_us = count(c, "onlyUs");
  out.counts.cancelled_both = count(c, "cancelledBoth");
  out.counts.ambiguous = count(c, "ambiguous");
  out.counts.deleted_by_others = count(c, "deletedByOthers");
  out.counts.pending = count(c, "pending");
  out.counts.settled_early = count(doc, "settledEarly");
  if (const auto d = doc.find("agreedDelaySeconds"); d != doc.end() && d->is_object()) {
    out.counts.agreed_delay_max = number(*d, "max");
    out.counts.agreed_delay_sum = number(*d, "mean") * static_cast<double>(out.counts.agreed);
  }
  for (const auto& e : doc["disagreements"]) {
    if (e.is_object()) {
      out.disagreements.push_back(disagreement_from_json(e));
    }
  }
  const auto h = doc.find("builtinEvictions");
  out.history_served = h != doc.end() && h->is_array();
  if (out.history_served) {
    for (const auto& e : *h) {
      if (e.is_object()) {
        out.builtin_evictions.push_back(builtin_eviction_from_json(e));
      }
    }
  }
  out.counts.builtin_evictions_dropped = count(doc, "builtinEvictionsDropped");
  return out;
}

nlohmann::ordered_json to_json(const disagreement& d) {
  return write(d, disagreement_fields);
}

nlohmann::ordered_json to_json(const builtin_eviction& e) {
  auto j = write(e, builtin_eviction_fields);
  j["delaySeconds"] = e.delay_seconds;
  j["early"] = e.early;
  return j;
}

disagreement disagreement_from_json(const nlohmann::json& j) {
  return read(j, disagreement_fields);
}

builtin_eviction builtin_eviction_from_json(const nlohmann::json& j) {
  auto e = read(j, builtin_eviction_fields);
  if (const auto d = j.find("delaySeconds"); j.is_object() && d != j.end() && d->is_number()) {
    e.delay_seconds = d->get<double>();
  }
  if (const auto b = j.find("early"); j.is_object() && b != j.end() && b->is_boolean()) {
    e.early = b->get<bool>();
  }
  return e;
}

void builtin_eviction_log::add(builtin_eviction e) {
  if (capacity_ == 0) {
    ++dropped_;
    return;
  }
  if (records_.size() >= capacity_) {
    records_.pop_front();
    ++dropped_;
  }
  records_.push_back(std::move(e));
}

}  // namespace tec::shadow
