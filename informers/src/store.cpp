#include "tec/informers/store.hpp"

#include <cassert>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_set>

namespace tec::informers {
namespace {

std::size_t mix(std::size_t seed, std::size_t h) noexcept {
  return seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6U) + (seed >> 2U));
}

struct tolerations_hash {
  std::size_t operator()(const std::vector<controller::toleration>& list) const noexcept {
    std::size_t h = list.size();
    for (const auto& t : list) {
      h = mix(h, std::hash<std::string_view>{}(t.key));
      h = mix(h, std::hash<std::string_view>{}(t.value));
      h = mix(h, static_cast<std::size_t>(t.op));
      h = mix(h, t.effect ? static_cast<std::size_t>(*t.effect) + 1 : 0);
      h = mix(h, t.seconds ? std::hash<std::int64_t>{}(*t.seconds) : 0x51ed);
    }
    return h;
  }
};

/// Reference-counted values stored once. Handles are stable pointers to the map's nodes.
/// Not synchronised: the owning store's lock protects it.
template <class Key, class Hash, class Eq = std::equal_to<>>
class ref_pool {
public:
  using node = std::pair<const Key, std::size_t>;

  /// Takes a reference to `key`'s shared copy (created on first use); nullptr for an empty key.
  template <class K>
  node* acquire(const K& key) {
    if (key.empty()) {
      return nullptr;
    }
    auto it = map_.find(key);
    if (it == map_.end()) {
      it = map_.emplace(Key(key), 0).first;
    }
    ++it->second;
    return &*it;
  }

  /// Drops a reference (nullptr: none); the value is freed with the last one.
  void release(node* n) noexcept {
    if (n == nullptr) {
      return;
    }
    assert(n->second > 0);
    if (--n->second == 0) {
      map_.erase(map_.find(n->first));
    }
  }

  template <class K>
  [[nodiscard]] const node* find(const K& key) const {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : &*it;
  }

private:
  std::unordered_map<Key, std::size_t, Hash, Eq> map_;
};

using string_pool = ref_pool<std::string, string_hash>;
using tolerations_pool = ref_pool<std::vector<controller::toleration>, tolerations_hash>;

}  // namespace

/// The compact representation: per pod only its name, uid and resourceVersion are owned;
/// namespace, owner kind and toleration list are handles into shared pools, and the node name
/// lives once in the node index, which the pod points into.
struct pod_store::impl {
  struct key {
    string_pool::node* ns = nullptr;  // nullptr: empty namespace
    std::string name;
  };
  struct key_view {
    const string_pool::node* ns = nullptr;
    std::string_view name;
  };
  struct key_hash {
    using is_transparent = void;
    std::size_t operator()(const key& k) const noexcept { return (*this)(key_view{k.ns, k.name}); }
    std::size_t operator()(const key_view& k) const noexcept {
      return mix(std::hash<std::string_view>{}(k.name), std::hash<const void*>{}(k.ns));
    }
  };
  struct key_eq {
    using is_transparent = void;
    static key_view view(const key& k) noexcept { return {k.ns, k.name}; }
    static key_view view(const key_view& k) noexcept { return k; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const noexcept {
      return view(a).ns == view(b).ns && view(a).name == view(b).name;
    }
  };

  struct entry;
  using pod_map = std::unordered_map<key, entry, key_hash, key_eq>;
  using slot = pod_map::value_type;
  using node_index =
      std::unordered_map<std::string, std::vector<slot*>, string_hash, std::equal_to<>>;
  using node_slot = node_index::value_type;

  struct entry {
    std::string uid;
    std::string resource_version;
    node_slot* node = nullptr;  // nullptr: unscheduled
    string_pool::node* owner_kind = nullptr;
    tolerations_pool::node* tolerations = nullptr;
    // The labels ("k=v" lines), shared: the replicas of one workload carry the same ones.
    string_pool::node* labels = nullptr;
    // "=" and the hold-until annotation's value (controller::hold_mark::value; the "=" keeps
    // an empty value apart from none), shared; null: none.
    string_pool::node* hold = nullptr;
    std::int64_t bound_unix = 0;
    std::int64_t generation = 0;  // metadata.generation (the condition's observedGeneration)
    std::uint32_t node_pos = 0;   // position in node->second
    controller::pod_phase phase = controller::pod_phase::unknown;
    bool terminating : 1 = false;
    bool mirror : 1 = false;
    bool opted_out : 1 = false;
    bool relisted : 1 = false;  // named by the relist in progress (relist_add, replace_all)
    disruption_state disruption = disruption_state::absent;
  };
  // The small fields share one word after the pointers, the bind time and the generation.
  static_assert(sizeof(void*) != 8 || sizeof(entry) == 2 * sizeof(std::string) + 8 * sizeof(void*));

  mutable std::shared_mutex mutex;
  pod_map pods;
  node_index by_node;
  string_pool namespaces;
  string_pool owner_kinds;
  string_pool label_sets;
  string_pool holds;
  tolerations_pool tolerations;

  /// Points `ref` at `value`'s shared copy. The new reference is taken before the old one is
  /// dropped, so that an unchanged value is never freed and re-created.
  template <class Pool, class Value>
  static void repoint(Pool& pool, typename Pool::node*& ref, const Value& value) {
    typename Pool::node* next = pool.acquire(value);
    pool.release(ref);
    ref = next;
  }
  static std::string_view text(const string_pool::node* n) noexcept {
    return n == nullptr ? std::string_view{} : std::string_view{n->first};
  }

  [[nodiscard]] controller::pod_view view_of(const slot& s) const {
    controller::pod_view v;
    v.namespace_ = text(s.first.ns);
    v.name = s.first.name;
    v.uid = s.second.uid;
    if (s.second.node != nullptr) {
      v.node_name = s.second.node->first;
    }
    if (s.second.tolerations != nullptr) {
      v.tolerations = s.second.tolerations->first;
    }
    v.phase = s.second.phase;
    v.terminating = s.second.terminating;
    v.owner_kind = text(s.second.owner_kind);
    v.mirror = s.second.mirror;
    v.opted_out = s.second.opted_out;
    v.bound_unix = s.second.bound_unix;
    v.labels = text(s.second.labels);
    if (s.second.hold != nullptr) {
      v.hold = controller::parse_hold(std::string_view(s.second.hold->first).substr(1));
    }
    return v;
  }

  [[nodiscard]] pod_record record_of(const slot& s) const {
    return pod_record{view_of(s), s.second.resource_version, s.second.disruption,
                      s.second.generation};
  }

  void attach_node(slot& s, std::string_view node) {
    if (node.empty()) {
      s.second.node = nullptr;
      return;
    }
    auto it = by_node.find(node);
    if (it == by_node.end()) {
      it = by_node.emplace(std::string(node), std::vector<slot*>{}).first;
    }
    s.second.node = &*it;
    s.second.node_pos = static_cast<std::uint32_t>(it->second.size());
    it->second.push_back(&s);
  }

  void detach_node(slot& s) {
    node_slot* n = s.second.node;
    if (n == nullptr) {
      return;
    }
    auto& members = n->second;
    const std::uint32_t pos = s.second.node_pos;
    assert(pos < members.size() && members[pos] == &s);
    slot* last = members.back();
    members[pos] = last;
    last->second.node_pos = pos;
    members.pop_back();
    s.second.node = nullptr;
    if (members.empty()) {
      by_node.erase(by_node.find(n->first));
    }
  }

  /// Sets everything but the key from `r`.
  void assign(slot& s, const pod_record& r) {
    entry& e = s.second;
    e.uid = r.pod.uid;
    e.resource_version = r.resource_version;
    e.phase = r.pod.phase;
    e.terminating = r.pod.terminating;
    e.mirror = r.pod.mirror;
    e.opted_out = r.pod.opted_out;
    e.bound_unix = r.pod.bound_unix;
    e.disruption = r.disruption;
    e.generation = r.generation;

    repoint(owner_kinds, e.owner_kind, r.pod.owner_kind);
    repoint(label_sets, e.labels, r.pod.labels);
    repoint(tolerations, e.tolerations, r.pod.tolerations);
    if (r.pod.hold) {
      repoint(holds, e.hold, "=" + r.pod.hold->value);
    } else {
      holds.release(e.hold);
      e.hold = nullptr;
    }

    const std::string_view old_node = e.node == nullptr ? std::string_view{} : e.node->first;
    if (old_node != r.pod.node_name) {
      detach_node(s);
      attach_node(s, r.pod.node_name);
    }
  }

  /// Inserts or updates; returns the slot and the previous version.
  std::pair<slot*, std::optional<pod_record>> upsert(const pod_record& r) {
    string_pool::node* ns = namespaces.acquire(r.pod.namespace_);
    auto it = pods.find(key_view{ns, r.pod.name});
    if (it != pods.end()) {
      namespaces.release(ns);  // the key holds its own reference
      std::optional<pod_record> old = record_of(*it);
      assign(*it, r);
      return {&*it, std::move(old)};
    }
    it = pods.emplace(key{ns, r.pod.name}, entry{}).first;
    assign(*it, r);
    return {&*it, std::nullopt};
  }

  /// Removes the slot at `it`, dropping all of its references; returns the next iterator.
  pod_map::iterator remove(pod_map::iterator it) {
    detach_node(*it);
    owner_kinds.release(it->second.owner_kind);
    label_sets.release(it->second.labels);
    tolerations.release(it->second.tolerations);
    holds.release(it->second.hold);
    string_pool::node* ns = it->first.ns;
    auto next = pods.erase(it);
    namespaces.release(ns);
    return next;
  }

  /// Upserts `batch`, each pod marked as relisted; returns the (old, new) pairs.
  replace_result<pod_record> add_relisted(std::vector<pod_record> batch) {
    replace_result<pod_record> out;
    out.upserted.reserve(batch.size());
    for (auto& r : batch) {
      auto [listed, old] = upsert(r);
      listed->second.relisted = true;
      out.upserted.emplace_back(std::move(old), std::move(r));
    }
    return out;
  }

  /// Removes every pod not marked as relisted, into `deleted`.
  void remove_unlisted(std::vector<pod_record>& deleted) {
    for (auto it = pods.begin(); it != pods.end();) {
      if (it->second.relisted) {
        ++it;
        continue;
      }
      deleted.push_back(record_of(*it));
      it = remove(it);
    }
  }

  void unmark_all() noexcept {
    for (auto& s : pods) {
      s.second.relisted = false;
    }
  }

  /// Finds namespace/name in `self.pods` (const or not) without creating a namespace entry.
  template <class Self>
  static auto find(Self& self, std::string_view ns, std::string_view name) {
    const string_pool::node* n = nullptr;
    if (!ns.empty()) {
      n = self.namespaces.find(ns);
      if (n == nullptr) {
        return self.pods.end();
      }
    }
    return self.pods.find(key_view{n, name});
  }
};

pod_store::pod_store() : impl_(std::make_unique<impl>()) {}

pod_store::~pod_store() = default;

std::optional<pod_record> pod_store::upsert(const pod_record& record) {
  const std::unique_lock lock(impl_->mutex);
  return impl_->upsert(record).second;
}

std::optional<pod_record> pod_store::erase(std::string_view namespace_, std::string_view name) {
  const std::unique_lock lock(impl_->mutex);
  auto it = impl::find(*impl_, namespace_, name);
  if (it == impl_->pods.end()) {
    return std::nullopt;
  }
  std::optional<pod_record> old = impl_->record_of(*it);
  impl_->remove(it);
  return old;
}

replace_result<pod_record> pod_store::replace_all(std::vector<pod_record> records) {
  const std::unique_lock lock(impl_->mutex);
  impl_->unmark_all();
  replace_result<pod_record> out = impl_->add_relisted(std::move(records));
  impl_->remove_unlisted(out.deleted);
  return out;
}

void pod_store::relist_begin() {
  const std::unique_lock lock(impl_->mutex);
  impl_->unmark_all();
}

replace_result<pod_record> pod_store::relist_add(std::vector<pod_record> batch) {
  const std::unique_lock lock(impl_->mutex);
  return impl_->add_relisted(std::move(batch));
}

replace_result<pod_record> pod_store::relist_end() {
  replace_result<pod_record> out;
  const std::unique_lock lock(impl_->mutex);
  impl_->remove_unlisted(out.deleted);
  return out;
}

std::optional<pod_record> pod_store::get(std::string_view namespace_, std::string_view name) const {
  const std::shared_lock lock(impl_->mutex);
  auto it = impl::find(std::as_const(*impl_), namespace_, name);
  if (it == impl_->pods.end()) {
    return std::nullopt;
  }
  return impl_->record_of(*it);
}

std::vector<pod_record> pod_store::list() const {
  const std::shared_lock lock(impl_->mutex);
  std::vector<pod_record> out;
  out.reserve(impl_->pods.size());
  for (const auto& s : impl_->pods) {
    out.push_back(impl_->record_of(s));
  }
  return out;
}

std::size_t pod_store::size() const {
  const std::shared_lock lock(impl_->mutex);
  return impl_->pods.size();
}

std::vector<controller::pod_view> pod_store::pods_on_node(std::string_view node) const {
  std::vector<controller::pod_view> out;
  if (node.empty()) {
    return out;  // unscheduled pods are not indexed
  }
  const std::shared_lock lock(impl_->mutex);
  auto it = impl_->by_node.find(node);
  if (it == impl_->by_node.end()) {
    return out;
  }
  out.reserve(it->second.size());
  for (const impl::slot* s : it->second) {
    out.push_back(impl_->view_of(*s));
  }
  return out;
}

std::optional<controller::pod_view> pod_store::get_pod(std::string_view namespace_,
                                                       std::string_view name) const {
  const std::shared_lock lock(impl_->mutex);
  auto it = impl::find(std::as_const(*impl_), namespace_, name);
  if (it == impl_->pods.end()) {
    return std::nullopt;
  }
  return impl_->view_of(*it);
}

// --- node_store --------------------------------------------------------------------------

std::optional<node_record> node_store::upsert(const node_record& record) {
  const std::unique_lock lock(mutex_);
  auto it = nodes_.find(std::string_view{record.node.name});
  if (it == nodes_.end()) {
    nodes_.emplace(record.node.name, record);
    return std::nullopt;
  }
  std::optional<node_record> old = std::move(it->second);
  it->second = record;
  return old;
}

std::optional<node_record> node_store::erase(std::string_view name) {
  const std::unique_lock lock(mutex_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return std::nullopt;
  }
  std::optional<node_record> old = std::move(it->second);
  nodes_.erase(it);
  return old;
}

replace_result<node_record> node_store::replace_all(std::vector<node_record> records) {
  replace_result<node_record> out;
  out.upserted.reserve(records.size());
  const std::unique_lock lock(mutex_);
  std::unordered_set<const node_record*> seen;
  seen.reserve(records.size());
  for (auto& r : records) {
    auto it = nodes_.find(std::string_view{r.node.name});
    std::optional<node_record> old;
    if (it == nodes_.end()) {
      it = nodes_.emplace(r.node.name, r).first;
    } else {
      old = std::move(it->second);
      it->second = r;
    }
    seen.insert(&it->second);
    out.upserted.emplace_back(std::move(old), std::move(r));
  }
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (seen.contains(&it->second)) {
      ++it;
      continue;
    }
    out.deleted.push_back(std::move(it->second));
    it = nodes_.erase(it);
  }
  return out;
}

std::optional<node_record> node_store::get(std::string_view name) const {
  const std::shared_lock lock(mutex_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::vector<node_record> node_store::list() const {
  const std::shared_lock lock(mutex_);
  std::vector<node_record> out;
  out.reserve(nodes_.size());
  for (const auto& [name, record] : nodes_) {
    out.push_back(record);
  }
  return out;
}

std::size_t node_store::size() const {
  const std::shared_lock lock(mutex_);
  return nodes_.size();
}

}  // namespace tec::informers
