#pragma once

// Admission control for the timed queue: whether a due entry may start now. The queue asks;
// this class decides and keeps the state the decision needs: the limits, the token bucket
// (starts per second with a burst), the entries running per group, the pause switch and the
// held entries. No I/O, no clock (every call that needs the time is given `now`), no timer: it
// says when it wants to be asked again (token_wake()), and the queue arms its own timer.
//
// Held entries start in the order they became due (ties: the lower generation); one whose
// group is full steps aside (into that group's blocked list) for later ones of free groups and
// goes back in order when a run of its group ends. Token wake-ups are batched, and a late one
// still counts the tokens due since the one it waited for, as client-go's rate.Limiter
// reserves a waiter's slot (admission.cpp: min_token_wake_interval, max_token_catch_up).

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tec::timedqueue {

using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;
using duration = clock_type::duration;

/// Why a held entry does not start yet.
enum class hold_reason : std::uint8_t {
  none,
  paused,       ///< set_paused(true).
  rate_limit,   ///< No token in the bucket.
  group_limit,  ///< One of its groups has max_running_per_group entries running.
  /// Not admission's: the caller deferred the entry past its due time (timed_queue's
  /// deferral); it comes to admission when the deferral ends.
  deferred,
};

/// The number of group classes an entry can belong to.
inline constexpr std::size_t group_classes = 2;

/// An entry's groups, one per class ("" = none for that class).
using group_names = std::array<std::string_view, group_classes>;

/// Admission control; the default admits everything at once.
struct admission_limits {
  double starts_per_second = 0;  ///< 0 (or less): no rate limit.
  std::uint32_t burst = 0;       ///< Tokens saved up at most; 0 = max(1, ceil(starts_per_second)).
  /// Entries running at once per group, per class; 0 = unlimited.
  std::array<std::uint32_t, group_classes> max_running_per_group{};

  friend bool operator==(const admission_limits&, const admission_limits&) = default;
};

/// What admission keeps in an entry it may hold. The caller's entry type derives from it (the
/// queue's entry does), so a ticket handed back by pump() leads back to the entry. The caller
/// owns the ticket; admission keeps pointers to held tickets only, until they are admitted,
/// unhold() is called for them, or drop_held().
struct admission_ticket {
  /// When the entry became due: held entries start in this order. Set by on_due().
  time_point due_at{};
  /// The caller's number for the entry, unique and increasing in schedule order (the queue's
  /// generation): ties of due_at go to the lower one.
  std::uint64_t generation = 0;
  /// Where a held entry waits: group_limit (in the blocked list of its group of class
  /// hold_group) or rate_limit (in the ready list, whatever holds it: the bucket or the pause).
  hold_reason hold = hold_reason::none;
  std::uint8_t hold_group = 0;
  /// Why the entry's current (or last) run was held last before it was admitted: paused,
  /// rate_limit or group_limit (with its class), kept once it is admitted; none when it was
  /// admitted as soon as it came due. A pause marks every entry held then.
  hold_reason held_by = hold_reason::none;
  std::uint8_t held_by_group = 0;
};

/// The admission decision and its state (see the comment at the top of this file).
///
/// Thread-safety: none; the queue calls it under its mutex. Group names passed in must stay
/// valid while the entry is held or running (the queue's point into its entries).
class admission_control {
public:
  /// Replaces the limits (at first admission_limits{}: everything is admitted at once); returns
  /// false (and changes nothing) when they are the same. A new rate or burst starts with a full
  /// bucket at `now`. Every blocked entry goes back into the ready list (the caps changed); the
  /// caller then calls pump().
  bool set_limits(const admission_limits& limits, time_point now);

  [[nodiscard]] bool paused() const { return paused_; }
  /// Returns false when unchanged. Pausing forgets the token wake-up (nothing starts until the
  /// caller resumes and calls pump()).
  bool set_paused(bool paused);

  /// An entry came due at `due` (its first run or a retry). Returns true when it may start now:
  /// nothing is held before it, admission is not paused, its groups have room and a token is
  /// there; its token and group slots are then taken (give them back with release()).
  /// Otherwise it is held (in the ready list) and pump() starts it later.
  bool on_due(admission_ticket& t, const group_names& groups, time_point due, time_point now);

  /// What pump() did besides filling `admitted`.
  enum class pump_result : std::uint8_t {
    idle,      ///< Nothing held may start now (or nothing is held).
    more_now,  ///< It stopped after `max_admitted` starts: call again at once.
  };
  /// Admits held entries in due order while admission allows, at most `max_admitted`, appending
  /// them to `admitted` (their tokens and group slots taken). Entries whose group is full move
  /// to that group's blocked list. When the bucket runs dry it sets token_wake().
  pump_result pump(time_point now, std::size_t max_admitted,
                   std::vector<admission_ticket*>& admitted);

  /// When the caller should call pump() again for a token (set by pump(), cleared by the next
  /// pump(), by pausing and by drop_held()).
  [[nodiscard]] std::optional<time_point> token_wake() const { return token_wake_; }

  /// A run of an entry with these groups ended (or it was dropped while running): its group
  /// slots are free, and the earliest entry blocked on each such group goes back to the ready
  /// list.
  void release(const group_names& groups);

  /// A held entry leaves (it was cancelled).
  void unhold(const admission_ticket& t, const group_names& groups);

  /// Forgets every held entry (the caller frees them) and the token wake-up. Group slots of
  /// entries still running stay taken until release().
  void drop_held();

  /// What lookup() reports for a held entry: group_limit, paused or rate_limit.
  [[nodiscard]] hold_reason hold_of(const admission_ticket& t) const;

  /// Entries held (waiting for admission).
  [[nodiscard]] std::size_t held() const { return held_; }

private:
  /// A held entry. Its groups are kept to decide on it later.
  struct held_slot {
    admission_ticket* ticket = nullptr;
    group_names groups;
  };
  /// Held entries in the order they became due (ties: generation).
  using held_order = std::pair<time_point, std::uint64_t>;
  using held_set = std::map<held_order, held_slot>;
  struct group_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  template <class T>
  using by_group = std::unordered_map<std::string, T, group_hash, std::equal_to<>>;

  /// The class of one of `groups` that is full, or group_classes when none is.
  [[nodiscard]] std::size_t full_group(const group_names& groups) const;
  /// Whether an entry with `groups` may start now; takes the token if it may.
  bool admits(const group_names& groups, time_point now);
  void take_slots(const group_names& groups);
  void refill(time_point now);
  [[nodiscard]] double bucket_size() const;
  /// Counts the tokens due since the wake-up pump() waited for (see max_token_catch_up).
  void catch_up(time_point now);
  /// Sets token_wake_ for the next token.
  void wait_for_token(time_point now);

  admission_limits limits_;
  bool paused_ = false;
  /// The token bucket. Not tec::base::token_bucket: its refill cuts tokens above the burst,
  /// and the tokens made up for a late wake-up (catch_up()) must survive the next refill; and
  /// a token due "now" may be short by a rounding error here (token_epsilon).
  double tokens_ = 0;  ///< Set when a rate is configured (set_limits).
  time_point tokens_at_{};
  /// When pump() waits for the next token: the wake-up, and when that token comes (earlier
  /// than the wake-up when min_token_wake_interval batches the starts).
  std::optional<time_point> token_wake_;
  time_point token_due_{};
  /// Held entries not blocked by a group, in due order.
  held_set ready_;
  /// Held entries whose group of that class is full, by group name, in due order.
  std::array<by_group<held_set>, group_classes> blocked_;
  /// Running entries per group name, per class.
  std::array<by_group<std::uint32_t>, group_classes> running_in_group_;
  std::size_t held_ = 0;
};

}  // namespace tec::timedqueue
