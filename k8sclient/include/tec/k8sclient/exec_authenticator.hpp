#pragma once

// The credentials of an exec plugin (exec_plugin.hpp), cached and renewed: client-go's exec
// Authenticator, in our words. One per kubeconfig user: the loader puts it in
// rest_config::exec, and every copy of that config (the daemon's clients, the plugin's API and
// controller-port readers) shares it, so the plugin runs once for all of them.
//
// When the plugin runs. Running it can block for seconds (a cloud CLI) and the HTTP client's
// executor is the daemon's I/O thread, so the client never runs it there: the client asks
// current(), which never blocks and, when a run is due, starts one on a worker thread owned by
// this object (at most one at a time); a request with no usable credential waits for that run
// without blocking its thread (when_refreshed). get() runs it on the caller's thread instead:
// the daemon calls it once at start (a broken plugin is exit 1 before anything else starts),
// the kubectl plugin before its first request. This follows how the client re-reads a token
// file (token_source), but moves the part that can block off the I/O thread.
//
// A run is due when there is no credential; when the one cached is within its last fifth of
// life (at most 5 minutes before status.expirationTimestamp: renewed ahead, while requests keep
// using it); when it has expired (not used any more); and at once after the API server answered
// 401 to it (rejected(): once per credential, so a burst of 401s runs the plugin once). After a
// failed run the next one waits (1 s doubling to 30 s, jittered): requests fail meanwhile with
// that run's error unless a credential still valid is cached (kept, as client-go keeps a token
// file's). The first failure of a streak on the worker thread is logged as a warning (logger
// "client"; get()'s caller reports its own), the recovery as info; what a successful run wrote
// on standard error is logged as a warning.
//
// Thread-safety: every member may be called from any thread. The destructor kills a run in
// flight and joins its thread.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "tec/base/backoff.hpp"
#include "tec/base/clock.hpp"
#include "tec/base/error.hpp"
#include "tec/base/result.hpp"
#include "tec/k8sclient/exec_plugin.hpp"

namespace tec::k8sclient {

class exec_authenticator {
public:
  /// A credential and its generation (1 for the first run's, +1 for each run's after it).
  struct snapshot {
    std::shared_ptr<const exec_credential> credential;
    std::uint64_t generation = 0;
  };

  /// `clock` gives the wall time expiry is judged on and the steady time of the retry wait.
  explicit exec_authenticator(exec_config config, exec_limits limits = {},
                              std::shared_ptr<base::clock> clock = base::real_clock());
  ~exec_authenticator();
  exec_authenticator(const exec_authenticator&) = delete;
  exec_authenticator& operator=(const exec_authenticator&) = delete;

  /// A credential valid now, running the plugin on this thread when none is (or waiting for
  /// the run in flight). Blocks up to the plugin's timeout. An error when the run fails; during
  /// the wait after a failure, that failure again without a new run.
  base::result<snapshot> get();

  /// Never blocks. A credential valid now (a renewal may have been started on the worker
  /// thread); nullopt when there is none but a run is in flight (when_refreshed() says when
  /// it ends); the last run's error when there is none and no run may start yet.
  base::result<std::optional<snapshot>> current();

  /// The API server answered 401 to the credential of `generation`: it is not used again, and
  /// a run starts (once: later calls for the same generation do nothing).
  void rejected(std::uint64_t generation);

  /// Calls `done` once the run in flight ends (on the worker thread), or at once (on this
  /// thread) when none is. `done` must not call back into this object while it holds locks of
  /// its own; it should only post.
  void when_refreshed(std::function<void()> done);

  /// The newest credential, valid or not (a client certificate's TLS context is built from
  /// it); null before the first successful run.
  [[nodiscard]] std::shared_ptr<const exec_credential> newest() const;

  [[nodiscard]] const exec_config& config() const noexcept { return config_; }

private:
  enum class freshness : std::uint8_t { none, renew, fresh };
  [[nodiscard]] freshness judge(base::wall_clock::time_point now) const;  // mutex_ held
  [[nodiscard]] bool may_run(base::clock::time_point now) const;          // mutex_ held
  void start_worker();                                                    // mutex_ held
  /// One run and its bookkeeping; called with the lock not held and running_ set. A failure
  /// of a `background` run (the worker's) starts a logged streak.
  void run_once(bool background);

  const exec_config config_;
  const exec_limits limits_;
  const std::shared_ptr<base::clock> clock_;
  std::atomic<bool> stopping_{false};

  mutable std::mutex mutex_;
  std::condition_variable ran_;
  std::shared_ptr<const exec_credential> credential_;
  std::uint64_t generation_ = 0;
  base::wall_clock::time_point fetched_{};  ///< When credential_ arrived (wall time).
  bool rejected_ = false;                   ///< credential_ was answered 401.
  bool running_ = false;
  base::error last_error_;      ///< Of the last run; empty after a success.
  bool streak_logged_ = false;  ///< A failure of this streak was logged.
  base::clock::time_point next_try_{};
  base::backoff retry_;
  std::vector<std::function<void()>> waiters_;
  std::thread worker_;
};

}  // namespace tec::k8sclient
