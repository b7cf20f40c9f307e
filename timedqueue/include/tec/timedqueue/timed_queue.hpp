#pragma once

// Timed work keyed by a string (for the controller: "namespace/name"), with one timer for
// every entry, durable retry, and generation tokens so that no key ever goes stale.
//
// Threading model
// ---------------
// - Every public function may be called from any thread, concurrently. They take one internal
//   mutex (which also serialises the admission_control inside) for O(log n) work and never call
//   user code (the work, shutdown callbacks) while holding it. The driver's now(), arm() and
//   disarm() are called with it held (so that arms reach the driver in order).
// - The handler (the work) is always started through driver::post(), never on the stack of
//   schedule() or of the timer callback, so it may call back into the queue.
// - The handler reports its outcome through the completion it is given, from any thread and
//   at any later time (evictions are asynchronous HTTP requests). A completion that is
//   dropped without being called counts as a failure ("abandoned") and is retried.
//
// Admission control (optional; by default every due entry starts at once) is a policy the
// queue asks, not a part of it: admission_control (admission.hpp) decides whether a due entry,
// first run or retry, may start. An entry names up to two groups at schedule time, one per
// group class (for the controller its node and its namespace). A due entry that may not start
// yet is `held`: never dropped, started in the order admission.hpp describes; cancelling one
// counts as cancelling a pending entry (it has not started).
//
// Deferral (optional, per entry): the caller may say that an entry must not start before a
// time (`deferral`, at schedule() or later with defer()), with a small tag of its own saying
// why. An entry that comes due while deferred waits as `held` (hold_reason::deferred) until
// the deferral ends, then goes to admission as if it had just come due at its original time
// (held entries start in due order). Without a deferral nothing changes.
//
// Why generation tokens (upstream kubernetes issues #100607, #107543, #110401, #125332 and
// PR #141568): every entry gets a fresh generation when it is scheduled. A completion carries
// the generation of the run it belongs to and only ever touches the entry that still has that
// generation, so a finished or failed run can neither re-insert a cancelled key nor remove or
// block a newer entry for the same key.

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tec/timedqueue/admission.hpp"

namespace tec::timedqueue {

/// Where the queue gets the time, its single timer and the threads its work runs on.
/// Production: asio_driver (a base::clock and an Asio executor). Tests: manual_driver.
class driver {
public:
  virtual ~driver() = default;
  /// The current time of the clock every time_point given to the queue is measured on.
  [[nodiscard]] virtual time_point now() const = 0;
  /// Arms the one timer: `on_due` is to be called (through post, never inline) once
  /// now() >= deadline. A later call replaces the earlier deadline and callback.
  virtual void arm(time_point deadline, std::function<void()> on_due) = 0;
  /// Disarms the timer; a callback already posted may still run and must be harmless.
  virtual void disarm() = 0;
  /// Runs `fn` soon, not on the caller's stack.
  virtual void post(std::function<void()> fn) = 0;
};

/// The number of deferral tags (deferral::tag < deferral_tags).
inline constexpr std::size_t deferral_tags = 4;

/// An entry must not start before `until` (a run that comes due earlier waits, held); `tag` is
/// the caller's name for why (reported back in entry_info and counted in queue_stats). An
/// `until` not after the time the run comes due changes nothing.
struct deferral {
  time_point until{};
  std::uint8_t tag = 0;  ///< < deferral_tags.

  friend bool operator==(const deferral&, const deferral&) = default;
};

/// What a run reports back.
struct outcome {
  bool ok = true;
  std::string error;  ///< Why it failed (for logs and metrics); empty when ok.
  /// A failure's retry runs no later than this (a time in the past: at once), even when the
  /// backoff would wait longer. For work that knows when its answer will change.
  std::optional<time_point> retry_by;

  static outcome success() { return {}; }
  static outcome failure(std::string why) { return {false, std::move(why), std::nullopt}; }
  static outcome failure(std::string why, time_point retry_no_later_than) {
    return {false, std::move(why), retry_no_later_than};
  }
};

/// Handed to each run of the work; call complete() exactly once, from any thread.
/// Move-only. Destroying it uncalled reports failure("abandoned").
class completion {
public:
  completion() = default;
  completion(completion&&) noexcept;
  completion& operator=(completion&&) noexcept;
  completion(const completion&) = delete;
  completion& operator=(const completion&) = delete;
  ~completion();

  void complete(outcome result);
  /// True when the entry this run belongs to was cancelled (or the queue shut down) since
  /// the run started; its result will be ignored. Work may check it to skip API calls.
  [[nodiscard]] bool cancelled() const;

private:
  friend class timed_queue;
  struct state;
  std::shared_ptr<state> state_;
};

/// What the work is told about its run. `key` and `payload` point into the queue's entry and
/// stay valid until the run's completion is called or destroyed; copy them to keep them longer.
struct run_info {
  std::string_view key;
  std::string_view payload;  ///< The opaque payload given to schedule() (the pod UID).
  time_point created_at;
  time_point fire_at;
  /// When this run became due (fire_at, or the retry's time) and when it was admitted.
  time_point due_at;
  time_point admitted_at;
  /// The run waited after it came due, for its deferral or for admission control
  /// (admitted_at - due_at is then how long; otherwise the difference is only the timer's
  /// lateness).
  bool held = false;
  /// Why admission control held it last, when it did (admission_ticket::held_by,
  /// held_by_group): paused, rate_limit or group_limit; none when admission did not hold it.
  hold_reason held_by = hold_reason::none;
  std::uint8_t held_group = 0;
  /// When the run first waited for its deferral: when that wait ended (due_at .. this was the
  /// deferral's part of the wait, the rest admission's) and the tag of the deferral it waited
  /// for; time_point{} when it did not wait for a deferral.
  time_point deferral_ended_at{};
  std::uint8_t deferral_tag = 0;
  std::uint32_t attempt = 1;  ///< 1 for the first run, 2.. for retries.
  std::uint64_t generation = 0;
};

/// The work: one function for the whole queue (not one per entry, to keep entries small).
using work_fn = std::function<void(const run_info&, completion)>;

struct retry_policy {
  duration initial = std::chrono::milliseconds(100);
  duration max = std::chrono::seconds(30);
  double multiplier = 2.0;
  double jitter = 0.2;     ///< Each delay is scaled by a random factor in [1 - jitter, 1 + jitter].
  std::uint64_t seed = 0;  ///< 0: seeded from std::random_device.
};

enum class entry_state : std::uint8_t {
  pending,  ///< Waiting for its fire time.
  running,  ///< Its work has been started and has not completed.
  backoff,  ///< Its last run failed; waiting to be retried.
  held,     ///< Due, waiting for admission (see hold_reason).
};

/// A snapshot of one entry.
struct entry_info {
  entry_state state = entry_state::pending;
  time_point created_at;
  time_point fire_at;          ///< The original fire time (not moved by retries).
  time_point next_attempt_at;  ///< For backoff: when the next retry runs.
  std::string payload;
  std::uint64_t generation = 0;
  std::uint32_t attempts = 0;            ///< Runs started so far.
  std::string last_error;                ///< Error of the last failed run, if any.
  hold_reason hold = hold_reason::none;  ///< For held entries.
  std::uint8_t hold_group = 0;           ///< For group_limit: the class of the full group.
  std::array<std::string, group_classes> groups;
  /// The entry's deferral (until == time_point{}: none); a held entry with hold deferred
  /// waits for it.
  deferral deferred;
};

/// A copy of the queue's entries taken at one instant (see timed_queue::snapshot).
struct queue_snapshot {
  std::size_t total = 0;  ///< Entries in the queue, in any state (listed or not).
  /// The first entries in due order (fire_at, ties by key), each with its key.
  std::vector<std::pair<std::string, entry_info>> entries;
};

enum class schedule_result : std::uint8_t {
  scheduled,        ///< A new entry was created (and, if already due, started).
  already_pending,  ///< Skipped: the key is pending or backing off; its fire time is kept.
  already_running,  ///< Skipped: the key's work is running.
  shut_down,        ///< Skipped: the queue is shut down.
};

/// Counters for metrics; monotonic except `pending`, `running` and `backing_off`.
struct queue_stats {
  std::uint64_t scheduled = 0;
  std::uint64_t cancelled = 0;  ///< Cancels that returned true.
  std::uint64_t started = 0;    ///< Work invocations, first tries and retries.
  std::uint64_t succeeded = 0;
  std::uint64_t failed = 0;   ///< Runs that reported failure (each is retried).
  std::uint64_t retries = 0;  ///< Runs started with attempt > 1.
  std::size_t pending = 0;
  std::size_t running = 0;
  std::size_t backing_off = 0;
  std::size_t held = 0;  ///< Due entries waiting for admission.
  /// Due entries waiting for their deferral to end, by deferral tag (not in `held`).
  std::array<std::size_t, deferral_tags> deferred{};
};

class timed_queue {
public:
  /// `drv` must outlive the queue; `work` is moved into it. Throws std::invalid_argument for
  /// an empty `work` or a nonsensical retry policy (initial <= 0, max < initial, multiplier < 1,
  /// jitter outside [0, 1]).
  timed_queue(driver& drv, work_fn work, retry_policy retry = {});
  /// Call shutdown() before destroying it. Without that, the destructor stops the queue as
  /// shutdown_async() does, without waiting: runs still in flight complete into a retired
  /// state that the driver is never touched from again.
  ~timed_queue();
  timed_queue(const timed_queue&) = delete;
  timed_queue& operator=(const timed_queue&) = delete;

  /// Adds work for `key` due at `fire_at`. Any string is a key, the empty one included; keys,
  /// payloads and `groups` (for admission control) are copied. A fire_at of time_point::max()
  /// never fires. If the key already has an entry nothing changes and that is reported
  /// (upstream: an already scheduled eviction keeps its fire time). Work with fire_at <=
  /// created_at, or fire_at <= now(), is due at once (no timer tick).
  schedule_result schedule(std::string_view key, time_point created_at, time_point fire_at,
                           std::string_view payload = {}, group_names groups = {},
                           deferral deferred = {});

  /// Replaces the deferral of the entry of `key` if it has the generation `generation`.
  /// A pending or backing-off entry keeps it for when it comes due; a held one (by admission
  /// or by its deferral) waits for `d.until` when that is later than now, else goes to
  /// admission at once; a running one keeps it for a retry. Returns false when there is no
  /// such entry (or the queue is shut down).
  bool defer(std::string_view key, std::uint64_t generation, deferral d);

  /// Removes the entry for `key`. Returns true only when a pending or held, not yet started
  /// entry was cancelled (that is when the controller emits "Cancelling deletion"). An entry that
  /// is running or backing off is removed too (the key is free at once for a new schedule) and its
  /// run is marked cancelled: its result is ignored and it is not retried; for those, cancel
  /// returns false.
  bool cancel(std::string_view key);

  /// Replaces the admission limits (at any time; held entries are re-examined at once).
  void set_admission(admission_limits limits);
  /// Pauses admission (nothing starts; due entries are held) or resumes it. Runs already
  /// started go on.
  void set_paused(bool paused);
  [[nodiscard]] bool paused() const;

  [[nodiscard]] std::optional<entry_info> lookup(std::string_view key) const;
  /// Copies of the first `limit` entries in due order (fire_at, ties by key; the states and
  /// hold reasons lookup() gives) and the count of all entries, for a report. O(n log limit)
  /// under the queue's mutex, which holds schedule() and the timer off meanwhile: n pointers
  /// are sorted, only the listed entries are copied.
  [[nodiscard]] queue_snapshot snapshot(std::size_t limit) const;
  /// Entries in any state.
  [[nodiscard]] std::size_t size() const;
  [[nodiscard]] queue_stats stats() const;

  /// Cancels everything pending or backing off, refuses new work, and blocks until every
  /// running work has completed (or its completion was destroyed), including runs whose entry
  /// was cancelled while they ran. Runs that were posted to the driver but had not started are
  /// not waited for: they are dropped without calling the work. Idempotent.
  ///
  /// Must not be called from inside the work (it then stops the queue and throws
  /// std::logic_error instead of waiting for itself), nor from a thread that has to deliver a
  /// pending completion (for example the only thread of the io_context that runs the HTTP
  /// requests the work started): that would deadlock. Use shutdown_async() there.
  void shutdown();

  /// The non-blocking shutdown: does what shutdown() does but returns at once; `on_idle` runs
  /// once no run is in flight, either inline (when none is) or on the thread that delivers the
  /// last completion. It must not call back into this queue's shutdown. Any thread.
  void shutdown_async(std::function<void()> on_idle);

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace tec::timedqueue
