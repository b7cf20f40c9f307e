#include "policy_control.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

#include "tec/base/clock.hpp"
#include "tec/base/error.hpp"
#include "tec/k8sclient/hostname.hpp"
#include "tec/policy/policy_file.hpp"
#include "tec/serving/sha256.hpp"

namespace tec::cmd {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

namespace {

// While the storm breaker is open, the count of held evictions is logged this often.
constexpr auto breaker_log_interval = std::chrono::seconds(60);

}  // namespace

policy_control::policy_control(const options& opts, std::shared_ptr<spdlog::logger> log,
                               const std::atomic<bool>& stopping, k8sclient::client& api,
                               writers::event_recorder& recorder,
                               const metrics::standard_metrics& metrics)
    : opts_(opts),
      log_(std::move(log)),
      stopping_(stopping),
      recorder_(recorder),
      metrics_(metrics),
      sha_(opts.policy_sha256) {
  if (!opts_.policy_configmap_name.empty()) {
    configmap_events_.emplace(
        api, recorder_,
        writers::involved_object{
            .api_version = "v1",
            .kind = "ConfigMap",
            .ref = {opts_.policy_configmap_namespace, opts_.policy_configmap_name, {}}},
        "configmaps", log_);
  }
  if (!opts_.policy_file.empty()) {
    metrics_.policy_last_reload_success_timestamp.set(unix_seconds());
    metrics_.policy_info.keep_only({sha_});
    metrics_.policy_info.with({sha_}).set(1);
  }
}

asio::awaitable<bool> policy_control::poll() {
  if (stopping_.load()) {
    co_return false;
  }
  if (!announced_) {
    // The start's policy, on the ConfigMap as the reloads are (the recorder runs now).
    announced_ = true;
    // Named: GCC 12 mis-destroys temporaries inside co_await expressions.
    std::string message =
        fmt::format("Policy sha256:{} in force since the start of {}: {}", sha_.substr(0, 12),
                    k8sclient::local_hostname(), policy::describe(ctrl_->policy()));
    co_await record_policy_event("Normal", "PolicyApplied", std::move(message));
  }
  auto r = co_await asio::co_spawn(
      reader_, [this]() -> asio::awaitable<policy::reload_result> { co_return reloader_->poll(); },
      asio::use_awaitable);
  if (stopping_.load()) {
    co_return false;
  }
  co_await apply(r);
  log_open_breaker();
  co_return true;
}

void policy_control::breaker_event(bool open, std::size_t tainted, std::size_t known,
                                   std::optional<std::size_t> held) {
  if (open && !held) {
    // It just opened (the controller's call): the minute's warning counts from now, so the
    // first repeat comes a minute after this Event, not at the next policy poll.
    breaker_opened_at_.store(steady::now().time_since_epoch().count());
  }
  if (ctrl_ == nullptr || ctrl_->dry_run()) {
    return;  // dry-run writes nothing (a lock-free read: this is the controller's callback)
  }
  std::string message = fmt::format("Storm breaker {}: {} of {} nodes carry NoExecute taints; ",
                                    open ? "open" : "closed", tainted, known);
  if (!open) {
    message += "held evictions resume";
  } else if (held) {
    message += fmt::format("{} due evictions are held", *held);
  } else {
    message += "due evictions are held until the share falls or the policy changes";
  }
  recorder_.record(
      writers::involved_object{.api_version = "coordination.k8s.io/v1",
                               .kind = "Lease",
                               .ref = {opts_.lease_namespace, opts_.lease_name, {}}},
      writers::event_content{open ? "Warning" : "Normal",
                             open ? "StormBreakerOpen" : "StormBreakerClosed", std::move(message)});
}

asio::awaitable<void> policy_control::apply(const policy::reload_result& r) {
  const std::string was = sha_;
  if (!r.text.empty() && r.what != policy::reload_result::kind::rejected) {
    sha_ = serving::sha256_hex(r.text);
    metrics_.policy_last_reload_successful.set(1);
    metrics_.policy_last_reload_success_timestamp.set(unix_seconds());
    metrics_.policy_info.keep_only({sha_});
    metrics_.policy_info.with({sha_}).set(1);
  }
  switch (r.what) {
    case policy::reload_result::kind::unchanged:
      co_return;  // a new text with the same policy (comments) only moves the gauges
    case policy::reload_result::kind::applied: {
      const controller::eviction_policy p = opts_.effective_policy(*r.policy);
      ctrl_->set_policy(p);  // dry-run too: the sink reads the controller's (one switch)
      log_->info("eviction policy reloaded from {}: {}", base::printable(opts_.policy_file, 256),
                 policy::describe(p));
      std::string message = fmt::format("Policy sha256:{} applied (was sha256:{}): {}",
                                        sha_.substr(0, 12), was.substr(0, 12), policy::describe(p));
      co_await record_policy_event("Normal", "PolicyApplied", std::move(message));
      co_return;
    }
    case policy::reload_result::kind::rejected: {
      metrics_.policy_reload_failures.inc();
      metrics_.policy_last_reload_successful.set(0);
      log_->warn("eviction policy change rejected, the policy in force stays ({}): {}",
                 policy::describe(ctrl_->policy()), r.summary());
      std::string message = fmt::format("Policy change rejected; sha256:{} stays in force: {}",
                                        sha_.substr(0, 12), r.summary());
      co_await record_policy_event("Warning", "PolicyRejected", std::move(message));
      co_return;
    }
  }
}

asio::awaitable<void> policy_control::record_policy_event(const char* type, const char* reason,
                                                          std::string message) {
  if (!configmap_events_ || ctrl_->dry_run()) {
    co_return;
  }
  // Named: GCC 12 mis-destroys temporaries inside co_await expressions.
  writers::event_content content{type, reason, std::move(message)};
  co_await configmap_events_->record(std::move(content));
}

double policy_control::unix_seconds() {
  return std::chrono::duration<double>(base::real_clock()->wall().time_since_epoch()).count();
}

void policy_control::log_open_breaker() {
  const auto now = steady::now();
  const steady::time_point opened{steady::duration(breaker_opened_at_.load())};
  if (now - std::max(breaker_logged_at_, opened) < breaker_log_interval) {
    return;
  }
  const auto s = ctrl_->stats();
  if (!s.breaker_open) {
    return;
  }
  breaker_logged_at_ = now;
  log_->warn(
      "storm breaker open: {} of {} nodes carry NoExecute taints; {} due evictions are held "
      "(they start when the share falls below the threshold minus the hysteresis, or when "
      "the policy file changes)",
      s.breaker_tainted_nodes, s.nodes, s.queue.held);
  breaker_event(true, s.breaker_tainted_nodes, s.nodes, s.queue.held);
}

}  // namespace tec::cmd
