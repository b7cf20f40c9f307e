// The cached and renewed credentials of an exec plugin. See exec_authenticator.hpp.

#include "tec/k8sclient/exec_authenticator.hpp"

#include <spdlog/logger.h>

#include <algorithm>
#include <utility>

#include "tec/base/logger.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/k8sclient/rest_config.hpp"
#include "tec/k8sclient/tls.hpp"

namespace tec::k8sclient {
namespace {

constexpr std::chrono::minutes max_renew_margin{5};

// After a failed run: 1 s doubling to 30 s, stretched by up to half; a success resets it.
constexpr base::backoff_policy retry_policy{std::chrono::milliseconds{1'000},
                                            std::chrono::milliseconds{30'000},
                                            std::chrono::milliseconds{120'000}, 2.0, 0.5};

/// What is wrong with a credential that parsed, if anything: one already expired, or a
/// certificate and key the TLS client would refuse (checked now, not at each connection).
base::error unusable(const exec_config& config, const exec_credential& c,
                     base::wall_clock::time_point now) {
  const std::string who = config.source + ": the exec plugin \"" +
                          base::printable(config.command, 256) + "\" returned ";
  if (c.expiry && *c.expiry <= now) {
    return base::make_error(base::errc::config_invalid, who + "a credential that expired at " +
                                                            base::format_rfc3339(*c.expiry) +
                                                            " (now " + base::format_rfc3339(now) +
                                                            "; is this machine's clock right?)");
  }
  if (!c.client_cert_pem.empty()) {
    rest_config probe;
    probe.tls = true;
    probe.insecure_skip_tls_verify = true;  // only the client's side is checked here
    probe.client_cert_pem = c.client_cert_pem;
    probe.client_key_pem = c.client_key_pem;
    if (auto bad = check_tls_material(probe)) {
      // The message names the kubeconfig's fields; only OpenSSL's reason applies here.
      constexpr std::string_view marker = "is unusable: ";
      const auto at = bad.message.find(marker);
      return base::make_error(
          base::errc::config_invalid,
          who + "a client certificate and key the TLS client cannot use (" +
              (at == std::string::npos ? bad.message : bad.message.substr(at + marker.size())) +
              ")");
    }
  }
  return {};
}

}  // namespace

exec_authenticator::exec_authenticator(exec_config config, exec_limits limits,
                                       std::shared_ptr<base::clock> clock)
    : config_(std::move(config)),
      limits_(limits),
      clock_(std::move(clock)),
      retry_(retry_policy, *clock_) {}

exec_authenticator::~exec_authenticator() {
  stopping_ = true;
  std::thread worker;
  {
    const std::lock_guard lock(mutex_);
    worker = std::move(worker_);
  }
  if (worker.joinable()) {
    worker.join();
  }
}

exec_authenticator::freshness exec_authenticator::judge(base::wall_clock::time_point now) const {
  if (!credential_ || rejected_) {
    return freshness::none;
  }
  if (!credential_->expiry) {
    return freshness::fresh;
  }
  const auto expiry = *credential_->expiry;
  if (now >= expiry) {
    return freshness::none;
  }
  const auto margin =
      std::min<base::wall_clock::duration>((expiry - fetched_) / 5, max_renew_margin);
  return now >= expiry - margin ? freshness::renew : freshness::fresh;
}

bool exec_authenticator::may_run(base::clock::time_point now) const {
  return !running_ && !stopping_ && (!last_error_ || now >= next_try_);
}

void exec_authenticator::start_worker() {
  running_ = true;
  // The previous worker has left its last lock (it clears running_ under it and then only
  // calls the waiters), so joining here cannot wait for this lock.
  if (worker_.joinable()) {
    worker_.join();
  }
  worker_ = std::thread([this] { run_once(true); });
}

void exec_authenticator::run_once(bool background) {
  auto ran = run_exec_plugin(config_, limits_, &stopping_);
  const auto wall = clock_->wall();
  base::error failed;
  if (!ran) {
    failed = ran.error();
  } else {
    failed = unusable(config_, ran->credential, wall);
  }
  const auto log = base::named_logger("client");
  std::vector<std::function<void()>> waiters;
  {
    const std::lock_guard lock(mutex_);
    if (failed) {
      // get()'s caller reports its failure itself; a run of the worker has no caller.
      if (background && !streak_logged_ &&
          failed.code != make_error_code(base::errc::shutting_down)) {
        streak_logged_ = true;
        log->warn("{}; {}", failed.message,
                  judge(wall) != freshness::none
                      ? "the credential it gave before is kept until it expires"
                      : "requests to the API server fail until it succeeds");
      }
      last_error_ = failed;
      next_try_ = clock_->now() + retry_.next();
    } else {
      if (std::exchange(streak_logged_, false)) {
        log->info("{}: the exec plugin \"{}\" works again", config_.source,
                  base::printable(config_.command, 256));
      }
      if (!ran->stderr_text.empty()) {
        log->warn("{}: the exec plugin \"{}\" wrote on standard error: {}", config_.source,
                  base::printable(config_.command, 256), base::printable(ran->stderr_text, 512));
      }
      credential_ = std::make_shared<const exec_credential>(std::move(ran->credential));
      ++generation_;
      fetched_ = wall;
      rejected_ = false;
      last_error_ = {};
      retry_.reset();
    }
    running_ = false;
    waiters.swap(waiters_);
  }
  ran_.notify_all();
  for (auto& done : waiters) {
    done();
  }
}

base::result<exec_authenticator::snapshot> exec_authenticator::get() {
  std::unique_lock lock(mutex_);
  for (;;) {
    const auto state = judge(clock_->wall());
    if (state != freshness::none) {
      if (state == freshness::renew && may_run(clock_->now())) {
        start_worker();
      }
      return snapshot{credential_, generation_};
    }
    if (running_) {
      ran_.wait(lock, [this] { return !running_; });
      if (auto again = judge(clock_->wall()); again == freshness::none && last_error_) {
        return last_error_;
      }
      continue;
    }
    if (!may_run(clock_->now())) {
      if (stopping_) {
        return base::make_error(base::errc::shutting_down, config_.source + ": shutting down");
      }
      return last_error_;
    }
    running_ = true;
    lock.unlock();
    run_once(false);  // on this thread
    lock.lock();
    if (judge(clock_->wall()) == freshness::none && last_error_) {
      return last_error_;
    }
  }
}

base::result<std::optional<exec_authenticator::snapshot>> exec_authenticator::current() {
  const std::lock_guard lock(mutex_);
  const auto state = judge(clock_->wall());
  if (state != freshness::fresh && may_run(clock_->now())) {
    start_worker();
  }
  if (state != freshness::none) {
    return std::optional<snapshot>{snapshot{credential_, generation_}};
  }
  if (running_) {
    return std::optional<snapshot>{};
  }
  if (last_error_) {
    return last_error_;
  }
  return base::make_error(base::errc::shutting_down, config_.source + ": shutting down");
}

void exec_authenticator::rejected(std::uint64_t generation) {
  const std::lock_guard lock(mutex_);
  if (generation != generation_ || rejected_ || !credential_) {
    return;  // an older credential's 401, or this one's already counted
  }
  rejected_ = true;
  if (may_run(clock_->now())) {
    start_worker();
  }
}

void exec_authenticator::when_refreshed(std::function<void()> done) {
  {
    const std::lock_guard lock(mutex_);
    if (running_) {
      waiters_.push_back(std::move(done));
      return;
    }
  }
  done();
}

std::shared_ptr<const exec_credential> exec_authenticator::newest() const {
  const std::lock_guard lock(mutex_);
  return credential_;
}

}  // namespace tec::k8sclient
