#pragma once

// The queue's entry, its index's hash and equality, and the heap of deadlines (private to
// timedqueue/src; the queue guards all of it with its mutex).

#include "tec/timedqueue/timed_queue.hpp"

#include <atomic>
#include <cassert>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <boost/config.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

namespace tec::timedqueue::detail {

constexpr std::uint32_t no_heap_index = std::numeric_limits<std::uint32_t>::max();

/// One key's entry. Key, payload and group bytes follow the struct in the same allocation, so
/// a pending entry costs one allocation of sizeof(entry) (96 bytes on x86-64) + key + payload
/// + groups, plus its slot in the index and its node in the deadlines.
///
/// Ownership: while `detached` is false the entry is in the index and the queue owns it. A
/// running entry that is cancelled (or caught by shutdown) is detached: it leaves the index
/// and the deadlines, and the run (its start task or its completion) owns it and frees it.
/// The admission_ticket base holds due_at (when the current or last run became due), the
/// generation and where a held entry waits.
struct entry : admission_ticket {
  time_point created_at;
  time_point fire_at;
  /// When the current (or last) run was admitted.
  time_point admitted_at;
  /// The caller's deferral: no run starts before it (time_point{}: none).
  time_point not_before{};
  /// When the current (or last) run's wait for its deferral ended (time_point{}: it did not
  /// wait for one); run_info::deferral_ended_at.
  time_point deferral_ended_at{};
  /// Error of the last failed run; allocated only for entries that have failed.
  std::unique_ptr<std::string> last_error;
  /// Its node in `deadlines`, or no_heap_index.
  std::uint32_t heap_index = no_heap_index;
  std::uint32_t attempts = 0;
  std::uint32_t key_size = 0;
  std::uint32_t payload_size = 0;
  std::array<std::uint32_t, group_classes> group_size{};
  entry_state state = entry_state::pending;
  std::uint8_t defer_tag = 0;  ///< The deferral's tag.
  /// The tag of the deferral the entry last waited for (set when it starts waiting for it).
  std::uint8_t deferred_by_tag = 0;
  /// The current (or last) run was held by admission control before it started.
  bool held_run = false;
  /// Written under the queue mutex, read without it by completion::cancelled().
  std::atomic<bool> detached{false};

  [[nodiscard]] const char* chars() const { return reinterpret_cast<const char*>(this + 1); }
  [[nodiscard]] std::string_view key() const { return {chars(), key_size}; }
  [[nodiscard]] std::string_view payload() const { return {chars() + key_size, payload_size}; }
  [[nodiscard]] group_names groups() const {
    group_names out;
    const char* at = chars() + key_size + payload_size;
    for (std::size_t c = 0; c < group_classes; ++c) {
      out[c] = {at, group_size[c]};
      at += group_size[c];
    }
    return out;
  }

  /// A new entry (pending, generation 0) holding copies of the strings. Throws
  /// std::length_error for a string longer than 4 GiB, std::bad_alloc.
  static entry* create(std::string_view key, std::string_view payload, const group_names& groups) {
    constexpr std::size_t limit = std::numeric_limits<std::uint32_t>::max();
    std::size_t extra = key.size() + payload.size();
    bool too_long = key.size() > limit || payload.size() > limit;
    for (const auto g : groups) {
      extra += g.size();
      too_long = too_long || g.size() > limit;
    }
    if (too_long) {
      throw std::length_error("timed_queue: key, payload or group longer than 4 GiB");
    }
    void* raw = ::operator new(sizeof(entry) + extra);
    auto* e = new (raw) entry;
    e->key_size = static_cast<std::uint32_t>(key.size());
    e->payload_size = static_cast<std::uint32_t>(payload.size());
    char* out = reinterpret_cast<char*>(e + 1);
    const auto put = [&out](std::string_view s) {
      if (!s.empty()) {
        std::memcpy(out, s.data(), s.size());
        out += s.size();
      }
    };
    put(key);
    put(payload);
    for (std::size_t c = 0; c < group_classes; ++c) {
      e->group_size[c] = static_cast<std::uint32_t>(groups[c].size());
      put(groups[c]);
    }
    return e;
  }

  /// What lookup() reports for this entry: `hold` is admission's reason for a held one,
  /// `deadline` the time it waits for in the deadlines, if it is there.
  [[nodiscard]] entry_info info(hold_reason hold, std::optional<time_point> deadline) const;

  static void destroy(entry* e) noexcept {
    e->~entry();
    ::operator delete(static_cast<void*>(e));
  }
};

struct key_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const noexcept {
    return std::hash<std::string_view>{}(key);
  }
  std::size_t operator()(const entry* e) const noexcept { return (*this)(e->key()); }
};

struct key_equal {
  using is_transparent = void;
  static std::string_view view(std::string_view key) noexcept { return key; }
  static std::string_view view(const entry* e) noexcept { return e->key(); }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    return view(a) == view(b);
  }
};

/// The entries by key. It owns every entry in it, running ones included, until they leave it
/// (take(), erase()) or are detached (detach_all()). Guarded by the queue's mutex.
class entry_index {
public:
  entry_index() = default;
  entry_index(const entry_index&) = delete;
  entry_index& operator=(const entry_index&) = delete;
  ~entry_index() {
    for (entry* e : set_) {
      entry::destroy(e);
    }
  }

  [[nodiscard]] std::size_t size() const { return set_.size(); }
  /// The entry of `key`, or null. Forced inline, as add() is: the boost lookup inside them is,
  /// and out of line they cost schedule() ~5% (bench/timedqueue_bench bm_schedule_cancel).
  [[nodiscard]] BOOST_FORCEINLINE entry* find(std::string_view key) const {
    const auto it = set_.find(key);
    return it == set_.end() ? nullptr : *it;
  }
  /// Every entry, in no order.
  [[nodiscard]] std::vector<const entry*> all() const { return {set_.begin(), set_.end()}; }

  /// A new pending entry for `key` (which has none), with the next generation.
  BOOST_FORCEINLINE entry* add(std::string_view key, std::string_view payload,
                               const group_names& groups, time_point created_at,
                               time_point fire_at) {
    entry* e = entry::create(key, payload, groups);
    e->created_at = created_at;
    e->fire_at = fire_at;
    e->generation = next_generation_++;
    try {
      set_.insert(e);
    } catch (...) {
      entry::destroy(e);
      throw;
    }
    return e;
  }

  /// Takes the entry of `key` out (the caller owns it now), or returns null.
  entry* take(std::string_view key) {
    const auto it = set_.find(key);
    if (it == set_.end()) {
      return nullptr;
    }
    entry* e = *it;
    set_.erase(it);
    return e;
  }

  /// Takes `e` out and frees it.
  void erase(entry* e) {
    set_.erase(e->key());
    entry::destroy(e);
  }

  /// Empties the index: running entries are detached (their runs free them), the others freed.
  void detach_all() {
    for (entry* e : set_) {
      if (e->state == entry_state::running) {
        e->detached.store(true, std::memory_order_relaxed);
      } else {
        entry::destroy(e);
      }
    }
    set_.clear();
  }

private:
  boost::unordered_flat_set<entry*, key_hash, key_equal> set_;
  std::uint64_t next_generation_ = 1;
};

/// The entries waiting for a time (pending ones for fire_at, backing-off ones for their
/// retry), earliest first; ties go to the lower generation.
///
/// An indexed binary heap: each node keeps its deadline next to the pointer, so that sifting
/// compares without touching entries (it only writes their heap_index). Kept against an ordered
/// set by benchmark (BENCHMARKS.md, "The timed queue's deadlines": schedule+cancel 1.3-15x
/// slower with the set, firing either way, ~45 bytes more per pending entry).
class deadlines {
public:
  [[nodiscard]] bool empty() const { return heap_.empty(); }
  /// The earliest deadline; requires !empty().
  [[nodiscard]] time_point first_due() const { return heap_.front().due; }
  [[nodiscard]] bool contains(const entry* e) const { return e->heap_index != no_heap_index; }
  /// The deadline `e` waits for; requires contains(e).
  [[nodiscard]] time_point due_of(const entry* e) const { return heap_[e->heap_index].due; }

  void push(entry* e, time_point due) {
    if (heap_.size() >= no_heap_index) {
      throw std::length_error("timed_queue: too many entries");
    }
    heap_.push_back({due, e});
    sift_up(heap_.size() - 1, {due, e});
  }

  void remove(entry* e) {
    const std::size_t i = e->heap_index;
    assert(i < heap_.size() && heap_[i].e == e);
    e->heap_index = no_heap_index;
    node last = heap_.back();
    heap_.pop_back();
    if (heap_.capacity() > 4096 && heap_.size() < heap_.capacity() / 4) {
      // Give memory back after a spike (amortised O(1): it takes n removals to get here).
      heap_.shrink_to_fit();
    }
    if (i == heap_.size()) {
      return;
    }
    if (i > 0 && before(last, heap_[(i - 1) / 2])) {
      sift_up(i, last);
    } else {
      sift_down(i, last);
    }
  }

  /// Removes and returns the earliest entry; requires !empty().
  entry* pop() {
    entry* top = heap_.front().e;
    remove(top);
    return top;
  }

  /// Forgets every entry (their owner frees them) and gives the memory back.
  void clear() {
    heap_.clear();
    heap_.shrink_to_fit();
  }

private:
  struct node {
    time_point due;
    entry* e;
  };

  static bool before(const node& a, const node& b) {
    if (a.due != b.due) {
      return a.due < b.due;
    }
    return a.e->generation < b.e->generation;
  }

  void place(std::size_t i, node n) {
    n.e->heap_index = static_cast<std::uint32_t>(i);
    heap_[i] = n;
  }

  void sift_up(std::size_t i, node n) {
    while (i > 0) {
      std::size_t parent = (i - 1) / 2;
      if (!before(n, heap_[parent])) {
        break;
      }
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, n);
  }

  void sift_down(std::size_t i, node n) {
    const std::size_t size = heap_.size();
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= size) {
        break;
      }
      if (child + 1 < size && before(heap_[child + 1], heap_[child])) {
        ++child;
      }
      if (!before(heap_[child], n)) {
        break;
      }
      place(i, heap_[child]);
      i = child;
    }
    place(i, n);
  }

  std::vector<node> heap_;
};

}  // namespace tec::timedqueue::detail
