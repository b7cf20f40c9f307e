#pragma once

// Shared plumbing of the benchmark programs that talk to a real API server
// (k8sclient_sync_bench, eviction_compare): a synchronous facade over the coroutine client on
// one io_context, concurrent request batches, child processes and their /proc counters, and
// percentiles. Single-threaded: everything runs on the caller's io_context, on the caller's
// thread. Every wait is bounded by a deadline.

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/k8sclient/client.hpp"

namespace tec::bench {

using steady = std::chrono::steady_clock;

double seconds_since(steady::time_point start);

/// Runs `io` until `done()` or `deadline`; false on the latter.
bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
               steady::time_point deadline);

/// Runs `io` for `how_long` (timers, watches and requests keep going meanwhile).
void run_for(boost::asio::io_context& io, std::chrono::milliseconds how_long);

/// Shuts `api` down and lets its cancelled operations finish (bounded) before it is destroyed.
void shut_down(boost::asio::io_context& io, k8sclient::client& api);

/// Sends one request on `io`, bounded by `limit`. A timeout is reported as an error.
base::result<k8sclient::response> call(boost::asio::io_context& io, k8sclient::client& api,
                                       k8sclient::request request,
                                       std::chrono::milliseconds limit = std::chrono::seconds{30});

/// "HTTP 500: <body start>" or the transport error's message.
std::string describe(const base::result<k8sclient::response>& res);

/// True for a 2xx answer.
bool ok(const base::result<k8sclient::response>& res);

/// Objects in a collection (`path`, e.g. "/api/v1/namespaces/ns/pods"), by a consistent
/// read of one item plus metadata.remainingItemCount.
base::result<long> count_objects(boost::asio::io_context& io, k8sclient::client& api,
                                 const std::string& path);

/// Outcome of a batch: 2xx are `ok`; the `tolerated` statuses (409 for a create that exists,
/// 404 for a delete of what is gone) are `tolerated`; anything else is `failed`.
struct tally {
  long ok = 0;
  long tolerated = 0;
  long failed = 0;
  std::string first_failure;
  bool timed_out = false;
};

struct batch_options {
  long concurrency = 32;  ///< Items in flight.
  std::vector<unsigned> tolerated{409, 404};
  steady::time_point deadline;    ///< The whole batch.
  const char* what = "requests";  ///< For the progress lines (batches of >= 5000).
  /// Called when item i's requests have all been answered (on `io`, the caller's thread).
  std::function<void(long)> on_item_done;
};

/// For every item in [0, count) sends `make(i)`'s requests one after the other (an item
/// stops at its first failed request), `concurrency` items in flight. On the deadline the
/// client is shut down (cancelling what is in flight) and the tally says timed_out.
tally run_batch(boost::asio::io_context& io, k8sclient::client& api, long count,
                const std::function<std::vector<k8sclient::request>(long)>& make,
                const batch_options& options);

/// Counters of another process, from /proc/<pid>/{stat,status}.
struct process_sample {
  double cpu_seconds = 0;  ///< utime + stime, all threads (10 ms ticks).
  /// Time on a CPU of the threads alive now, in nanoseconds' resolution (the first field of
  /// /proc/PID/task/*/schedstat); -1 when not readable. For differences over a window in
  /// which no thread ends: a figure per pod update needs a finer clock than the ticks.
  double run_seconds = -1;
  std::uint64_t rss_bytes = 0;       ///< VmRSS.
  std::uint64_t rss_peak_bytes = 0;  ///< VmHWM.
};
std::optional<process_sample> sample_process(pid_t pid);

/// SIGINT and SIGTERM kill the child_process started last (if it runs) and exit 128+signal.
void stop_children_on_signals();

/// A child process with stdout and stderr appended to a log file. The destructor kills it
/// (SIGKILL) and reaps it if it still runs.
class child_process {
public:
  child_process() = default;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process();

  /// Starts argv[0] (a path) with `argv`; false with `error` set when it cannot start.
  bool start(const std::vector<std::string>& argv, const std::string& log_path, std::string& error);
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  /// True while the process has not exited (reaps it when it has).
  bool running();
  /// The exit status text once it has exited ("exit 1", "signal 9").
  [[nodiscard]] const std::string& exit_text() const noexcept { return exit_text_; }
  /// SIGTERM, then SIGKILL after `grace`; waits for the exit.
  void stop(std::chrono::milliseconds grace);

private:
  pid_t pid_ = -1;
  std::string exit_text_;
};

/// The p-th percentile (0..100) by linear interpolation between closest ranks; 0 when empty.
double percentile(std::vector<double> values, double p);

}  // namespace tec::bench
