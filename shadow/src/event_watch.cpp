// GCC 12 reports a false -Wmismatched-new-delete on Asio's awaitable frame allocator (see
// informers.cpp). Only this diagnostic, only this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include "tec/shadow/event_watch.hpp"

#include <algorithm>

#include "tec/base/sanitize.hpp"
#include "tec/informers/json_fields.hpp"
#include "tec/k8sclient/reflector_impl.hpp"

template class tec::k8sclient::reflector<tec::shadow::event_codec, tec::shadow::event_store>;

namespace tec::shadow {
namespace {

using informers::json_fields::json;
using informers::json_fields::read_object;
using informers::json_fields::read_string;
using informers::json_fields::shape;

constexpr std::string_view marking_prefix = "Marking for deletion Pod ";
constexpr std::string_view cancelling_prefix = "Cancelling deletion of Pod ";

base::result<event_record> decode_object(const json& obj, const std::string& path, bool bookmark) {
  if (!obj.is_object()) {
    return shape(path, "not an object");
  }
  event_record r;
  auto meta = read_object(obj, "metadata", path);
  if (!meta) {
    return meta.error();
  }
  const std::string mpath = path + ".metadata";
  if (*meta != nullptr) {
    for (auto [key, out] : {std::pair{"name", &r.name}, std::pair{"namespace", &r.namespace_},
                            std::pair{"resourceVersion", &r.resource_version}}) {
      if (auto e = read_string(**meta, key, mpath, *out)) {
        return *e;
      }
    }
  }
  if (bookmark) {
    return r;
  }
  if (r.name.empty()) {
    return shape(mpath + ".name", "missing");
  }
  for (auto [key, out] : {std::pair{"reason", &r.reason}, std::pair{"message", &r.message},
                          std::pair{"reportingComponent", &r.component}}) {
    if (auto e = read_string(obj, key, path, *out)) {
      return *e;
    }
  }
  r.message = base::sanitize_message(r.message, max_event_message + 3);  // + "..."
  auto source = read_object(obj, "source", path);
  if (!source) {
    return source.error();
  }
  if (*source != nullptr) {
    std::string component;
    if (auto e = read_string(**source, "component", path + ".source", component)) {
      return *e;
    }
    if (!component.empty()) {
      r.component = std::move(component);
    }
  }
  if (const auto it = obj.find("count"); it != obj.end() && !it->is_null()) {
    if (!it->is_number_integer()) {
      return shape(path + ".count", "not an integer");
    }
    r.count = it->get<std::int64_t>();
  }
  auto involved = read_object(obj, "involvedObject", path);
  if (!involved) {
    return involved.error();
  }
  const std::string ipath = path + ".involvedObject";
  if (*involved == nullptr) {
    return shape(ipath, "missing");
  }
  for (auto [key, out] :
       {std::pair{"kind", &r.involved_kind}, std::pair{"namespace", &r.involved_namespace},
        std::pair{"name", &r.involved_name}, std::pair{"uid", &r.involved_uid}}) {
    if (auto e = read_string(**involved, key, ipath, *out)) {
      return *e;
    }
  }
  if (r.involved_name.empty()) {
    return shape(ipath + ".name", "missing");
  }
  return r;
}

}  // namespace

base::result<event_record> decode_event_object(std::string_view text) {
  return informers::json_fields::decode_document<event_record>(text, "event", decode_object);
}

base::result<event_watch_event> decode_event_watch_line(std::string_view line) {
  return informers::json_fields::decode_watch_line<event_record>(line, decode_object);
}

base::result<k8sclient::list_page<event_record>> decode_event_list(std::string_view body) {
  return informers::json_fields::decode_list<event_record>(body, decode_object);
}

std::optional<shadow_event> to_shadow_event(const event_record& e) {
  if (e.reason != "TaintManagerEviction" ||
      (!e.involved_kind.empty() && e.involved_kind != "Pod")) {
    return std::nullopt;
  }
  const bool marking = e.message.starts_with(marking_prefix);
  if (!marking && !e.message.starts_with(cancelling_prefix)) {
    return std::nullopt;
  }
  return shadow_event{e.involved_namespace.empty() ? e.namespace_ : e.involved_namespace,
                      e.involved_name, e.involved_uid, marking, e.message};
}

std::optional<event_record> event_store::upsert(const event_record& r) {
  const std::lock_guard lock(mu_);
  const auto k = key(r);
  if (const auto it = events_.find(k); it != events_.end()) {
    return std::exchange(it->second, r);
  }
  if (events_.size() >= max_) {
    ++refused_;
    return std::nullopt;
  }
  events_.emplace(k, r);
  return std::nullopt;
}

std::optional<event_record> event_store::erase(const event_record& r) {
  const std::lock_guard lock(mu_);
  const auto it = events_.find(key(r));
  if (it == events_.end()) {
    return std::nullopt;
  }
  return std::move(events_.extract(it).mapped());
}

informers::replace_result<event_record> event_store::replace_all(
    std::vector<event_record> records) {
  const std::lock_guard lock(mu_);
  informers::replace_result<event_record> out;
  std::unordered_map<std::string, event_record> next;
  for (auto& r : records) {
    const auto k = key(r);
    if (next.size() >= max_ && !next.contains(k)) {
      ++refused_;
      continue;
    }
    std::optional<event_record> old;
    if (const auto it = events_.find(k); it != events_.end()) {
      old = std::move(events_.extract(it).mapped());
    }
    next.insert_or_assign(k, r);
    out.upserted.emplace_back(std::move(old), std::move(r));
  }
  for (auto& [k, r] : events_) {
    out.deleted.push_back(std::move(r));
  }
  events_ = std::move(next);
  return out;
}

std::size_t event_store::size() const {
  const std::lock_guard lock(mu_);
  return events_.size();
}

std::uint64_t event_store::refused() const {
  const std::lock_guard lock(mu_);
  return refused_;
}

std::uint32_t occurrences(const event_record* old_event, const event_record& new_event) {
  if (old_event == nullptr || old_event->message != new_event.message ||
      new_event.count <= old_event->count) {
    return 1;
  }
  return static_cast<std::uint32_t>(
      std::min<std::int64_t>(new_event.count - old_event->count, max_occurrences));
}

event_informer::handler shadow_event_handler(shadow_tracker& tracker) {
  return [&tracker](const event_record* old_event, const event_record* new_event) {
    if (new_event == nullptr) {
      return;  // the Event expired (its TTL): nothing happened to the pod
    }
    if (old_event != nullptr && old_event->count == new_event->count &&
        old_event->message == new_event->message) {
      return;  // not a new occurrence
    }
    if (auto ev = to_shadow_event(*new_event)) {
      ev->occurrences = occurrences(old_event, *new_event);
      tracker.event_seen(*ev);
    }
  };
}

}  // namespace tec::shadow
