#include "tec/timedqueue/timed_queue.hpp"
#include "entry.hpp"
#include "retry_delays.hpp"
#include "saturating_add.hpp"
#include "starter.hpp"
#include "tec/base/logger.hpp"
#include "wake_timer.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace tec::timedqueue {

using detail::deadlines;
using detail::entry;
using detail::entry_index;
using detail::never;
using detail::retry_delays;

namespace {

std::shared_ptr<spdlog::logger> logger() {
  return base::named_logger("timedqueue");
}

/// At most this many entries are taken per timer callback, so that a mass expiry (a node
/// tainted under thousands of pods) does not hold the mutex for long; the rest follow in the
/// next callback, which is armed at once.
constexpr std::size_t max_fired_per_tick = 1024;

/// `work`, which must not be empty.
work_fn checked(work_fn work) {
  if (!work) {
    throw std::invalid_argument("timed_queue: the work function is empty");
  }
  return work;
}

/// How many work calls are on this thread's stack (to refuse a blocking shutdown there).
thread_local int work_depth = 0;

}  // namespace

/// What a completion reports to; implemented by the queue.
struct completion::state {
  state() = default;
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  virtual ~state();
  virtual void finish(outcome result) = 0;
  [[nodiscard]] virtual bool is_cancelled() const = 0;
};

// ---------------------------------------------------------------------------------------------
// The queue's state: an entry's way from schedule() through its deadline, admission, its runs
// and retries to its end. Everything below `mu_` is guarded by it, the parts with a job of their
// own included (admission_control, deadlines, retry_delays, entry_index, wake_timer, starter,
// run_gate).

struct timed_queue::impl final : detail::start_target, std::enable_shared_from_this<impl> {
  /// The state behind one completion: it owns nothing but the right to report on `e`.
  struct run_state final : completion::state {
    run_state(std::shared_ptr<impl> queue, entry* running) : q(std::move(queue)), e(running) {}
    void finish(outcome result) override;
    [[nodiscard]] bool is_cancelled() const override;

    std::shared_ptr<impl> q;
    entry* e;
    std::atomic<bool> done{false};
    std::atomic<bool> cancelled_at_finish{false};
  };

  impl(driver& drv, work_fn work, retry_policy retry)
      : drv_(drv),
        work_(checked(std::move(work))),
        retry_(retry),
        timer_(drv),
        starter_(drv, mu_, gate_) {}

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  // --- timer ----------------------------------------------------------------------------------

  void on_timer() {
    std::vector<entry*> start;
    {
      std::lock_guard lock(mu_);
      timer_.fired();
      if (gate_.closed()) {
        return;
      }
      const time_point now = drv_.now();
      std::size_t taken = 0;
      while (!deadlines_.empty() && deadlines_.first_due() <= now &&
             deadlines_.first_due() != never && taken < max_fired_per_tick) {
        const time_point due = deadlines_.first_due();
        entry* e = deadlines_.pop();
        if (e->state == entry_state::held) {
          // Its deferral ended: to admission, as due at its original time.
          --stats_.deferred[e->defer_tag];
          make_due(e, e->due_at, now, start);
        } else {
          if (e->state == entry_state::pending) {
            --stats_.pending;
          } else {
            --stats_.backing_off;
          }
          due_or_deferred(e, due, now, start);
        }
        ++taken;
      }
      pump(now, start);
      if (taken == max_fired_per_tick) {
        timer_.arm_for(now);  // more are due: the next tick at once
      }
      timer_.rearm(next_wake());
    }
    post_starts(std::move(start));
  }

  /// The earliest time something may change without an outside event: the next entry due,
  /// or the next token when held entries wait for one. Requires mu_.
  [[nodiscard]] time_point next_wake() const {
    time_point next = deadlines_.empty() ? never : deadlines_.first_due();
    if (const auto token = admission_.token_wake(); token && *token < next) {
      next = *token;
    }
    return next;
  }

  // --- admission (admission_control decides) --------------------------------------------------

  /// An entry whose time has come (a first run or a retry). It starts now if admission allows;
  /// else it is held. Requires mu_.
  void make_due(entry* e, time_point due, time_point now, std::vector<entry*>& start) {
    // A held entry here waited for its deferral, which ends now (hold_deferred kept its tag).
    e->deferral_ended_at = e->state == entry_state::held ? now : time_point{};
    if (admission_.on_due(*e, e->groups(), due, now)) {
      begin_run(e, now, start);
    } else {
      e->state = entry_state::held;
    }
  }

  /// An entry whose time `due` has come: held until its deferral ends when that is later than
  /// `now`, else to admission (make_due). Requires mu_.
  void due_or_deferred(entry* e, time_point due, time_point now, std::vector<entry*>& start) {
    if (e->not_before > now) {
      hold_deferred(e, due);
    } else {
      make_due(e, due, now, start);
    }
  }

  /// `e`, due at `due`, waits for its deferral (in the deadlines, state held). Requires mu_.
  void hold_deferred(entry* e, time_point due) {
    e->due_at = due;
    e->state = entry_state::held;
    e->hold = hold_reason::deferred;
    e->deferred_by_tag = e->defer_tag;
    deadlines_.push(e, e->not_before);
    ++stats_.deferred[e->defer_tag];
    timer_.arm_for(deadlines_.first_due());
  }

  /// Starts held entries that admission lets go now, and arms the timer for the rest (at once
  /// after max_fired_per_tick starts, else for the next token). Requires mu_.
  void pump(time_point now, std::vector<entry*>& start) {
    std::vector<admission_ticket*> admitted;
    const auto result = admission_.pump(now, max_fired_per_tick, admitted);
    for (admission_ticket* t : admitted) {
      begin_run(static_cast<entry*>(t), now, start);
    }
    if (result == admission_control::pump_result::more_now) {
      timer_.arm_for(now);
    } else if (const auto token = admission_.token_wake()) {
      timer_.arm_for(*token);
    }
  }

  /// `e` was admitted: it is running from now on, and its work is to be posted: the caller
  /// calls post_starts(start) once it has released mu_. Requires mu_.
  void begin_run(entry* e, time_point now, std::vector<entry*>& start) {
    e->admitted_at = now;
    e->held_run = e->state == entry_state::held;
    e->state = entry_state::running;
    ++e->attempts;
    ++stats_.running;
    if (start.empty()) {
      gate_.post_begins();
    }
    start.push_back(e);
  }

  /// A detached entry whose run ended (or never started): its group slots are free. Requires
  /// mu_.
  void free_detached(entry* e) {
    admission_.release(e->groups());
    entry::destroy(e);
  }

  // --- running --------------------------------------------------------------------------------

  /// Posts the starts begin_run() collected in `due`, without mu_.
  void post_starts(std::vector<entry*> due) {
    if (!due.empty()) {
      starter_.post(shared_from_this(), std::move(due));
    }
  }

  void start_one(entry* e) override {
    run_info info;
    completion c;
    std::vector<entry*> start;
    bool dropped = false;
    {
      std::lock_guard lock(mu_);
      if (e->detached.load(std::memory_order_relaxed)) {
        // Cancelled (or shut down) between being posted and starting: nothing to run, and
        // its group slots are free again. After shutdown the driver may be gone: this runs
        // on a batch posted before, so it must not be touched (no pump).
        free_detached(e);
        dropped = true;
        if (!gate_.closed()) {
          pump(drv_.now(), start);
        }
      } else {
        info.key = e->key();
        info.payload = e->payload();
        info.created_at = e->created_at;
        info.fire_at = e->fire_at;
        info.due_at = e->due_at;
        info.admitted_at = e->admitted_at;
        info.held = e->held_run;
        info.held_by = e->held_by;
        info.held_group = e->held_by_group;
        info.deferral_ended_at = e->deferral_ended_at;
        info.deferral_tag = e->deferred_by_tag;
        info.attempt = e->attempts;
        info.generation = e->generation;
        c.state_ = std::make_shared<run_state>(shared_from_this(), e);
        gate_.run_begins();
        ++stats_.started;
        if (e->attempts > 1) {
          ++stats_.retries;
        }
      }
    }
    if (dropped) {
      post_starts(std::move(start));
      return;
    }
    const std::uint64_t generation = info.generation;
    ++work_depth;
    try {
      work_(info, std::move(c));
    } catch (const std::exception& ex) {
      // The completion was moved into the work and destroyed while unwinding, which reports
      // the run as abandoned and retries it. `info.key` may already dangle (the run may have
      // completed before throwing), so only the generation is logged.
      logger()->error("timed queue work (generation {}) threw: {}", generation, ex.what());
    }
    --work_depth;
  }

  /// Applies a run's outcome. The entry is the run's own: either still in the index (it owns
  /// the key) or detached (cancelled or shut down), in which case the result is dropped.
  void finish(entry* e, outcome result, std::atomic<bool>& cancelled_at_finish) {
    std::vector<std::function<void()>> idle_callbacks;
    std::vector<entry*> start;
    {
      std::lock_guard lock(mu_);
      if (e->detached.load(std::memory_order_relaxed)) {
        cancelled_at_finish.store(true, std::memory_order_relaxed);
        free_detached(e);
      } else {
        apply_outcome(e, std::move(result));
      }
      if (!gate_.closed()) {
        // The slot this run held may admit a held entry. (After shutdown, a late completion
        // must not touch the driver, which may be gone.)
        pump(drv_.now(), start);
      }
      idle_callbacks = gate_.run_ended();
    }
    post_starts(std::move(start));
    for (auto& fn : idle_callbacks) {
      fn();
    }
  }

  /// An attached entry whose run ended (or never started). Requires mu_.
  void apply_outcome(entry* e, outcome result) {
    assert(e->state == entry_state::running);
    --stats_.running;
    admission_.release(e->groups());
    if (result.ok) {
      ++stats_.succeeded;
      index_.erase(e);
      return;
    }
    ++stats_.failed;
    if (e->last_error) {
      *e->last_error = std::move(result.error);
    } else {
      e->last_error = std::make_unique<std::string>(std::move(result.error));
    }
    const time_point now = drv_.now();
    duration delay = retry_.after(e->attempts);
    if (result.retry_by && *result.retry_by - now < delay) {
      delay = std::max(*result.retry_by - now, duration::zero());
    }
    const time_point due = saturating_add(now, delay);
    e->state = entry_state::backoff;
    ++stats_.backing_off;
    deadlines_.push(e, due);
    timer_.arm_for(deadlines_.first_due());
    logger()->debug("timed queue work for key=\"{}\" failed (attempt {}): {}; retry in {} ms",
                    e->key(), e->attempts, *e->last_error,
                    std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
  }

  /// The run counts as failed and goes to backoff; detached entries are simply freed.
  void drop_unstarted(entry* e) override {
    std::lock_guard lock(mu_);
    if (e->detached.load(std::memory_order_relaxed)) {
      free_detached(e);
      return;
    }
    apply_outcome(e, outcome::failure("work was dropped by the driver before it started"));
  }

  /// The snapshot of an entry in the index. Requires mu_.
  [[nodiscard]] entry_info info_of(const entry* e) const {
    hold_reason hold = hold_reason::none;
    if (e->state == entry_state::held) {
      hold = e->hold == hold_reason::deferred ? hold_reason::deferred : admission_.hold_of(*e);
    }
    return e->info(hold,
                   deadlines_.contains(e) ? std::optional(deadlines_.due_of(e)) : std::nullopt);
  }

  /// Stops everything: pending and backing-off entries are freed, running ones detached.
  /// Returns without waiting for running work.
  void stop(std::function<void()> on_idle) {
    {
      std::unique_lock lock(mu_);
      if (gate_.close()) {
        index_.detach_all();
        deadlines_.clear();
        admission_.drop_held();
        stats_.pending = stats_.running = stats_.backing_off = 0;
        stats_.deferred = {};
        timer_.disarm();
      }
      if (!gate_.wait_posts(lock, on_idle)) {
        return;
      }
    }
    if (on_idle) {
      on_idle();
    }
  }

  void wait_idle() {
    std::unique_lock lock(mu_);
    gate_.wait_runs(lock);
  }

  driver& drv_;
  const work_fn work_;

  mutable std::mutex mu_;
  retry_delays retry_;  ///< Checked after work_ (the order of the constructor's checks).
  entry_index index_;
  deadlines deadlines_;
  admission_control admission_;
  detail::wake_timer timer_;
  detail::run_gate gate_;
  detail::starter starter_;
  /// The counters, `pending`, `running` and `backing_off` included (`held` is admission's).
  queue_stats stats_;
};

void timed_queue::impl::run_state::finish(outcome result) {
  if (done.exchange(true, std::memory_order_acq_rel)) {
    return;
  }
  q->finish(e, std::move(result), cancelled_at_finish);
}

bool timed_queue::impl::run_state::is_cancelled() const {
  if (done.load(std::memory_order_acquire)) {
    return cancelled_at_finish.load(std::memory_order_relaxed);
  }
  return e->detached.load(std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// completion

completion::state::~state() = default;

completion::completion(completion&&) noexcept = default;

completion& completion::operator=(completion&& other) noexcept {
  if (this != &other) {
    if (state_) {
      state_->finish(outcome::failure("abandoned"));
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

completion::~completion() {
  if (state_) {
    state_->finish(outcome::failure("abandoned"));
  }
}

void completion::complete(outcome result) {
  if (state_) {
    state_->finish(std::move(result));
  }
}

bool completion::cancelled() const {
  return !state_ || state_->is_cancelled();
}

// ---------------------------------------------------------------------------------------------
// timed_queue

timed_queue::timed_queue(driver& drv, work_fn work, retry_policy retry)
    : impl_(std::make_shared<impl>(drv, std::move(work), retry)) {
  impl_->timer_.set_on_due([weak = std::weak_ptr<impl>(impl_)] {
    if (auto self = weak.lock()) {
      self->on_timer();
    }
  });
}

timed_queue::~timed_queue() {
  impl_->stop(nullptr);
}

schedule_result timed_queue::schedule(std::string_view key, time_point created_at,
                                      time_point fire_at, std::string_view payload,
                                      group_names groups, deferral deferred) {
  assert(deferred.tag < deferral_tags);
  impl& q = *impl_;
  std::vector<entry*> start;
  {
    std::lock_guard lock(q.mu_);
    if (q.gate_.closed()) {
      return schedule_result::shut_down;
    }
    if (const entry* found = q.index_.find(key)) {
      return found->state == entry_state::running ? schedule_result::already_running
                                                  : schedule_result::already_pending;
    }
    entry* e = q.index_.add(key, payload, groups, created_at, fire_at);
    e->not_before = deferred.until;
    e->defer_tag = deferred.tag;
    ++q.stats_.scheduled;
    const time_point now = q.drv_.now();
    if (fire_at <= created_at || fire_at <= now) {
      q.due_or_deferred(e, fire_at, now, start);
      q.pump(now, start);
    } else {
      e->state = entry_state::pending;
      try {
        q.deadlines_.push(e, fire_at);
      } catch (...) {
        q.index_.erase(e);
        throw;
      }
      ++q.stats_.pending;
      q.timer_.arm_for(fire_at);
    }
  }
  q.post_starts(std::move(start));
  return schedule_result::scheduled;
}

bool timed_queue::defer(std::string_view key, std::uint64_t generation, deferral d) {
  assert(d.tag < deferral_tags);
  impl& q = *impl_;
  std::vector<entry*> start;
  {
    std::lock_guard lock(q.mu_);
    entry* e = q.index_.find(key);
    if (q.gate_.closed() || e == nullptr || e->generation != generation) {
      return false;
    }
    const std::uint8_t tag_was = e->defer_tag;
    e->not_before = d.until;
    e->defer_tag = d.tag;
    if (e->state != entry_state::held) {
      return true;  // kept for when it comes due
    }
    const time_point now = q.drv_.now();
    if (e->hold == hold_reason::deferred) {
      q.deadlines_.remove(e);
      --q.stats_.deferred[tag_was];
      if (d.until > now) {
        q.hold_deferred(e, e->due_at);
      } else {
        q.make_due(e, e->due_at, now, start);
        q.pump(now, start);
      }
    } else if (d.until > now) {
      q.admission_.unhold(*e, e->groups());
      q.hold_deferred(e, e->due_at);
    }
  }
  q.post_starts(std::move(start));
  return true;
}

void timed_queue::set_admission(admission_limits limits) {
  impl& q = *impl_;
  std::vector<entry*> start;
  {
    std::lock_guard lock(q.mu_);
    if (q.gate_.closed()) {
      return;  // nothing is held any more, and the driver may be gone
    }
    const time_point now = q.drv_.now();
    if (!q.admission_.set_limits(limits, now)) {
      return;
    }
    q.pump(now, start);
  }
  q.post_starts(std::move(start));
}

void timed_queue::set_paused(bool paused) {
  impl& q = *impl_;
  std::vector<entry*> start;
  {
    std::lock_guard lock(q.mu_);
    if (!q.admission_.set_paused(paused) || paused || q.gate_.closed()) {
      return;
    }
    q.pump(q.drv_.now(), start);
  }
  q.post_starts(std::move(start));
}

bool timed_queue::paused() const {
  std::lock_guard lock(impl_->mu_);
  return impl_->admission_.paused();
}

bool timed_queue::cancel(std::string_view key) {
  impl& q = *impl_;
  std::lock_guard lock(q.mu_);
  entry* e = q.index_.take(key);
  if (e == nullptr) {
    return false;
  }
  switch (e->state) {
    case entry_state::pending:
      q.deadlines_.remove(e);
      --q.stats_.pending;
      ++q.stats_.cancelled;
      entry::destroy(e);
      return true;
    case entry_state::backoff:
      q.deadlines_.remove(e);
      --q.stats_.backing_off;
      entry::destroy(e);
      return false;
    case entry_state::held:
      if (e->hold == hold_reason::deferred) {
        q.deadlines_.remove(e);
        --q.stats_.deferred[e->defer_tag];
      } else {
        q.admission_.unhold(*e, e->groups());
      }
      ++q.stats_.cancelled;
      entry::destroy(e);
      return true;
    case entry_state::running:
      --q.stats_.running;
      e->detached.store(true, std::memory_order_relaxed);
      return false;
  }
  return false;
}

std::optional<entry_info> timed_queue::lookup(std::string_view key) const {
  std::lock_guard lock(impl_->mu_);
  const entry* e = impl_->index_.find(key);
  if (e == nullptr) {
    return std::nullopt;
  }
  return impl_->info_of(e);
}

queue_snapshot timed_queue::snapshot(std::size_t limit) const {
  std::lock_guard lock(impl_->mu_);
  queue_snapshot out;
  out.total = impl_->index_.size();
  std::vector<const entry*> all = impl_->index_.all();
  const std::size_t n = std::min(limit, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const entry* a, const entry* b) {
                      return a->fire_at != b->fire_at ? a->fire_at < b->fire_at
                                                      : a->key() < b->key();
                    });
  out.entries.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    out.entries.emplace_back(std::string(all[i]->key()), impl_->info_of(all[i]));
  }
  return out;
}

std::size_t timed_queue::size() const {
  std::lock_guard lock(impl_->mu_);
  return impl_->index_.size();
}

queue_stats timed_queue::stats() const {
  std::lock_guard lock(impl_->mu_);
  queue_stats s = impl_->stats_;
  s.held = impl_->admission_.held();
  return s;
}

void timed_queue::shutdown() {
  impl_->stop(nullptr);
  if (work_depth > 0) {
    throw std::logic_error(
        "timed_queue::shutdown() called from inside the work would wait for itself; the queue "
        "is stopped, use shutdown_async() to learn when it is idle");
  }
  impl_->wait_idle();
}

void timed_queue::shutdown_async(std::function<void()> on_idle) {
  impl_->stop(std::move(on_idle));
}

}  // namespace tec::timedqueue
