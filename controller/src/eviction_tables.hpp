#pragma once

// The eviction tables: what the attempts of one queue entry leave behind for the next
// attempt, the cancel and evictions() to see (stuck: failing in a row; blocked: refused by a
// disruption budget). Owned by eviction_runner.

#include "common.hpp"
#include "tec/timedqueue/timed_queue.hpp"

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace tec::controller::detail {

using timedqueue::time_point;

// Records about queue entries, by key; each belongs to one entry (its generation) and goes
// when that entry's eviction ends. Thread-safe; size() reads without the lock.
template <class Record>
class entry_records {
public:
  // The eviction of `key` with `generation` is over (done, or nothing to do). The record it
  // may remove was made by an earlier attempt of the same entry, which completed before this
  // one started: the shortcut on an empty table cannot miss it.
  void done(std::string_view key, std::uint64_t generation) {
    if (count_.load() == 0) {
      return;
    }
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it != entries_.end() && it->second.generation == generation) {
      entries_.erase(it);
      count_.store(entries_.size());
    }
  }

  // The queue entry of `key` was cancelled (whatever its generation): true when it had a
  // record. Always takes the lock (no shortcut on an empty table): an attempt may be between
  // its cancelled() check and its insert.
  bool cancelled(std::string_view key) {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) {
      return false;
    }
    entries_.erase(it);
    count_.store(entries_.size());
    return true;
  }

  [[nodiscard]] std::size_t size() const { return count_.load(); }

protected:
  // The record of `key` for `generation`, made (or replaced, for another generation) with
  // `fresh`; requires mu_. Second: whether it is new.
  std::pair<Record&, bool> upsert(std::string_view key, std::uint64_t generation,
                                  const Record& fresh) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      it = entries_.emplace(std::string(key), fresh).first;
      count_.store(entries_.size());
      return {it->second, true};
    }
    if (it->second.generation != generation) {
      it->second = fresh;
      return {it->second, true};
    }
    return {it->second, false};
  }

  mutable std::mutex mu_;
  std::unordered_map<std::string, Record, string_hash, std::equal_to<>> entries_;
  std::atomic<std::size_t> count_{0};  // entries_.size(), readable without the lock
};

struct stuck_record {
  std::uint64_t generation = 0;
  time_point last_report;
};

// The evictions that failed `stuck_after` times in a row and are still retried.
class stuck_table : public entry_records<stuck_record> {
public:
  // A failed attempt `attempt` of the eviction of `key` (generation `generation`) at `now`.
  // Returns true when a stuck report (event + warning) is due: on its `stuck_after`-th
  // failure in a row, then once `interval` passed since the last report. `cancelled` is
  // checked under the lock, so a cancel (which forgets the key after cancelling the entry)
  // never leaves a record behind.
  bool failed(std::string_view key, std::uint64_t generation, std::uint32_t attempt,
              std::uint32_t stuck_after, time_point now, timedqueue::duration interval,
              const std::function<bool()>& cancelled) {
    if (attempt < stuck_after) {
      return false;
    }
    std::lock_guard lock(mu_);
    if (cancelled()) {
      return false;
    }
    auto [rec, fresh] = upsert(key, generation, stuck_record{generation, now});
    if (fresh) {
      return true;
    }
    if (now - rec.last_report >= interval) {
      rec.last_report = now;
      return true;
    }
    return false;
  }
};

struct blocked_record {
  std::uint64_t generation = 0;
  time_point since;                       // the first refusal
  std::optional<time_point> fallback_at;  // when the pod is deleted anyway; none: never
  bool fell_back = false;                 // its fallback delete was announced
};

// Evict mode: the evictions the Eviction API refuses (a disruption budget).
class blocked_table : public entry_records<blocked_record> {
public:
  // A refusal at `now`; `fallback` is the fallbackAfter that applies now (0: never). Returns
  // the record and whether it is the eviction's first refusal. `cancelled` is checked under
  // the lock (see stuck_table::failed).
  std::pair<blocked_record, bool> refused(std::string_view key, std::uint64_t generation,
                                          time_point now, std::chrono::milliseconds fallback,
                                          const std::function<bool()>& cancelled) {
    std::lock_guard lock(mu_);
    if (cancelled()) {
      return {blocked_record{generation, now, std::nullopt, false}, false};
    }
    auto [rec, first] =
        upsert(key, generation, blocked_record{generation, now, std::nullopt, false});
    // Worked out at each refusal: a taint added since (out-of-service) may shorten it.
    rec.fallback_at =
        fallback.count() > 0 ? std::optional<time_point>(rec.since + fallback) : std::nullopt;
    return {rec, first};
  }

  // The record of `key`, whatever its generation.
  [[nodiscard]] std::optional<blocked_record> lookup(std::string_view key) const {
    if (count_.load() == 0) {
      return std::nullopt;
    }
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) {
      return std::nullopt;
    }
    return it->second;
  }

  // The eviction of `key` (`generation`) falls back to a delete: true the first time only, so
  // a fallback delete that fails and is retried is announced once.
  bool fall_back_once(std::string_view key, std::uint64_t generation) {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it == entries_.end() || it->second.generation != generation || it->second.fell_back) {
      return false;
    }
    it->second.fell_back = true;
    return true;
  }
};

struct marked_record {
  std::uint64_t generation = 0;
  std::string uid;         // the pod the eviction is for
  bool running = false;    // an attempt is between its start and its answer
  bool cancelled = false;  // cancelled while running: announced if that attempt deletes nothing
};

// The evictions announced with upstream's "Marking for deletion" event and not over yet. A
// cancel after the announcement says so with "Cancelling deletion" unless the pod is deleted: a
// pod that stays never says only that it is being deleted. Backing off (or blocked) at the
// cancel: announced at once; running: when its attempt ends without a deletion (its DELETE,
// if already sent, may still be accepted).
class marked_table : public entry_records<marked_record> {
public:
  // Attempt `attempt` of the eviction of `key` (`generation`) is about to announce (attempt 1)
  // or to send. `cancelled` is checked under the lock: false when the entry was cancelled
  // already (nothing announced, nothing sent), so a cancel either sees the attempt running or
  // the attempt sees the cancel.
  bool start(std::string_view key, std::uint64_t generation, std::string_view uid,
             std::uint32_t attempt, const std::function<bool()>& cancelled) {
    std::lock_guard lock(mu_);
    if (cancelled()) {
      return false;
    }
    if (attempt == 1) {
      auto [rec, fresh] =
          upsert(key, generation, marked_record{generation, std::string(uid), true, false});
      rec.running = true;
      return true;
    }
    const auto it = entries_.find(key);
    if (it != entries_.end() && it->second.generation == generation) {
      it->second.running = true;
    }
    return true;
  }

  // The attempt of `key` (`generation`) ended without a deletion: true when its entry was
  // cancelled meanwhile (to announce now; the record goes), else the record waits for the
  // next attempt.
  bool ended_undone(std::string_view key, std::uint64_t generation) {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it == entries_.end() || it->second.generation != generation) {
      return false;
    }
    if (it->second.cancelled) {
      entries_.erase(it);
      count_.store(entries_.size());
      return true;
    }
    it->second.running = false;
    return false;
  }

  // The queue entry of `key` was cancelled: the pod's UID when it is to be announced now
  // (marked, no attempt running); a running one is announced by ended_undone().
  std::optional<std::string> cancel(std::string_view key) {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) {
      return std::nullopt;
    }
    if (it->second.running) {
      it->second.cancelled = true;
      return std::nullopt;
    }
    std::string uid = std::move(it->second.uid);
    entries_.erase(it);
    count_.store(entries_.size());
    return uid;
  }
};

}  // namespace tec::controller::detail
