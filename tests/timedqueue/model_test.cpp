// Seeded random operation sequences against timed_queue on the manual clock, checking the
// contract after every step: exact fire times, exact backoff delays, cancel's return value,
// never a run for a cancelled entry, at most one live run per key, and nothing lost at the end.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/manual_driver.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::timedqueue {
namespace {

using namespace std::chrono_literals;

struct generation_state {
  std::string key;
  time_point first_due;
  std::optional<time_point> failed_at;  ///< When its last (counted) run failed.
  std::uint32_t runs = 0;
  bool cancelled_pending = false;  ///< cancel() returned true for it.
  bool cancelled_late = false;     ///< Cancelled while running or backing off.
  bool succeeded = false;
};

/// What the sequences exercised, over all seeds (so the test can insist on coverage).
struct coverage {
  std::uint64_t retries = 0;
  std::uint64_t cancelled = 0;
  std::uint64_t cancelled_late = 0;
  std::uint64_t succeeded = 0;
};
coverage totals;

struct held_run {
  std::uint64_t generation = 0;
  completion done;
};

duration backoff(std::uint32_t failed_attempts) {
  duration d = 100ms;
  for (std::uint32_t i = 1; i < failed_attempts && d < 1s; ++i) {
    d *= 2;
  }
  return std::min<duration>(d, 1s);
}

class model {
public:
  explicit model(std::uint32_t seed)
      : rng_(seed),
        queue_(
            drv_, [this](const run_info& info, completion done) { on_run(info, std::move(done)); },
            policy()) {}

  model(const model&) = delete;
  model& operator=(const model&) = delete;
  ~model() {
    held_.clear();
    queue_.shutdown();
  }

  static retry_policy policy() {
    retry_policy p;
    p.initial = 100ms;
    p.max = 1s;
    p.jitter = 0.0;
    return p;
  }

  void step() {
    std::uniform_int_distribution<int> op(0, 9);
    const int which = op(rng_);
    if (which <= 2) {
      schedule();
    } else if (which <= 4) {
      cancel();
    } else if (which <= 6) {
      std::uniform_int_distribution<int> ms(0, 400);
      drv_.advance(std::chrono::milliseconds(ms(rng_)));
    } else {
      finish_one(which);
    }
    check_counts();
  }

  void drain() {
    for (int i = 0; i < 1000 && (!held_.empty() || queue_.size() > 0); ++i) {
      while (!held_.empty()) {
        finish(held_.size() - 1, outcome::success());
      }
      drv_.advance(2s);
    }
    EXPECT_TRUE(held_.empty());
    EXPECT_EQ(queue_.size(), 0U);
    const queue_stats s = queue_.stats();
    totals.retries += s.retries;
    totals.cancelled += s.cancelled;
    totals.succeeded += s.succeeded;
    for (const auto& [gen, g] : gens_) {
      totals.cancelled_late += g.cancelled_late ? 1U : 0U;
    }
    for (const auto& [gen, g] : gens_) {
      EXPECT_TRUE(g.cancelled_pending || g.cancelled_late || g.succeeded)
          << "generation " << gen << " of " << g.key << " was lost";
      if (g.cancelled_pending) {
        EXPECT_EQ(g.runs, 0U);
      }
    }
  }

private:
  std::string pick_key() {
    std::uniform_int_distribution<int> k(0, 7);
    return "ns/pod-" + std::to_string(k(rng_));
  }

  void schedule() {
    const std::string key = pick_key();
    std::uniform_int_distribution<int> ms(-200, 3000);
    const time_point now = drv_.now();
    const time_point fire_at = now + std::chrono::milliseconds(ms(rng_));
    const auto before = queue_.lookup(key);
    const schedule_result r = queue_.schedule(key, now, fire_at, "uid");
    if (before) {
      EXPECT_EQ(r, before->state == entry_state::running ? schedule_result::already_running
                                                         : schedule_result::already_pending);
      return;
    }
    ASSERT_EQ(r, schedule_result::scheduled);
    const auto info = queue_.lookup(key);
    ASSERT_TRUE(info);
    generation_state g;
    g.key = key;
    g.first_due = std::max(fire_at, now);
    gens_.emplace(info->generation, g);
  }

  void cancel() {
    const std::string key = pick_key();
    const auto before = queue_.lookup(key);
    const bool r = queue_.cancel(key);
    EXPECT_EQ(r, before && before->state == entry_state::pending);
    EXPECT_FALSE(queue_.lookup(key).has_value());
    if (!before) {
      return;
    }
    auto& g = gens_.at(before->generation);
    (r ? g.cancelled_pending : g.cancelled_late) = true;
    if (live_.count(key) != 0 && live_[key] == before->generation) {
      live_.erase(key);
    }
  }

  void finish_one(int which) {
    if (held_.empty()) {
      return;
    }
    std::uniform_int_distribution<std::size_t> idx(0, held_.size() - 1);
    const std::size_t i = idx(rng_);
    if (which == 7) {
      finish(i, outcome::success());
    } else if (which == 8) {
      finish(i, outcome::failure("injected"));
    } else {
      finish(i, std::nullopt);  // Dropped: counts as a failure.
    }
  }

  void finish(std::size_t i, std::optional<outcome> result) {
    held_run run = std::move(held_[i]);
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    auto& g = gens_.at(run.generation);
    const bool cancelled = run.done.cancelled();
    EXPECT_EQ(cancelled, g.cancelled_late);
    const bool ok = result && result->ok;
    if (result) {
      run.done.complete(std::move(*result));
    } else {
      run.done = completion{};
    }
    if (cancelled) {
      return;
    }
    live_.erase(g.key);
    if (ok) {
      g.succeeded = true;
      EXPECT_FALSE(queue_.lookup(g.key).has_value() &&
                   queue_.lookup(g.key)->generation == run.generation);
    } else {
      g.failed_at = drv_.now();
      const auto info = queue_.lookup(g.key);
      ASSERT_TRUE(info);
      EXPECT_EQ(info->generation, run.generation);
      EXPECT_EQ(info->state, entry_state::backoff);
      EXPECT_EQ(info->next_attempt_at, drv_.now() + backoff(g.runs));
    }
  }

  void on_run(const run_info& info, completion done) {
    auto& g = gens_.at(info.generation);
    EXPECT_EQ(info.key, g.key);
    EXPECT_FALSE(g.cancelled_pending) << "a cancelled entry ran";
    EXPECT_FALSE(g.cancelled_late) << "a run was retried after its entry was cancelled";
    EXPECT_FALSE(g.succeeded);
    ++g.runs;
    EXPECT_EQ(info.attempt, g.runs);
    if (g.runs == 1) {
      EXPECT_EQ(drv_.now(), g.first_due) << "first run not at its fire time";
    } else {
      ASSERT_TRUE(g.failed_at);
      EXPECT_EQ(drv_.now(), *g.failed_at + backoff(g.runs - 1)) << "retry not at its backoff";
    }
    EXPECT_EQ(live_.count(g.key), 0U) << "two live runs for " << g.key;
    live_[g.key] = info.generation;
    held_.push_back({info.generation, std::move(done)});
  }

  void check_counts() {
    const queue_stats s = queue_.stats();
    EXPECT_EQ(s.pending + s.running + s.backing_off, queue_.size());
  }

  std::mt19937 rng_;
  manual_driver drv_;
  std::map<std::uint64_t, generation_state> gens_;
  std::map<std::string, std::uint64_t> live_;
  std::vector<held_run> held_;
  timed_queue queue_;
};

TEST(timed_queue_model, random_operation_sequences_keep_the_contract) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    model m(seed);
    for (int i = 0; i < 500; ++i) {
      m.step();
      if (::testing::Test::HasFailure()) {
        return;
      }
    }
    m.drain();
  }
  EXPECT_GT(totals.retries, 100U);
  EXPECT_GT(totals.cancelled, 100U);
  EXPECT_GT(totals.cancelled_late, 100U);
  EXPECT_GT(totals.succeeded, 100U);
  std::printf("coverage: %llu retries, %llu pending cancels, %llu late cancels, %llu successes\n",
              static_cast<unsigned long long>(totals.retries),
              static_cast<unsigned long long>(totals.cancelled),
              static_cast<unsigned long long>(totals.cancelled_late),
              static_cast<unsigned long long>(totals.succeeded));
}

}  // namespace
}  // namespace tec::timedqueue
