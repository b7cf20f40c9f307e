#pragma once

#include <algorithm>
#include <cstddef>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace tec::writers {

/// A map that forgets its least recently used entries beyond its capacity (at least 1).
/// client-go keeps each piece of its event correlation state in such an LRU (4096 entries);
/// ours hold at most a few thousand entries, so a list plus an index is enough. Not
/// synchronised.
template <class V>
class lru_map {
public:
  explicit lru_map(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

  /// The value under `key`, made the most recent; nullptr when absent.
  V* find(const std::string& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) {
      return nullptr;
    }
    items_.splice(items_.begin(), items_, it->second);
    return &it->second->second;
  }

  /// Stores `value` under `key` as the most recent entry (replacing any), then forgets the
  /// least recent entries beyond the capacity.
  V& put(const std::string& key, V value) {
    if (V* existing = find(key)) {
      *existing = std::move(value);
      return *existing;
    }
    items_.emplace_front(key, std::move(value));
    index_.emplace(items_.front().first, items_.begin());
    while (items_.size() > capacity_) {
      index_.erase(items_.back().first);
      items_.pop_back();
    }
    return items_.front().second;
  }

  /// Whether `key` is present; its recency stays as it was.
  [[nodiscard]] bool contains(const std::string& key) const { return index_.contains(key); }

  void erase(const std::string& key) {
    const auto it = index_.find(key);
    if (it != index_.end()) {
      const auto item = it->second;
      index_.erase(it);
      items_.erase(item);
    }
  }

private:
  using list = std::list<std::pair<std::string, V>>;
  std::size_t capacity_;
  list items_;                                                           // Most recent first.
  std::unordered_map<std::string_view, typename list::iterator> index_;  // Keys in items_.
};

}  // namespace tec::writers
