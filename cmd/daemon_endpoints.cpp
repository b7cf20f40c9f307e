#include "daemon_endpoints.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cassert>
#include <chrono>
#include <string_view>
#include <utility>
#include <vector>

#include "tec/admission/review.hpp"
#include "tec/base/clock.hpp"
#include "tec/reports/evictions_report.hpp"
#include "tec/serving/delegated_auth.hpp"

namespace tec::cmd {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// /healthz tolerance past the lease duration (kube-controller-manager uses 20 s).
constexpr auto healthz_tolerance = 20s;
// The validating admission webhook's path (deploy/webhook.yaml).
constexpr std::string_view webhook_path = "/validate/nodes";
// A review's time: the API server waits 3 s (deploy/webhook.yaml's timeoutSeconds) and then
// ignores the webhook (failurePolicy Ignore); past this the answer is "allowed", no warning.
constexpr auto review_budget = 2s;

// The names the self-signed certificate of the secure port is for.
std::vector<std::string> serving_hosts() {
  std::vector<std::string> hosts;
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) == 0 && name[0] != '\0') {
    hosts.emplace_back(name.data());
  }
  for (const char* h : {"localhost", "127.0.0.1", "::1"}) {
    hosts.emplace_back(h);
  }
  return hosts;
}

}  // namespace

std::string daemon_endpoints::start(const asio::any_io_executor& executor, const options& opts,
                                    spdlog::logger& log) {
  // The same address twice means one server for all three paths (port 0 means two ports).
  const bool shared = opts.health_probe_bind_address == opts.metrics_bind_address &&
                      !opts.metrics_bind_address.ends_with(":0");
  health_.emplace(executor,
                  serving::http_endpoints_options{.bind_address = opts.health_probe_bind_address});
  health_->handle_check("/healthz", [this]() -> serving::check_result {
    if (src_.elector != nullptr && !src_.elector->healthy(healthz_tolerance)) {
      return {false,
              "the leader lease has not been renewed for longer than the lease "
              "duration + 20s"};
    }
    return {};
  });
  health_->handle_check("/readyz", [this] { return src_.readiness(); });
  const auto metrics_handler = [this] {
    return serving::http_response{200, std::string(metrics::metrics_content_type),
                                  src_.registry.render()};
  };
  if (!shared) {
    serving::http_endpoints_options metrics_opts{.bind_address = opts.metrics_bind_address};
    if (opts.metrics_secure && opts.metrics_bind_address != "0") {
      auto e = secure(metrics_opts, executor, opts, log);
      if (!e.empty()) {
        return e;
      }
    } else if (opts.metrics_bind_address != "0") {
      log.warn(
          "--metrics-secure=false: /metrics and /debug/* are served over plain HTTP, without "
          "authentication, to anyone who can reach {}",
          opts.metrics_bind_address);
    }
    metrics_.emplace(executor, std::move(metrics_opts));
  }
  serving::http_endpoints& metrics_port = shared ? *health_ : *metrics_;
  metrics_port.handle("/metrics", metrics_handler);
  // The admission webhook (README "Warnings at kubectl taint"): the API server calls it
  // without credentials, so it is not behind the delegated authentication; it reads only the
  // caches and answers on the serving strand (a review of a node with 110 pods in a cluster
  // of 1,000 nodes costs about 0.3 ms of CPU: bench/admission_bench.cpp), bounded by
  // admission::max_review_taints and review_budget whatever the request holds. Any replica
  // answers.
  metrics_port.handle_post(
      std::string(webhook_path),
      serving::post_route_options{
          .body_limit = admission::max_review_bytes, .timeout = 5s, .unauthenticated = true},
      [this, &reviews = src_.registry.add_counter(
                 "taint_eviction_controller_webhook_reviews_total",
                 "Admission reviews of Node requests answered, by result (allowed, warned, "
                 "refused, not_ready, too_many_taints, over_budget, malformed).",
                 {"result"})](std::string_view body) {
        const auto deadline = steady::now() + review_budget;
        auto answer =
            admission::serve(body, src_.webhook, [deadline] { return steady::now() >= deadline; });
        reviews.with({admission::to_string(answer.outcome)}).inc();
        return serving::http_response{answer.status, std::move(answer.content_type),
                                      std::move(answer.body)};
      });
  // The /debug documents are built on the reports thread, not the I/O thread: a full list
  // (10,000 entries, a few MB) takes tens of ms. As async handlers, the server shares each
  // between the requests that ask at once and caps how many are served at once (issue 29:
  // 64 readers that never read held a copy each). A standby answers too, with what its
  // queue holds: nothing.
  if (src_.shadow != nullptr) {
    metrics_port.handle_async("/debug/shadow", [this] {
      return asio::co_spawn(reports_, shadow_report(), asio::use_awaitable);
    });
  }
  metrics_port.handle_async("/debug/evictions", [this] {
    return asio::co_spawn(reports_, evictions_report(), asio::use_awaitable);
  });
  if (src_.history != nullptr) {
    metrics_port.handle_async_query("/debug/history", [this](std::string query) {
      return asio::co_spawn(reports_, history_report(std::move(query)), asio::use_awaitable);
    });
  }
  const auto start = [&log](serving::http_endpoints& server, const std::string& flag,
                            const std::string& what, bool tls) -> std::string {
    auto bound = server.start();
    if (!bound) {
      return flag + ": cannot serve " + what + ": " + bound.error().message;
    }
    if (bound.value()) {
      const auto& ep = *bound.value();
      const auto host =
          ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string();
      log.info("serving {} on {}://{}:{}", what, tls ? "https" : "http", host, ep.port());
    }
    return {};
  };
  if (auto e = start(*health_, "--health-probe-bind-address",
                     shared ? "/healthz, /readyz and /metrics" : "/healthz and /readyz", false);
      !e.empty()) {
    return e;
  }
  if (metrics_) {
    return start(*metrics_, "--metrics-bind-address", "/metrics", opts.metrics_secure);
  }
  return {};
}

void daemon_endpoints::stop() {
  if (health_) {
    health_->stop();
  }
  if (metrics_) {
    metrics_->stop();
  }
}

std::shared_ptr<serving::tls_credentials> daemon_endpoints::serving_credentials() const {
  return tls_;
}

std::string daemon_endpoints::secure(serving::http_endpoints_options& o,
                                     const asio::any_io_executor& executor, const options& opts,
                                     spdlog::logger& log) {
  auto creds = opts.tls_cert_file.empty() ? serving::tls_credentials::self_signed(serving_hosts())
                                          : serving::tls_credentials::from_files(
                                                opts.tls_cert_file, opts.tls_private_key_file);
  if (!creds) {
    return (opts.tls_cert_file.empty() ? std::string("cannot generate a serving certificate")
                                       : std::string("--tls-cert-file")) +
           ": " + creds.error().message;
  }
  if (opts.tls_cert_file.empty()) {
    log.info(
        "no --tls-cert-file: serving /metrics and /debug/* with a self-signed certificate "
        "generated at start");
  }
  o.tls = std::move(*creds);
  tls_ = o.tls;
  assert(src_.reviews != nullptr);
  o.authorizer = std::make_shared<serving::delegated_authorizer>(
      serving::make_api_review_backend(*src_.reviews, executor), src_.reviews->clock());
  return {};
}

asio::awaitable<serving::http_response> daemon_endpoints::evictions_report() {
  const auto list = src_.ctrl.evictions(reports::max_listed_evictions);
  const auto wall_now = base::wall_clock::now();
  const base::clock_bridge clock(src_.driver.now(), wall_now);
  co_return serving::http_response{
      200, "application/json", reports::evictions_json(list, src_.feed.active(), clock, wall_now)};
}

asio::awaitable<serving::http_response> daemon_endpoints::history_report(std::string query) {
  const auto filter = reports::parse_history_query(query);
  if (!filter) {
    co_return serving::http_response{400, "text/plain; charset=utf-8",
                                     filter.error().message + "\n"};
  }
  co_return serving::http_response{
      200, "application/json",
      reports::to_json(src_.history->document(*filter, base::wall_clock::now()))};
}

asio::awaitable<serving::http_response> daemon_endpoints::shadow_report() {
  co_return serving::http_response{200, "application/json", src_.shadow->report_json()};
}

}  // namespace tec::cmd
