#include "tec/k8sclient/leader_election.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>

#include "renew_window.hpp"
#include "tec/base/backoff.hpp"
#include "tec/base/logger.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/hostname.hpp"
#include "tec/k8sclient/paths.hpp"

namespace tec::k8sclient {

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using nlohmann::json;
using steady_time = std::chrono::steady_clock::time_point;

std::shared_ptr<spdlog::logger> logger() {
  static const std::shared_ptr<spdlog::logger> log = base::named_logger("leader");
  return log;
}

std::uint64_t random_u64() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32U) ^ static_cast<std::uint64_t>(rd());
}

/// leaseDurationSeconds and leaseTransitions are int32 in the API (coordination.k8s.io/v1
/// LeaseSpec). Numbers read from a Lease are clamped to that range, and every duration the
/// election uses is kept within 2^31-1 seconds (68 years): a Lease or a flag with a larger
/// value can neither overflow the clock arithmetic (undefined behaviour) nor make us write a
/// value the API server rejects. A negative duration read stays negative (already expired).
constexpr std::int64_t max_int32 = std::numeric_limits<std::int32_t>::max();

std::int64_t clamp_int32(std::int64_t v) {
  return std::clamp<std::int64_t>(v, std::numeric_limits<std::int32_t>::min(), max_int32);
}

std::chrono::milliseconds clamp_duration(std::chrono::milliseconds d) {
  return std::min<std::chrono::milliseconds>(d, std::chrono::seconds{max_int32});
}

/// Reads the spec of a Lease object. Absent fields are zero/empty (as Go's decoder leaves
/// them); fields of the wrong type are an error.
base::result<lease_record> decode_lease_spec(const json& lease) {
  lease_record rec;
  if (!lease.is_object()) {
    return base::make_error(base::errc::unexpected_shape, "lease is not a JSON object");
  }
  const auto spec = lease.find("spec");
  if (spec == lease.end() || spec->is_null()) {
    return rec;
  }
  if (!spec->is_object()) {
    return base::make_error(base::errc::unexpected_shape, "lease spec is not an object");
  }
  const auto read_string = [&](const char* key, std::string& out) -> bool {
    const auto it = spec->find(key);
    if (it == spec->end() || it->is_null()) {
      return true;
    }
    if (!it->is_string()) {
      return false;
    }
    out = it->get<std::string>();
    return true;
  };
  const auto read_int = [&](const char* key, std::int64_t& out) -> bool {
    const auto it = spec->find(key);
    if (it == spec->end() || it->is_null()) {
      return true;
    }
    if (!it->is_number_integer()) {
      return false;
    }
    if (it->is_number_unsigned()) {
      out = static_cast<std::int64_t>(std::min<std::uint64_t>(
          it->get<std::uint64_t>(), std::numeric_limits<std::int64_t>::max()));
    } else {
      out = it->get<std::int64_t>();
    }
    out = clamp_int32(out);
    return true;
  };
  if (!read_string("holderIdentity", rec.holder_identity) ||
      !read_int("leaseDurationSeconds", rec.lease_duration_seconds) ||
      !read_string("acquireTime", rec.acquire_time) || !read_string("renewTime", rec.renew_time) ||
      !read_int("leaseTransitions", rec.lease_transitions)) {
    return base::make_error(base::errc::unexpected_shape,
                            "lease spec has a field of the wrong type");
  }
  return rec;
}

json encode_lease_spec(const lease_record& rec) {
  json spec = {{"holderIdentity", rec.holder_identity},
               {"leaseDurationSeconds", rec.lease_duration_seconds},
               {"leaseTransitions", rec.lease_transitions}};
  if (!rec.acquire_time.empty()) {
    spec["acquireTime"] = rec.acquire_time;
  }
  if (!rec.renew_time.empty()) {
    spec["renewTime"] = rec.renew_time;
  }
  return spec;
}

bool is_2xx(unsigned status) noexcept {
  return status >= 200 && status < 300;
}

}  // namespace

std::string default_identity() {
  std::array<char, 17> buf{};
  std::snprintf(buf.data(), buf.size(), "%016llx", static_cast<unsigned long long>(random_u64()));
  return local_hostname() + "_" + buf.data();
}

struct leader_elector::impl {
  impl(asio::any_io_executor ex, client& c, leader_election_config cfg,
       std::shared_ptr<base::clock> clk)
      : executor(std::move(ex)),
        api(c),
        config(std::move(cfg)),
        clock(std::move(clk)),
        wait_timer(executor),
        watchdog_timer(executor) {
    if (config.identity.empty()) {
      config.identity = default_identity();
    }
    config.lease_duration = clamp_duration(config.lease_duration);
    config.renew_deadline = clamp_duration(config.renew_deadline);
    config.retry_period = clamp_duration(config.retry_period);
    window = renew_window(config.retry_period, config.renew_deadline);
    collection = "/apis/coordination.k8s.io/v1/namespaces/" +
                 escape_path_segment(config.lease_namespace) + "/leases";
    object = collection + "/" + escape_path_segment(config.lease_name);
    describe = config.lease_namespace + "/" + config.lease_name;
  }

  [[nodiscard]] std::int64_t duration_seconds() const {
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(config.lease_duration);
    return std::clamp<std::int64_t>(secs.count(), 1, max_int32);
  }

  void observe(lease_record rec, steady_time at) {
    observed = std::move(rec);
    observed_time = at;
    holds.store(observed.holder_identity == config.identity);
  }

  void renewed(steady_time at) {
    window.succeeded(at);
    const std::lock_guard lock(mutex);
    last_renew = at;
  }

  [[nodiscard]] std::optional<steady_time> last_renewed() const {
    const std::lock_guard lock(mutex);
    return last_renew;
  }

  /// Declares leadership lost (once).
  void lose(const std::string& why) {
    if (lost.exchange(true)) {
      return;
    }
    if (started_leading) {
      if (stopped.load()) {
        logger()->info("stopped leading lease {} as {}: {}", describe, config.identity, why);
      } else {
        logger()->error("lost leadership of lease {} as {}: {}", describe, config.identity, why);
      }
      started_leading = false;
      if (config.on_stopped_leading) {
        config.on_stopped_leading();
      }
    }
  }

  asio::awaitable<void> wait(std::chrono::milliseconds d) {
    if (stopped.load()) {
      co_return;
    }
    wait_timer.expires_after(d);
    co_await wait_timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }

  std::chrono::milliseconds jittered_retry() {
    // client-go's JitterUntil(RetryPeriod, JitterFactor 1.2): period + [0, 1.2 * period).
    return base::jitter(config.retry_period, 1.2, rng);
  }

  /// PUT (update) or POST (create) the lease with `rec` as spec.
  asio::awaitable<base::result<response>> write(const lease_record& rec, bool create) {
    request req;
    json body;
    if (create) {
      body = {{"apiVersion", "coordination.k8s.io/v1"},
              {"kind", "Lease"},
              {"metadata", {{"name", config.lease_name}, {"namespace", config.lease_namespace}}}};
      req.method = http::verb::post;
      req.target = collection;
    } else {
      body = lease;  // Carries metadata.resourceVersion: the write is conditional.
      req.method = http::verb::put;
      req.target = object;
      req.idempotent = true;
    }
    body["spec"] = encode_lease_spec(rec);
    req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    co_return co_await api.send(std::move(req));
  }

  /// Keeps the object the server returned, for the next conditional write.
  void keep(const std::string& body) {
    json parsed = json::parse(body, nullptr, false);
    if (parsed.is_object()) {
      lease = std::move(parsed);
    }
  }

  asio::awaitable<bool> try_acquire_or_renew() {
    const std::string now_text =
        base::format_rfc3339(clock->wall(), base::rfc3339_digits::microseconds);
    lease_record next{config.identity, duration_seconds(), now_text, now_text, 0};

    // A named request: GCC 12 mis-destroys braced temporaries inside co_await expressions.
    request get;
    get.target = object;
    get.idempotent = true;
    auto got = co_await api.send(std::move(get));
    if (!got) {
      logger()->warn("error retrieving lease {}: {}", describe, got.error().message);
      co_return false;
    }
    if (got->status == 404) {
      auto created = co_await write(next, /*create=*/true);
      if (!created || !is_2xx(created->status)) {
        logger()->warn(
            "error creating lease {}: {}", describe,
            created ? api_error("POST lease", created.value()).message : created.error().message);
        co_return false;
      }
      keep(created->body);
      const auto at = clock->now();
      observe(next, at);
      renewed(at);
      co_return true;
    }
    if (!is_2xx(got->status)) {
      logger()->warn("error retrieving lease {}: {}", describe,
                     api_error("GET lease", got.value()).message);
      co_return false;
    }
    json parsed = json::parse(got->body, nullptr, false);
    if (parsed.is_discarded()) {
      logger()->warn("lease {}: the server sent malformed JSON", describe);
      co_return false;
    }
    auto old = decode_lease_spec(parsed);
    if (!old) {
      logger()->warn("lease {}: {}", describe, old.error().message);
      co_return false;
    }
    lease = std::move(parsed);

    // Expiry is measured from when WE saw the record change, on our own clock.
    const auto now = clock->now();
    if (!(old.value() == observed) || !observed_time) {
      observe(old.value(), now);
    }
    const bool we_hold = holds.load();
    if (!observed.holder_identity.empty() && !we_hold &&
        *observed_time + std::chrono::seconds(observed.lease_duration_seconds) > now) {
      logger()->debug("lease {} is held by {} and has not expired", describe,
                      observed.holder_identity);
      co_return false;
    }

    if (we_hold) {
      next.acquire_time = observed.acquire_time;
      next.lease_transitions = observed.lease_transitions;
    } else {
      // Never negative (the API server refuses it), never beyond int32.
      next.lease_transitions =
          std::clamp<std::int64_t>(observed.lease_transitions + 1, 0, max_int32);
    }
    auto put = co_await write(next, /*create=*/false);
    if (!put) {
      logger()->warn("error updating lease {}: {}", describe, put.error().message);
      co_return false;
    }
    if (put->status == 409) {
      logger()->info("lease {}: another candidate updated it first (409)", describe);
      co_return false;
    }
    if (!is_2xx(put->status)) {
      logger()->warn("error updating lease {}: {}", describe,
                     api_error("PUT lease", put.value()).message);
      co_return false;
    }
    keep(put->body);
    const auto at = clock->now();
    observe(next, at);
    renewed(at);
    co_return true;
  }

  asio::awaitable<bool> release() {
    if (!holds.load()) {
      co_return true;
    }
    const std::string now_text =
        base::format_rfc3339(clock->wall(), base::rfc3339_digits::microseconds);
    const lease_record released{"", 1, now_text, now_text, observed.lease_transitions};
    auto put = co_await write(released, /*create=*/false);
    if (!put || !is_2xx(put->status)) {
      logger()->warn("failed to release lease {}: {}", describe,
                     put ? api_error("PUT lease", put.value()).message : put.error().message);
      co_return false;
    }
    keep(put->body);
    observe(released, clock->now());
    logger()->info("released lease {}", describe);
    co_return true;
  }

  /// client-go's renew: a cycle every retry period; within it, attempts every retry period
  /// until one succeeds or the cycle's renew deadline passes (renew_window).
  asio::awaitable<void> renew_loop() {
    while (!stopped.load() && !lost.load()) {
      co_await wait(config.retry_period);
      window.cycle_began(clock->now());
      for (;;) {
        if (stopped.load() || lost.load()) {
          co_return;
        }
        const bool ok = co_await try_acquire_or_renew();
        if (ok) {
          break;
        }
        if (!holds.load()) {
          // Another holder wrote the lease: waiting out the deadline cannot help.
          lose("the lease is now held by " + observed.holder_identity);
          co_return;
        }
        if (window.expired(clock->now())) {
          lose("could not renew within the renew deadline");
          co_return;
        }
        co_await wait(config.retry_period);
      }
    }
  }

  /// Declares the loss as soon as the renew deadline passes, even while a renewal request
  /// is still in flight (a hung request must not keep us acting as leader).
  asio::awaitable<void> watchdog() {
    for (;;) {
      const auto now = clock->now();
      if (window.expired(now)) {
        lose("no renewal within the renew deadline");
        co_return;
      }
      watchdog_timer.expires_after(window.renew_by() - now);
      auto [ec] = co_await watchdog_timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) {
        co_return;  // The renew loop ended first.
      }
    }
  }

  asio::awaitable<bool> run() {
    using namespace asio::experimental::awaitable_operators;
    lost.store(false);
    logger()->info("attempting to acquire lease {} as {}", describe, config.identity);
    for (;;) {
      if (stopped.load()) {
        co_return true;
      }
      if (co_await try_acquire_or_renew()) {
        break;
      }
      co_await wait(jittered_retry());
    }
    logger()->info("acquired lease {} as {}", describe, config.identity);
    started_leading = true;
    if (config.on_started_leading) {
      config.on_started_leading();
    }
    co_await (renew_loop() || watchdog());
    const bool clean = !lost.load();
    if (clean && config.release_on_cancel) {
      co_await release();
    }
    lose("stopped");
    co_return clean;
  }

  asio::any_io_executor executor;
  client& api;
  leader_election_config config;
  std::shared_ptr<base::clock> clock;
  std::string collection;
  std::string object;
  std::string describe;
  std::mt19937_64 rng{random_u64()};

  // Executor only.
  lease_record observed;
  std::optional<steady_time> observed_time;
  json lease;  ///< The last Lease object read or written (for its resourceVersion).
  bool started_leading = false;
  renew_window window{config.retry_period, config.renew_deadline};
  asio::steady_timer wait_timer;
  asio::steady_timer watchdog_timer;

  // Any thread.
  std::atomic<bool> holds{false};
  std::atomic<bool> lost{false};
  std::atomic<bool> stopped{false};
  mutable std::mutex mutex;
  std::optional<steady_time> last_renew;  ///< Guarded by mutex.
};

leader_elector::leader_elector(asio::any_io_executor executor, client& c,
                               leader_election_config config, std::shared_ptr<base::clock> clock)
    : impl_(std::make_shared<impl>(std::move(executor), c, std::move(config), std::move(clock))) {}

leader_elector::~leader_elector() {
  stop();
}

asio::awaitable<bool> leader_elector::run() {
  auto self = impl_;  // Keeps the state alive for the whole run.
  co_return co_await self->run();
}

void leader_elector::stop() {
  if (impl_->stopped.exchange(true)) {
    return;
  }
  asio::post(impl_->executor, [self = impl_] { self->wait_timer.cancel(); });
}

asio::awaitable<bool> leader_elector::try_acquire_or_renew() {
  auto self = impl_;
  co_return co_await self->try_acquire_or_renew();
}

asio::awaitable<bool> leader_elector::release() {
  auto self = impl_;
  co_return co_await self->release();
}

bool leader_elector::is_leader() const noexcept {
  return impl_->holds.load() && !impl_->lost.load();
}

std::optional<std::chrono::steady_clock::time_point> leader_elector::last_renew_time() const {
  return impl_->last_renewed();
}

bool leader_elector::healthy(std::chrono::milliseconds tolerance) const {
  if (!is_leader()) {
    return true;
  }
  const auto last = impl_->last_renewed();
  return last &&
         impl_->clock->now() - *last <= impl_->config.lease_duration + clamp_duration(tolerance);
}

const lease_record& leader_elector::observed_record() const noexcept {
  return impl_->observed;
}

const std::string& leader_elector::identity() const noexcept {
  return impl_->config.identity;
}

}  // namespace tec::k8sclient
