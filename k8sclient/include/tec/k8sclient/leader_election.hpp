#pragma once

// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection package
// does it (in our words):
//
// - acquire: GET the lease (404 -> POST it with us as holder). When another holder's record
//   has not expired we wait a retry period. Expiry is judged on OUR clock: the lease counts
//   from the moment we last saw its record change (observed time), plus the record's
//   leaseDurationSeconds; the remote renewTime is never compared with the local clock, so
//   clock skew between hosts does not matter. Otherwise we PUT the lease carrying the
//   resourceVersion we read: 409 means another candidate won the race.
// - renew: a renewal cycle a retry period after the last success; within it the same step
//   every retry period. If no attempt succeeded within the renew deadline from the cycle's
//   beginning (client-go's count: up to retry period + renew deadline after the last success),
//   leadership is lost: on_stopped_leading runs at once (even while a request still hangs) and
//   run() returns. The daemon must then stop acting and exit non-zero.
// - release (clean shutdown): PUT holderIdentity "" and leaseDurationSeconds 1, so another
//   candidate takes over at once instead of waiting out the lease.
// Times in the lease are MicroTime (RFC 3339 with microseconds).

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tec/k8sclient/client.hpp"

namespace tec::k8sclient {

struct leader_election_config {
  std::string lease_namespace;
  std::string lease_name;
  /// holderIdentity; empty means default_identity().
  std::string identity;
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
  /// Release the lease when run() is stopped while leading.
  bool release_on_cancel = true;
  /// Called on the elector's executor when leadership is gained / lost (once each per run).
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
};

/// "<hostname>_<16 random hex digits>", unique per process start.
std::string default_identity();

/// The spec fields of a Lease, as the election reads and writes them.
struct lease_record {
  std::string holder_identity;
  std::int64_t lease_duration_seconds = 0;
  std::string acquire_time;  ///< MicroTime text, as on the server.
  std::string renew_time;
  std::int64_t lease_transitions = 0;

  friend bool operator==(const lease_record&, const lease_record&) = default;
};

/// One candidate in a leader election.
///
/// Thread/ownership: run(), try_acquire_or_renew() and release() are coroutines for
/// `executor` (the client's executor; a strand or a one-thread io_context) and must not run
/// concurrently with each other. is_leader(), last_renew_time(), healthy() and stop() may be
/// called from any thread. `client` must outlive the elector's coroutines, and the executor's
/// execution context must outlive the elector (stop() posts to it).
class leader_elector {
public:
  /// `clock`: now() for expiry and deadlines, wall() for the lease times.
  leader_elector(boost::asio::any_io_executor executor, client& c, leader_election_config config,
                 std::shared_ptr<base::clock> clock = base::real_clock());
  ~leader_elector();
  leader_elector(const leader_elector&) = delete;
  leader_elector& operator=(const leader_elector&) = delete;

  /// Tries to acquire the lease every retry period (jittered) until it succeeds, then calls
  /// on_started_leading and renews until a renewal cycle fails for renew_deadline (-> leadership
  /// lost, on_stopped_leading, returns false) or stop() is called (-> release when leading
  /// and release_on_cancel, on_stopped_leading if we led, returns true).
  boost::asio::awaitable<bool> run();

  /// Makes run() return soon. Thread-safe; idempotent.
  void stop();

  /// One acquire-or-renew step (client-go's tryAcquireOrRenew). True when we hold the lease
  /// after it. Exposed for tests and for callers with their own loop.
  boost::asio::awaitable<bool> try_acquire_or_renew();

  /// Gives the lease up if we hold it. True when released or not ours.
  boost::asio::awaitable<bool> release();

  /// Whether the last record we saw or wrote names us as holder and leadership was not lost.
  [[nodiscard]] bool is_leader() const noexcept;

  /// When we last acquired or renewed the lease (steady clock); nullopt before the first time.
  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> last_renew_time() const;

  /// For /healthz (client-go's Check): false only when we think we lead but have not renewed
  /// for lease_duration + `tolerance`.
  [[nodiscard]] bool healthy(std::chrono::milliseconds tolerance) const;

  /// The last record observed (or written); for logs and tests. Executor only.
  [[nodiscard]] const lease_record& observed_record() const noexcept;

  [[nodiscard]] const std::string& identity() const noexcept;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace tec::k8sclient
