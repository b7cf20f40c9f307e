#include "tec/shadow/report_records.hpp"

#include <array>
#include <utility>

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

}  // namespace

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
