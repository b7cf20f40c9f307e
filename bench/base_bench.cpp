// The JSON log formatter (--log-format=json): one line formatted, for the messages the daemon
// writes most (a plain one, the evictions' pod=/uid= lines, shadow's long line, a history
// record whose message is JSON). `make bench-micro` runs it.

#include <benchmark/benchmark.h>
#include <spdlog/details/log_msg.h>

#include <memory>
#include <string_view>

#include "tec/base/json_log.hpp"

namespace {

void format_line(benchmark::State& state, std::string_view logger, std::string_view payload) {
  const auto formatter = tec::base::make_json_log_formatter();
  const spdlog::details::log_msg msg(spdlog::string_view_t(logger.data(), logger.size()),
                                     spdlog::level::info,
                                     spdlog::string_view_t(payload.data(), payload.size()));
  spdlog::memory_buf_t buf;
  for (auto _ : state) {
    buf.clear();
    formatter->format(msg, buf);
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(payload.size()));
}

void BM_json_log_plain(benchmark::State& state) {
  format_line(state, "daemon", "acting: caches synced, deciding evictions");
}
BENCHMARK(BM_json_log_plain);

void BM_json_log_pod_uid(benchmark::State& state) {
  format_line(state, "evict",
              "evicted pod=\"shop/web-0\" uid=8a1f3c2e-5b7d-4e09-9c1a-2f6b8d4e7a90 "
              "(Eviction API policy/v1)");
}
BENCHMARK(BM_json_log_pod_uid);

void BM_json_log_shadow(benchmark::State& state) {
  format_line(state, "controller",
              "shadow: disagree pod=shop/web-0 uid=8a1f3c2e-5b7d-4e09-9c1a-2f6b8d4e7a90 "
              "node=worker-17 ours=\"deleted at 2026-11-28T03:12:12Z\" theirs=\"not evicted "
              "within 30s\"");
}
BENCHMARK(BM_json_log_shadow);

void BM_json_log_history_record(benchmark::State& state) {
  format_line(state, "history",
              R"({"pod":"shop/web-0","uid":"8a1f3c2e-5b7d-4e09-9c1a-2f6b8d4e7a90",)"
              R"("node":"worker-17","taints":[{"key":"node.kubernetes.io/unreachable",)"
              R"("effect":"NoExecute"}],"scheduledAt":"2026-11-28T03:12:02.410Z",)"
              R"("outcome":"deleted","endedAt":"2026-11-28T03:12:12.410Z"})");
}
BENCHMARK(BM_json_log_history_record);

}  // namespace

BENCHMARK_MAIN();
