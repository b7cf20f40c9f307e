#pragma once

// The daemon's HTTP(S) routes: the probes, /metrics, the admission webhook and the /debug
// documents, on the servers of serving/ (the serving thread, never the control loop's).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "options.hpp"
#include "tec/admission/webhook.hpp"
#include "tec/controller/controller.hpp"
#include "tec/informers/controller_feed.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/leader_election.hpp"
#include "tec/metrics/metrics.hpp"
#include "tec/reports/eviction_history.hpp"
#include "tec/serving/http_endpoints.hpp"
#include "tec/serving/tls_credentials.hpp"
#include "tec/shadow/shadow_tracker.hpp"
#include "tec/timedqueue/asio_driver.hpp"

namespace spdlog {
class logger;
}

namespace tec::cmd {

// The probe, metrics and /debug endpoints. What they serve is read from the objects it borrows
// (`sources`, which all outlive it); checks and handlers run on the servers' strand (the
// serving thread, never the control loop's), the /debug documents on a reports thread of
// their own. /metrics and /debug/*
// are served over HTTPS to the requests the API server authenticates and authorizes
// (--metrics-secure, the default), the probes over plain HTTP on their own port.
class daemon_endpoints {
public:
  struct sources {
    metrics::registry& registry;
    // The TokenReviews and SubjectAccessReviews of the secure port; nullptr with
    // --metrics-secure=false.
    k8sclient::client* reviews;
    k8sclient::leader_elector* elector;  // nullptr without leader election
    // /readyz: whether the caches have synced (cluster_watches::readiness()).
    std::function<serving::check_result()> readiness;
    shadow::shadow_tracker* shadow;  // nullptr without --shadow
    controller::controller& ctrl;
    informers::controller_feed& feed;
    timedqueue::asio_driver& driver;
    const admission::cluster_reader& webhook;  // what /validate/nodes reads
    const reports::eviction_history* history;  // nullptr with --history-size=0
  };

  explicit daemon_endpoints(const sources& src) : src_(src) {}

  // Main thread: registers the paths and starts both servers (one for all paths when both
  // flags name one address); the error message (naming the flag), or empty when both servers
  // (or neither) started.
  std::string start(const boost::asio::any_io_executor& executor, const options& opts,
                    spdlog::logger& log);

  // Any thread; idempotent. The servers' accept and connection coroutines are owned by
  // serving::http_endpoints itself: stop() ends them.
  void stop();

  // Main thread, after stop(): a report being built finishes (its connection is closed
  // already).
  void join_reports() { reports_.join(); }

  // The secure port's certificate (nullptr without one: --metrics-secure=false, or no metrics
  // server), after start().
  [[nodiscard]] std::shared_ptr<serving::tls_credentials> serving_credentials() const;

private:
  // Main thread: HTTPS with the certificate of --tls-cert-file and --tls-private-key-file, or
  // a self-signed one, and delegated authentication and authorization through the API
  // server (the reviews run on the client's executor, `executor`). The error message, or empty.
  std::string secure(serving::http_endpoints_options& o,
                     const boost::asio::any_io_executor& executor, const options& opts,
                     spdlog::logger& log);

  // The reports thread: /debug/evictions. A copy of at most max_listed_evictions entries (the
  // queue's mutex is held while n pointers are sorted), then the JSON from the copy.
  boost::asio::awaitable<serving::http_response> evictions_report();

  // The reports thread: /debug/history (at most --history-size records), filtered by the
  // query's pod= and node=; a bad query is a 400 naming what is wrong.
  boost::asio::awaitable<serving::http_response> history_report(std::string query);

  // The reports thread: /debug/shadow (at most max_disagreements entries).
  boost::asio::awaitable<serving::http_response> shadow_report();

  sources src_;
  std::shared_ptr<serving::tls_credentials> tls_;  // the secure port's, when there is one
  std::optional<serving::http_endpoints> health_;
  std::optional<serving::http_endpoints> metrics_;  // empty when health_ serves /metrics too
  // Builds the /debug documents off the I/O thread. After the servers, so it is joined before
  // they go; the objects it reads outlive this.
  boost::asio::thread_pool reports_{1};
};

}  // namespace tec::cmd
