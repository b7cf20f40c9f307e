// GCC 12 reports a false -Wmismatched-new-delete on Asio's awaitable frame allocator (see
// informers.cpp). Only this diagnostic, only this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include "tec/informers/namespaces.hpp"

#include <algorithm>
#include <mutex>
#include <utility>

#include "tec/controller/controller.hpp"
#include "tec/informers/json_fields.hpp"
#include "tec/k8sclient/reflector_impl.hpp"

template class tec::k8sclient::reflector<tec::informers::namespace_codec,
                                         tec::informers::namespace_store>;

namespace tec::informers {
namespace {

using json_fields::json;
using json_fields::read_object;
using json_fields::read_string;
using json_fields::shape;

result<namespace_record> decode_object(const json& obj, const std::string& path, bool bookmark) {
  if (!obj.is_object()) {
    return shape(path, "not an object");
  }
  namespace_record r;
  auto meta = read_object(obj, "metadata", path);
  if (!meta) {
    return meta.error();
  }
  const std::string mpath = path + ".metadata";
  if (*meta == nullptr) {
    if (bookmark) {
      return r;
    }
    return shape(mpath, "missing");
  }
  if (auto e = read_string(**meta, "resourceVersion", mpath, r.resource_version)) {
    return *e;
  }
  if (bookmark) {
    return r;
  }
  if (auto e = read_string(**meta, "name", mpath, r.name)) {
    return *e;
  }
  if (r.name.empty()) {
    return shape(mpath + ".name", "missing");
  }
  auto annotations = read_object(**meta, "annotations", mpath);
  if (!annotations) {
    return annotations.error();
  }
  if (*annotations != nullptr) {
    const std::string key(controller::opt_out_annotation);
    std::string value;
    if (auto e = read_string(**annotations, key.c_str(), mpath + ".annotations", value)) {
      return *e;
    }
    r.opted_out = value == controller::opt_out_value;
  }
  return r;
}

}  // namespace

result<namespace_record> decode_namespace(std::string_view text) {
  return json_fields::decode_document<namespace_record>(text, "namespace", decode_object);
}

result<namespace_event> decode_namespace_event(std::string_view line) {
  return json_fields::decode_watch_line<namespace_record>(line, decode_object);
}

result<list_page<namespace_record>> decode_namespace_list(std::string_view body) {
  return json_fields::decode_list<namespace_record>(body, decode_object);
}

namespace_store::namespace_store(change_handler on_change) : on_change_(std::move(on_change)) {}

void namespace_store::notify(const std::vector<opt_out_change>& changes) const {
  if (!changes.empty() && on_change_) {
    on_change_(changes);
  }
}

std::optional<namespace_record> namespace_store::upsert(const namespace_record& record) {
  std::optional<namespace_record> old;
  {
    const std::unique_lock lock(mutex_);
    auto [it, inserted] = namespaces_.try_emplace(record.name, record);
    if (!inserted) {
      old = std::exchange(it->second, record);
    }
  }
  const bool was = old && old->opted_out;
  if (was != record.opted_out) {
    notify({{record.name, record.opted_out}});
  }
  return old;
}

std::optional<namespace_record> namespace_store::erase(const namespace_record& record) {
  std::optional<namespace_record> old;
  {
    const std::unique_lock lock(mutex_);
    const auto it = namespaces_.find(record.name);
    if (it == namespaces_.end()) {
      return std::nullopt;
    }
    old = std::move(it->second);
    namespaces_.erase(it);
  }
  if (old->opted_out) {
    notify({{old->name, false}});
  }
  return old;
}

replace_result<namespace_record> namespace_store::replace_all(
    std::vector<namespace_record> records) {
  replace_result<namespace_record> out;
  std::vector<opt_out_change> changes;
  {
    const std::unique_lock lock(mutex_);
    decltype(namespaces_) next;
    next.reserve(records.size());
    for (auto& r : records) {
      std::optional<namespace_record> old;
      if (const auto it = namespaces_.find(r.name); it != namespaces_.end()) {
        old = std::move(it->second);
        namespaces_.erase(it);
      }
      if ((old && old->opted_out) != r.opted_out) {
        changes.push_back({r.name, r.opted_out});
      }
      next.insert_or_assign(r.name, r);
      out.upserted.emplace_back(std::move(old), std::move(r));
    }
    for (auto& [name, r] : namespaces_) {
      if (r.opted_out) {
        changes.push_back({name, false});
      }
      out.deleted.push_back(std::move(r));
    }
    namespaces_ = std::move(next);
  }
  notify(changes);
  return out;
}

bool namespace_store::opted_out(std::string_view namespace_) const {
  const std::shared_lock lock(mutex_);
  const auto it = namespaces_.find(namespace_);
  return it != namespaces_.end() && it->second.opted_out;
}

std::vector<std::string> namespace_store::opted_out_namespaces() const {
  std::vector<std::string> out;
  {
    const std::shared_lock lock(mutex_);
    for (const auto& [name, r] : namespaces_) {
      if (r.opted_out) {
        out.push_back(name);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t namespace_store::size() const {
  const std::shared_lock lock(mutex_);
  return namespaces_.size();
}

}  // namespace tec::informers
