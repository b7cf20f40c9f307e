#include "tec/timedqueue/timed_queue.hpp"
#include "entry.hpp"
#include "retry_delays.hpp"
#include "saturating_add.hpp"
#include "tec/base/logger.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/unordered/unordered_flat_set.hpp>

namespace tec::timedqueue {

using detail::deadlines;
using detail::entry;
using detail::key_equal;
using detail::key_hash;
using detail::retry_delays;

namespace {

std::shared_ptr<spdlog::logger> logger() {
  return base::named_logger("timedqueue");
}

/// A deadline that is never reached: entries due then never fire (and backoff saturates there).
constexpr time_point never = time_point::max();

/// At most this many entries are taken per timer callback, so that a mass expiry (a node
/// tainted under thousands of pods) does not hold the mutex for long; the rest follow in the
/// next callback, which is armed at once.
constexpr std::size_t max_fired_per_tick = 1024;

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
// The queue's state. Everything below `mu_` is guarded by it.
//
// One job: an entry's way from schedule() through its deadline, admission, its runs and
// retries to its end, under one mutex. The parts with a job of their own live beside it:
// admission_control (whether a due entry may start), deadlines (the heap), retry_delays and
// the entry's layout (entry.hpp). What stays here (~500 lines, 15 members) is bound together by
// the mutex and by the threading contract in timed_queue.hpp: posting runs outside the lock,
// completions from any thread, and a shutdown that waits for both; splitting those apart would
// spread that contract over classes that must then share the lock.

struct timed_queue::impl : std::enable_shared_from_this<timed_queue::impl> {
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

  /// Entries whose work was posted to the driver and not yet started.
  struct start_batch {
    start_batch(std::shared_ptr<impl> queue, std::vector<entry*> due)
        : q(std::move(queue)), entries(std::move(due)) {}
    start_batch(const start_batch&) = delete;
    start_batch& operator=(const start_batch&) = delete;
    ~start_batch();

    std::shared_ptr<impl> q;
    std::vector<entry*> entries;
    std::size_t next = 0;
  };

  impl(driver& drv, work_fn work, retry_policy retry)
      : drv_(drv), work_(checked(std::move(work))), retry_(retry) {}

  static work_fn checked(work_fn work) {
    if (!work) {
      throw std::invalid_argument("timed_queue: the work function is empty");
    }
    return work;
  }

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  ~impl() {
    for (entry* e : index_) {
      entry::destroy(e);
    }
  }

  // --- timer ----------------------------------------------------------------------------------

  /// Arms the driver to the earliest deadline if it is not armed early enough. Cancels do not
  /// re-arm: a timer that fires early finds nothing due and re-arms to the new earliest.
  void arm_for(time_point due) {
    if (due == never || (armed_ && *armed_ <= due)) {
      return;
    }
    armed_ = due;
    drv_.arm(due, [weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        self->on_timer();
      }
    });
  }

  void on_timer() {
    std::vector<entry*> start;
    {
      std::lock_guard lock(mu_);
      armed_.reset();
      if (shut_down_) {
        return;
      }
      const time_point now = drv_.now();
      std::size_t taken = 0;
      while (!deadlines_.empty() && deadlines_.first_due() <= now &&
             deadlines_.first_due() != never && taken < max_fired_per_tick) {
        const time_point due = deadlines_.first_due();
        entry* e = deadlines_.pop();
        if (e->state == entry_state::pending) {
          --stats_.pending;
        } else {
          --stats_.backing_off;
        }
        make_due(e, due, now, start);
        ++taken;
      }
      pump(now, start);
      if (taken == max_fired_per_tick) {
        arm_for(now);  // more are due: the next tick at once
      }
      const time_point next = next_wake();
      if (next != never) {
        arm_for(next);
      } else if (!armed_) {
        drv_.disarm();
      }
      if (!start.empty()) {
        ++posting_;
      }
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
    if (admission_.on_due(*e, e->groups(), due, now)) {
      begin_run(e, now, start);
    } else {
      e->state = entry_state::held;
    }
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
      arm_for(now);
    } else if (const auto token = admission_.token_wake()) {
      arm_for(*token);
    }
  }

  /// `e` was admitted: it is running from now on, and its work is to be posted. Requires mu_.
  void begin_run(entry* e, time_point now, std::vector<entry*>& start) {
    e->admitted_at = now;
    e->state = entry_state::running;
    ++e->attempts;
    ++stats_.running;
    start.push_back(e);
  }

  /// A run of `e` ended (or its entry was dropped while running). Requires mu_.
  void release_groups(const entry* e) { admission_.release(e->groups()); }

  // --- running --------------------------------------------------------------------------------

  /// Drops one from posting_ when a post is done (see post_starts).
  struct posted_guard {
    explicit posted_guard(impl& queue) : q(queue) {}
    posted_guard(const posted_guard&) = delete;
    posted_guard& operator=(const posted_guard&) = delete;
    ~posted_guard() {
      std::lock_guard lock(q.mu_);
      if (--q.posting_ == 0 && q.shut_down_) {
        q.idle_cv_.notify_all();
      }
    }
    impl& q;
  };

  void post_batch(std::shared_ptr<start_batch> batch) {
    drv_.post([batch = std::move(batch)]() mutable {
      impl& q = *batch->q;
      q.run_batch(std::move(batch));
    });
  }

  /// Hands entries marked running to the driver. Called without the mutex, after the caller
  /// incremented posting_ under it (if `due` is not empty): stop() waits for posting_ to drop
  /// to zero, so once shutdown has returned nothing touches the driver any more. While a batch
  /// is still starting its entries, `due` joins its end instead: entries start in the order
  /// they became due (ties in scheduling order), one batch at a time.
  void post_starts(std::vector<entry*> due) {
    if (due.empty()) {
      return;
    }
    const posted_guard guard(*this);
    std::shared_ptr<start_batch> running;  // released after the mutex (its destructor locks it)
    {
      std::lock_guard lock(mu_);
      running = starting_.lock();
      if (running && !shut_down_) {
        running->entries.insert(running->entries.end(), due.begin(), due.end());
        return;
      }
    }
    auto batch = std::make_shared<start_batch>(shared_from_this(), std::move(due));
    {
      std::lock_guard lock(mu_);
      starting_ = batch;
    }
    post_batch(std::move(batch));
  }

  /// Starts the batch's next entry, then posts the rest behind what that start posted: the
  /// work's own continuation (for the controller, the eviction's request, started on the same
  /// executor) runs before the next start, so the first of many entries due at once is under
  /// way after one start, not after all of them (issue 30: 500 pods due at the same instant
  /// sent their first DELETE only once the 500 starts had run). After shutdown the rest is
  /// not posted: the batch's destructor drops it.
  void run_batch(std::shared_ptr<start_batch> batch) {
    entry* e = nullptr;
    {
      std::lock_guard lock(mu_);
      if (batch->next < batch->entries.size()) {
        e = batch->entries[batch->next++];
      }
    }
    if (e != nullptr) {
      start_one(e);
    }
    {
      std::lock_guard lock(mu_);
      if (batch->next >= batch->entries.size() || shut_down_) {
        if (starting_.lock() == batch) {
          starting_.reset();
        }
        return;
      }
      ++posting_;
    }
    const posted_guard guard(*this);
    post_batch(std::move(batch));
  }

  void start_one(entry* e) {
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
        release_groups(e);
        entry::destroy(e);
        dropped = true;
        if (!shut_down_) {
          pump(drv_.now(), start);
        }
        if (!start.empty()) {
          ++posting_;
        }
      } else {
        info.key = e->key();
        info.payload = e->payload();
        info.created_at = e->created_at;
        info.fire_at = e->fire_at;
        info.due_at = e->due_at;
        info.admitted_at = e->admitted_at;
        info.attempt = e->attempts;
        info.generation = e->generation;
        c.state_ = std::make_shared<run_state>(shared_from_this(), e);
        ++active_runs_;
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
      --active_runs_;
      if (e->detached.load(std::memory_order_relaxed)) {
        cancelled_at_finish.store(true, std::memory_order_relaxed);
        release_groups(e);
        entry::destroy(e);
      } else {
        apply_outcome(e, std::move(result));
      }
      if (!shut_down_) {
        // The slot this run held may admit a held entry. (After shutdown, a late completion
        // must not touch the driver, which may be gone.)
        pump(drv_.now(), start);
      }
      if (!start.empty()) {
        ++posting_;
      }
      if (active_runs_ == 0 && shut_down_) {
        idle_callbacks.swap(idle_callbacks_);
        idle_cv_.notify_all();
      }
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
    release_groups(e);
    if (result.ok) {
      ++stats_.succeeded;
      index_.erase(e->key());
      entry::destroy(e);
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
    arm_for(deadlines_.first_due());
    logger()->debug("timed queue work for key=\"{}\" failed (attempt {}): {}; retry in {} ms",
                    e->key(), e->attempts, *e->last_error,
                    std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
  }

  /// A start task dropped by the driver before it ran (the driver is being torn down). The
  /// run counts as failed and goes to backoff; detached entries are simply freed.
  void drop_unstarted(entry* e) {
    std::lock_guard lock(mu_);
    if (e->detached.load(std::memory_order_relaxed)) {
      release_groups(e);
      entry::destroy(e);
      return;
    }
    apply_outcome(e, outcome::failure("work was dropped by the driver before it started"));
  }

  // --- public operations ----------------------------------------------------------------------

  schedule_result schedule(std::string_view key, time_point created_at, time_point fire_at,
                           std::string_view payload, const group_names& groups) {
    std::vector<entry*> start;
    {
      std::lock_guard lock(mu_);
      if (shut_down_) {
        return schedule_result::shut_down;
      }
      auto found = index_.find(key);
      if (found != index_.end()) {
        return (*found)->state == entry_state::running ? schedule_result::already_running
                                                       : schedule_result::already_pending;
      }
      entry* e = entry::create(key, payload, groups);
      e->created_at = created_at;
      e->fire_at = fire_at;
      e->generation = next_generation_++;
      try {
        index_.insert(e);
      } catch (...) {
        entry::destroy(e);
        throw;
      }
      ++stats_.scheduled;
      const time_point now = drv_.now();
      if (fire_at <= created_at || fire_at <= now) {
        make_due(e, fire_at, now, start);
        pump(now, start);
        if (!start.empty()) {
          ++posting_;
        }
      } else {
        e->state = entry_state::pending;
        try {
          deadlines_.push(e, fire_at);
        } catch (...) {
          index_.erase(key);
          entry::destroy(e);
          throw;
        }
        ++stats_.pending;
        arm_for(fire_at);
      }
    }
    post_starts(std::move(start));
    return schedule_result::scheduled;
  }

  bool cancel(std::string_view key) {
    std::lock_guard lock(mu_);
    auto found = index_.find(key);
    if (found == index_.end()) {
      return false;
    }
    entry* e = *found;
    index_.erase(found);
    switch (e->state) {
      case entry_state::pending:
        deadlines_.remove(e);
        --stats_.pending;
        ++stats_.cancelled;
        entry::destroy(e);
        return true;
      case entry_state::backoff:
        deadlines_.remove(e);
        --stats_.backing_off;
        entry::destroy(e);
        return false;
      case entry_state::held:
        admission_.unhold(*e, e->groups());
        ++stats_.cancelled;
        entry::destroy(e);
        return true;
      case entry_state::running:
        --stats_.running;
        e->detached.store(true, std::memory_order_relaxed);
        return false;
    }
    return false;
  }

  void set_admission(admission_limits limits) {
    std::vector<entry*> start;
    {
      std::lock_guard lock(mu_);
      if (shut_down_) {
        return;  // nothing is held any more, and the driver may be gone
      }
      const time_point now = drv_.now();
      if (!admission_.set_limits(limits, now)) {
        return;
      }
      pump(now, start);
      if (!start.empty()) {
        ++posting_;
      }
    }
    post_starts(std::move(start));
  }

  void set_paused(bool paused) {
    std::vector<entry*> start;
    {
      std::lock_guard lock(mu_);
      if (!admission_.set_paused(paused) || paused || shut_down_) {
        return;
      }
      pump(drv_.now(), start);
      if (!start.empty()) {
        ++posting_;
      }
    }
    post_starts(std::move(start));
  }

  std::optional<entry_info> lookup(std::string_view key) const {
    std::lock_guard lock(mu_);
    auto found = index_.find(key);
    if (found == index_.end()) {
      return std::nullopt;
    }
    return info_of(*found);
  }

  queue_snapshot snapshot(std::size_t limit) const {
    std::lock_guard lock(mu_);
    queue_snapshot out;
    out.total = index_.size();
    std::vector<const entry*> all(index_.begin(), index_.end());
    const std::size_t n = detail::sort_first_by_fire_at(all, limit);
    out.entries.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      out.entries.emplace_back(std::string(all[i]->key()), info_of(all[i]));
    }
    return out;
  }

  /// The snapshot of an entry in the index. Requires mu_.
  [[nodiscard]] entry_info info_of(const entry* e) const {
    return e->info(e->state == entry_state::held ? admission_.hold_of(*e) : hold_reason::none,
                   deadlines_.contains(e) ? std::optional(deadlines_.due_of(e)) : std::nullopt);
  }

  /// Stops everything: pending and backing-off entries are freed, running ones detached.
  /// Returns without waiting for running work.
  void stop(std::function<void()> on_idle) {
    {
      std::unique_lock lock(mu_);
      if (!shut_down_) {
        shut_down_ = true;
        for (entry* e : index_) {
          if (e->state == entry_state::running) {
            e->detached.store(true, std::memory_order_relaxed);
          } else {
            entry::destroy(e);
          }
        }
        index_.clear();
        deadlines_.clear();
        admission_.drop_held();
        stats_.pending = stats_.running = stats_.backing_off = 0;
        armed_.reset();
        drv_.disarm();
      }
      // Only driver::post() calls are waited for here, never user code.
      idle_cv_.wait(lock, [this] { return posting_ == 0; });
      if (active_runs_ != 0) {
        if (on_idle) {
          idle_callbacks_.push_back(std::move(on_idle));
        }
        return;
      }
    }
    if (on_idle) {
      on_idle();
    }
  }

  void wait_idle() {
    std::unique_lock lock(mu_);
    idle_cv_.wait(lock, [this] { return active_runs_ == 0; });
  }

  driver& drv_;
  const work_fn work_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  retry_delays retry_;  ///< Checked after work_ (the order of the constructor's checks).
  boost::unordered_flat_set<entry*, key_hash, key_equal> index_;
  deadlines deadlines_;
  admission_control admission_;
  std::optional<time_point> armed_;
  std::uint64_t next_generation_ = 1;
  bool shut_down_ = false;
  /// Completions handed to work and not yet completed (detached runs included).
  std::size_t active_runs_ = 0;
  /// Threads between deciding to post starts and having posted them (see post_starts()).
  std::size_t posting_ = 0;
  /// The batch whose entries are being started, one per driver task (see post_starts).
  std::weak_ptr<start_batch> starting_;
  std::vector<std::function<void()>> idle_callbacks_;
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

timed_queue::impl::start_batch::~start_batch() {
  for (; next < entries.size(); ++next) {
    q->drop_unstarted(entries[next]);
  }
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
    : impl_(std::make_shared<impl>(drv, std::move(work), retry)) {}

timed_queue::~timed_queue() {
  impl_->stop(nullptr);
}

schedule_result timed_queue::schedule(std::string_view key, time_point created_at,
                                      time_point fire_at, std::string_view payload,
                                      group_names groups) {
  return impl_->schedule(key, created_at, fire_at, payload, groups);
}

void timed_queue::set_admission(admission_limits limits) {
  impl_->set_admission(limits);
}

void timed_queue::set_paused(bool paused) {
  impl_->set_paused(paused);
}

bool timed_queue::paused() const {
  std::lock_guard lock(impl_->mu_);
  return impl_->admission_.paused();
}

bool timed_queue::cancel(std::string_view key) {
  return impl_->cancel(key);
}

std::optional<entry_info> timed_queue::lookup(std::string_view key) const {
  return impl_->lookup(key);
}

queue_snapshot timed_queue::snapshot(std::size_t limit) const {
  return impl_->snapshot(limit);
}

bool timed_queue::contains(std::string_view key) const {
  std::lock_guard lock(impl_->mu_);
  return impl_->index_.contains(key);
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
