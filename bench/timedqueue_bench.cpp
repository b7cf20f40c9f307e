// timed_queue benchmarks: schedule+cancel throughput at several queue sizes, firing throughput,
// and heap bytes per pending entry (measured with a counting global operator new).

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "support/manual_driver.hpp"
#include "tec/timedqueue/timed_queue.hpp"

// --- counting allocator
// --------------------------------------------------------------------------- Counts what the heap
// really holds: malloc_usable_size of each block plus glibc's 8-byte chunk header, so rounding and
// per-allocation overhead are part of the figure.

namespace {

std::atomic<std::int64_t> g_live_bytes{0};

void* counted_alloc(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  g_live_bytes.fetch_add(static_cast<std::int64_t>(malloc_usable_size(p) + sizeof(void*)),
                         std::memory_order_relaxed);
  return p;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) {
    return;
  }
  g_live_bytes.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p) + sizeof(void*)),
                         std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

void* operator new(std::size_t n) {
  return counted_alloc(n);
}
void* operator new[](std::size_t n) {
  return counted_alloc(n);
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  counted_free(p);
}

namespace {

using namespace std::chrono_literals;
using tec::timedqueue::completion;
using tec::timedqueue::duration;
using tec::timedqueue::outcome;
using tec::timedqueue::run_info;
using tec::timedqueue::time_point;
using tec::timedqueue::timed_queue;

/// A driver that costs nothing: a fixed clock, a timer that is never fired, no executor.
class null_driver final : public tec::timedqueue::driver {
public:
  [[nodiscard]] time_point now() const override { return now_; }
  void arm(time_point, std::function<void()>) override {}
  void disarm() override {}
  void post(std::function<void()>) override {}

private:
  time_point now_ = time_point{} + 1h;
};

/// Keys as the controller makes them ("namespace-12/pod-name-12345", 27 chars).
std::string make_key(std::size_t i) {
  return "namespace-" + std::to_string(i % 100) + "/pod-name-" + std::to_string(i);
}

/// A 36-character pod UID.
std::string make_uid(std::size_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%08zx-7d3c-4e1a-9b2f-%012zx", i % 0xffffffffU,
                (i * 2654435761U) % 0xffffffffffffU);
  return buf;
}

void no_op_work(const run_info&, completion done) {
  done.complete(outcome::success());
}

/// Fills `queue` with `n` pending entries due 1-2 h from `now`, at random times.
void fill(timed_queue& queue, time_point now, std::size_t n) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::int64_t> ms(3'600'000, 7'200'000);
  for (std::size_t i = 0; i < n; ++i) {
    queue.schedule(make_key(i), now, now + std::chrono::milliseconds(ms(rng)), make_uid(i));
  }
}

void bm_schedule_cancel(benchmark::State& state) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  null_driver drv;
  timed_queue queue(drv, no_op_work);
  const time_point now = drv.now();
  fill(queue, now, pending);

  constexpr std::size_t pool = 4096;
  std::vector<std::string> keys;
  std::vector<time_point> deadlines;
  std::mt19937_64 rng(2);
  std::uniform_int_distribution<std::int64_t> ms(3'600'000, 7'200'000);
  for (std::size_t i = 0; i < pool; ++i) {
    keys.push_back(make_key(pending + i));
    deadlines.push_back(now + std::chrono::milliseconds(ms(rng)));
  }
  const std::string uid = make_uid(0);

  std::size_t i = 0;
  for (auto _ : state) {
    const std::size_t k = i++ % pool;
    benchmark::DoNotOptimize(queue.schedule(keys[k], now, deadlines[k], uid));
    benchmark::DoNotOptimize(queue.cancel(keys[k]));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["pairs_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  queue.shutdown();
}
BENCHMARK(bm_schedule_cancel)
    ->Arg(1'000)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kNanosecond);

/// Many entries come due at once; the work completes inline. Measures timer pop + post + start
/// + completion per entry.
void bm_fire(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < n; ++i) {
    keys.push_back(make_key(i));
  }
  const std::string uid = make_uid(0);
  for (auto _ : state) {
    state.PauseTiming();
    tec::timedqueue::manual_driver drv;
    {
      timed_queue queue(drv, no_op_work);
      const time_point now = drv.now();
      for (std::size_t i = 0; i < n; ++i) {
        queue.schedule(keys[i], now, now + 1s + std::chrono::microseconds(i % 1000), uid);
      }
      state.ResumeTiming();
      drv.advance(2s);
      state.PauseTiming();
      if (queue.size() != 0) {
        state.SkipWithError("not everything fired");
      }
      queue.shutdown();
    }
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(bm_fire)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

/// snapshot(10'000) of a queue of n pending entries (what /debug/evictions takes, under the
/// queue's mutex): the sort of n pointers and the copies of the first 10,000 entries.
void bm_snapshot(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  null_driver drv;
  timed_queue queue(drv, no_op_work);
  const time_point now = drv.now();
  const std::string uid = make_uid(0);
  std::mt19937_64 rng(1);
  for (std::size_t i = 0; i < n; ++i) {
    queue.schedule(make_key(i), now, now + 1h + std::chrono::milliseconds(rng() % 3'600'000), uid,
                   {"node-" + std::to_string(i % 1000), "ns"});
  }
  for (auto _ : state) {
    auto snap = queue.snapshot(10'000);
    benchmark::DoNotOptimize(snap);
  }
  queue.shutdown();
}
BENCHMARK(bm_snapshot)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

/// Heap bytes per pending entry, everything included: the entry with its key and payload, its
/// slot in the index (with the table's spare capacity at that size) and its node in the ordered
/// set of deadlines.
void bm_bytes_per_entry(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::string> keys;
  std::vector<std::string> uids;
  for (std::size_t i = 0; i < n; ++i) {
    keys.push_back(make_key(i));
    uids.push_back(make_uid(i));
  }
  double per_entry = 0;
  for (auto _ : state) {
    null_driver drv;
    const std::int64_t before = g_live_bytes.load();
    {
      timed_queue queue(drv, no_op_work);
      const time_point now = drv.now();
      for (std::size_t i = 0; i < n; ++i) {
        queue.schedule(keys[i], now, now + 1h + std::chrono::milliseconds(i), uids[i]);
      }
      per_entry = static_cast<double>(g_live_bytes.load() - before) / static_cast<double>(n);
      queue.shutdown();
    }
  }
  state.counters["bytes_per_entry"] = per_entry;
  state.counters["key_bytes"] = static_cast<double>(keys[n / 2].size());
  state.counters["payload_bytes"] = static_cast<double>(uids[n / 2].size());
}
BENCHMARK(bm_bytes_per_entry)
    ->Arg(1'000)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
