#pragma once

// The HTTP/1.1 (+TLS) client everything talks to the API server through.
//
// Threading: a client lives on one Asio executor (a strand of the daemon's io_context); its
// coroutines may be co_spawned from anywhere onto that executor. It keeps a pool of persistent
// connections so concurrent requests do not queue behind each other (HTTP/1.1 has no
// multiplexing), a client-side token bucket (QPS/burst), and retries as client-go does:
// 429 and 5xx obey Retry-After (at most max_retries, each through the rate limiter again);
// network errors are retried only for idempotent requests, after a jittered exponential
// backoff. Every connect, handshake, write and read has a deadline. Tokens never appear in logs
// or error messages. A streak of 429 answers is logged once when it begins and once when it ends.
//
// Credentials: a static token, a token file (re-read on the executor: a small regular file,
// opened without blocking), or an exec plugin (rest_config::exec), which is never run on the
// executor: a request without a usable credential waits, without blocking, for the run the
// authenticator starts on its own thread. After a 401 the token file is re-read, or the exec
// plugin run again (once for a burst of 401s), and the request is resent once if the
// credential changed. An exec client certificate is presented by the connections opened after
// it arrived; idle connections holding a replaced one are closed.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "tec/base/backoff.hpp"
#include "tec/base/clock.hpp"
#include "tec/base/error.hpp"
#include "tec/base/result.hpp"
#include "tec/k8sclient/byte_stream.hpp"
#include "tec/k8sclient/rest_config.hpp"

namespace spdlog {
class logger;
}  // namespace spdlog

namespace tec::k8sclient {

/// Why the client waits before (re)sending a request.
enum class wait_reason : std::uint8_t {
  rate_limit,     ///< The client-side token bucket (QPS/burst).
  retry_after,    ///< A 429/5xx answer's Retry-After.
  network_retry,  ///< Backoff before resending after a network error.
};

struct client_options {
  double qps = 20.0;  ///< Token bucket refill rate; <= 0 disables client-side limiting.
  int burst = 30;
  std::size_t max_connections = 8;  ///< Pool size (streams hold one connection each).
  /// Slow start of plain requests (not streams, not background): at most this many on the
  /// wire at once after an idle second, one more for each answer, up to max_connections, so
  /// the API server does not share its CPU between a whole burst at once. 0 = no slow start.
  std::size_t initial_plain_window = 16;
  std::chrono::milliseconds dial_timeout{30'000};
  std::chrono::milliseconds tls_handshake_timeout{10'000};
  std::chrono::milliseconds request_timeout{60'000};  ///< Write + read of a plain request.
  std::chrono::seconds tcp_keepalive{30};
  int max_retries = 10;  ///< For 429/5xx (Retry-After) and idempotent network errors.
  /// The wait before resending after a network error: 100 ms doubling to 5 s, each stretched
  /// by a random factor in [1, 1.5); a fresh series for every request.
  base::backoff_policy network_retry_backoff{std::chrono::milliseconds{100},
                                             std::chrono::milliseconds{5'000},
                                             std::chrono::milliseconds{120'000}, 2.0, 0.5};
  std::chrono::seconds token_refresh_period{50};
  std::string user_agent = "taint-eviction-controller";
  /// An idle pooled connection older than this is closed instead of reused (client-go's
  /// IdleConnTimeout is 90 s; servers close idle connections on their own schedule).
  std::chrono::milliseconds idle_connection_timeout{90'000};
  /// Bound on a send() response body (buffered whole); a larger one is
  /// errc::response_too_large, never retried. A streamed body's consumer bounds it.
  std::size_t max_response_bytes = std::size_t{256} << 20U;
  /// Test seam: maps each wait (its reason and the time wanted) to the wait actually slept.
  /// Empty = sleep the time wanted. Runs on the client's executor.
  std::function<std::chrono::nanoseconds(wait_reason, std::chrono::nanoseconds)> delay;
  /// Test seam: the clock of every deadline and wait of the client, and of its token bucket.
  /// Empty = async::real_alarm_clock().
  std::shared_ptr<base::alarm_clock> clock;
  /// Test seam: opens each pooled connection as a byte_stream (in memory) instead of dialling
  /// config.host:port (no DNS, TCP or TLS). Called on, and the stream must run on, the
  /// client's executor. An error fails the attempt as a refused connection would.
  std::function<base::result<std::unique_ptr<byte_stream>>(const boost::asio::any_io_executor&)>
      connector;
  /// Called after every HTTP exchange (for metrics): verb, status (0 on a transport error)
  /// and latency. Runs on the client's executor; must be cheap and thread-safe.
  std::function<void(boost::beast::http::verb, unsigned, std::chrono::nanoseconds)> observer;
};

/// Not an aggregate on purpose: GCC 12 destroys an aggregate-initialised temporary passed to
/// a coroutine inside a co_await expression twice (`co_await c.send(request{...})` -> double
/// free). With constructors the same brace syntax is safe.
struct request {
  request() = default;
  request(boost::beast::http::verb method_, std::string target_, std::string body_ = {},
          std::string content_type_ = "application/json", bool idempotent_ = false)
      : method(method_),
        target(std::move(target_)),
        body(std::move(body_)),
        content_type(std::move(content_type_)),
        idempotent(idempotent_) {}

  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::string target;  ///< Path and query, e.g. "/api/v1/pods?limit=500".
  std::string body;
  std::string content_type = "application/json";
  /// The Accept header.
  std::string accept = "application/json";
  /// Safe to resend after a network error (GET, DELETE with a UID precondition, PUT with a
  /// resourceVersion). Retries on 429/5xx happen for every request.
  bool idempotent = false;
  /// Yields to the other requests: waits, without a deadline (shutdown ends it; the request
  /// timeout runs from when it has a connection), while any other request waits for a
  /// connection or any send() past the rate limiter for its answer. For the Events, so that
  /// evictions reach the API server first and have it to themselves.
  bool background = false;
  /// When the whole exchange, retries included, must be over (on client::clock()). At the
  /// deadline the connection is closed and the result is errc::timeout, never retried.
  /// time_point::max(): only request_timeout and a stream's idle timeout bound it.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// Checked just before the request is written (after the waits for the rate limiter and a
  /// connection, and before each retry): true -> nothing is sent, errc::cancelled. For
  /// evictions withdrawn while they waited. Called on the client's executor.
  std::function<bool()> cancelled;
};

struct response {
  unsigned status = 0;
  std::string body;
};

/// Called with each piece of a streamed body as it arrives (chunk boundaries are arbitrary:
/// a line may be split across calls). Return false to stop the stream.
using body_sink = std::function<bool(std::string_view bytes)>;

class client {
public:
  client(boost::asio::any_io_executor executor, rest_config config, client_options options = {});
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Sends one request and reads the whole response. A non-2xx status is NOT an error here:
  /// it is returned in response::status (after the 429/5xx retries are used up), so callers
  /// decide what 404/409/410 mean. Errors are transport/config failures only.
  boost::asio::awaitable<base::result<response>> send(request req);

  /// Sends a request whose response body is a long stream (a watch). The headers are awaited
  /// under request_timeout (with the same retries as send()); on a 2xx every body byte is
  /// then fed to `sink` until the server ends the stream (-> the response, empty body),
  /// `sink` returns false (-> the response; the connection is closed), or no byte arrives
  /// for `idle_timeout` (-> errc::timeout). A transport error after the first body byte is
  /// returned, never retried. On a non-2xx status, the body is returned in response::body and
  /// `sink` is not called (over 1 MiB -> errc::response_too_large). `sink` runs on the
  /// client's executor.
  boost::asio::awaitable<base::result<response>> stream(request req, body_sink sink,
                                                        std::chrono::milliseconds idle_timeout);

  /// Cancels every request in flight and refuses new ones (errc::shutting_down).
  void shutdown();

  /// The clock the client's deadlines and waits run on (client_options::clock), for the
  /// reflectors built on it. Lives as long as the client.
  [[nodiscard]] base::alarm_clock& clock() const noexcept;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

namespace detail {

/// The "client" logger of the HTTP client (client.cpp), looked up once and kept. Tests add a
/// sink to it to read what the client logged.
const std::shared_ptr<spdlog::logger>& client_log();

/// The steady clock in microseconds (CLOCK_MONOTONIC: comparable between the processes of one
/// machine), for the trace-level stage lines of a single eviction's latency.
inline long long trace_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace detail

}  // namespace tec::k8sclient
