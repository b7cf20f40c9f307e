// The HTTP/1.1 (+TLS) transport: a pool of persistent Beast connections driven by C++20
// coroutines on the client's executor. See client.hpp for the contract.

#include "tec/k8sclient/client.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <spdlog/logger.h>
#include <spdlog/spdlog.h>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <charconv>
#include <optional>
#include <set>
#include <vector>

#include "connection_pool.hpp"
#include "tec/asio/real_alarm_clock.hpp"
#include "tec/base/logger.hpp"
#include "tec/base/token_bucket.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/k8sclient/exec_authenticator.hpp"
#include "tls_context.hpp"

namespace tec::k8sclient {

using base::errc;
using base::error;

const std::shared_ptr<spdlog::logger>& detail::client_log() {
  static const std::shared_ptr<spdlog::logger> logger = base::named_logger("client");
  return logger;
}

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t error_body_limit = std::size_t{1} << 20U;

using detail::client_log;
using detail::connection;
using detail::trace_us;

error fail(errc code, std::string message, int http_status = 0) {
  return base::error{make_error_code(code), std::move(message), http_status};
}

bool is_ip_literal(const std::string& host) {
  boost::system::error_code ec;
  (void)asio::ip::make_address(host, ec);
  return !ec;
}

bool tracing() {
  return client_log()->should_log(spdlog::level::trace);
}

std::string millis(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

/// Retry-After as client-go reads it: a non-negative integer number of seconds.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value) {
  int seconds = 0;
  const auto* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, seconds);
  if (ec != std::errc{} || ptr != end || seconds < 0) {
    return std::nullopt;
  }
  return std::chrono::seconds{seconds};
}

using plain_stream = beast::tcp_stream;
using tls_stream = beast::ssl_stream<beast::tcp_stream>;

/// What one attempt (one request on one connection) produced.
struct attempt_outcome {
  base::error err;  ///< Transport failure; status/body are then meaningless.
  bool write_failed = false;
  bool body_started = false;  ///< The sink has been given bytes: the attempt is not replayable.
  unsigned status = 0;
  std::string body;
  std::optional<std::chrono::seconds> retry_after;
  bool reusable = false;
};

/// One try of a request: its exchange, and what decides whether it may be sent again.
struct try_outcome {
  attempt_outcome exchange;
  bool sent = false;           ///< false: no exchange happened; exchange.err is final.
  bool reused = false;         ///< The exchange ran on a pooled connection.
  bool past_deadline = false;  ///< The request's own deadline closed the connection.
};

/// Whether a try that failed on the network may be sent again: replaying is safe for idempotent
/// requests, and for any request the server cannot have acted on (the write itself failed on a
/// reused connection). Timeouts are not retried (the deadline was the caller's budget), nor is
/// a response too large, nor one whose body the sink has begun to take.
bool replayable(const request& req, const try_outcome& tried) {
  const attempt_outcome& out = tried.exchange;
  return !out.body_started && !tried.past_deadline &&
         out.err.code != make_error_code(base::errc::timeout) &&
         out.err.code != make_error_code(base::errc::response_too_large) &&
         (req.idempotent || (tried.reused && out.write_failed));
}

/// The wait a Retry-After asks for, bounded: a hostile or broken one must not park the request
/// for hours (at most the request timeout, or 1 s when that is shorter).
std::chrono::nanoseconds retry_after_wait(std::chrono::seconds retry_after,
                                          std::chrono::milliseconds request_timeout) {
  return std::min<std::chrono::nanoseconds>(
      retry_after, std::max<std::chrono::nanoseconds>(std::chrono::seconds{1}, request_timeout));
}

/// host:port (an IPv6 address in brackets): the Host header, and the server in messages.
std::string endpoint_of(const rest_config& config) {
  const bool ipv6 = config.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + config.host + "]" : config.host) + ":" + config.port;
}

/// Closes `c` (ending its I/O in flight) at `when` on the clock, unless the returned alarm is
/// gone first; `*fired` then tells an I/O error was this deadline.
std::unique_ptr<base::alarm_clock::alarm> close_at(base::alarm_clock& clock,
                                                   const asio::any_io_executor& ex, connection& c,
                                                   steady::time_point when,
                                                   const std::shared_ptr<bool>& fired) {
  *fired = false;
  return clock.at(ex, when, [&c, fired] {
    *fired = true;
    c.close();
  });
}

/// Opens the pool's connections: client_options::connector's stream, or DNS, TCP (no delay,
/// keepalive) and TLS (SNI, the server's name checked), each step under its deadline. Runs on
/// the client's executor.
class dialer {
public:
  /// Checks the address and makes the TLS context; config_error() tells what is wrong.
  /// `config` and `opts` (the client's) outlive the dialer.
  dialer(asio::any_io_executor ex, base::alarm_clock& clock, const rest_config& config,
         const client_options& opts)
      : ex_(std::move(ex)),
        clock_(clock),
        config_(config),
        opts_(opts),
        endpoint_(endpoint_of(config)),
        verify_name_(config.tls_server_name.empty() ? config.host : config.tls_server_name) {
    const auto* port_end = config.port.data() + config.port.size();
    auto [port_ptr, port_ec] = std::from_chars(config.port.data(), port_end, port_);
    if (config.host.empty() || port_ec != std::errc{} || port_ptr != port_end || port_ == 0) {
      config_error_ = fail(base::errc::config_invalid, "the API server address \"" + endpoint_ +
                                                           "\" has no host or no valid port");
    } else if (config.tls) {
      auto ctx = detail::make_tls_context(config);
      if (!ctx) {
        config_error_ = ctx.error();
      } else {
        ssl_ = std::make_shared<ssl::context>(std::move(ctx).value());
      }
    }
  }

  [[nodiscard]] const std::optional<error>& config_error() const { return config_error_; }

  /// False for a connection made with a client certificate of the exec plugin that a newer
  /// one has replaced: it is closed rather than reused.
  [[nodiscard]] bool current(const connection& c) const {
    if (!config_.exec || !c.tls) {
      return true;
    }
    const auto newest = config_.exec->newest();
    return !newest || newest->client_cert_pem.empty() || c.client_certificate == newest;
  }

  /// Opens `c` (whose close() ends an open in progress); an empty error when it is open.
  asio::awaitable<error> open(connection& c) {
    if (opts_.connector) {
      auto opened = opts_.connector(ex_);
      if (!opened) {
        co_return fail(base::errc::connection_failed,
                       "cannot connect to " + endpoint_ + ": " + opened.error().message);
      }
      c.custom = std::move(opened.value());
      co_return error{};
    }
    if (ssl_) {
      auto ctx = tls_context(c);
      if (!ctx) {
        co_return ctx.error();
      }
      c.tls = std::make_unique<tls_stream>(ex_, *ctx.value());
      c.tls_context = ctx.value();
    } else {
      c.plain = std::make_unique<plain_stream>(ex_);
    }
    const auto dial_deadline = clock_.now() + opts_.dial_timeout;
    tcp::resolver::results_type endpoints;
    if (is_ip_literal(config_.host)) {
      boost::system::error_code ec;
      endpoints = tcp::resolver::results_type::create(
          tcp::endpoint(asio::ip::make_address(config_.host, ec), port_), config_.host,
          config_.port);
    } else {
      auto resolved = co_await resolve(dial_deadline);
      if (!resolved) {
        co_return resolved.error();
      }
      endpoints = std::move(resolved.value());
    }

    auto& low = c.lowest();
    auto fired = std::make_shared<bool>(false);
    auto dial = close_at(clock_, ex_, c, dial_deadline, fired);
    auto [ec, ep] = co_await low.async_connect(endpoints, use_tuple);
    dial.reset();
    if (ec) {
      const bool timeout = *fired;
      co_return fail(timeout ? base::errc::timeout : base::errc::connection_failed,
                     "cannot connect to " + endpoint_ +
                         (timeout ? " within " + millis(opts_.dial_timeout) : "") + ": " +
                         ec.message());
    }
    set_keepalive(low.socket(), opts_.tcp_keepalive);

    if (c.tls) {
      if (!is_ip_literal(verify_name_) &&
          SSL_ctrl(c.tls->native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                   static_cast<void*>(const_cast<char*>(verify_name_.c_str()))) != 1) {
        co_return fail(base::errc::connection_failed, "cannot set TLS SNI to " + verify_name_);
      }
      if (!config_.insecure_skip_tls_verify) {
        c.tls->set_verify_callback(ssl::host_name_verification(verify_name_));
      }
      auto handshake = close_at(clock_, ex_, c, clock_.now() + opts_.tls_handshake_timeout, fired);
      auto [hec] = co_await c.tls->async_handshake(ssl::stream_base::client, use_tuple);
      handshake.reset();
      if (hec) {
        // A deadline ends the handshake by closing the socket, which OpenSSL reports as
        // "Operation canceled": say what happened instead (issue 29).
        const bool timeout = *fired;
        co_return fail(
            timeout ? base::errc::timeout : base::errc::connection_failed,
            "TLS handshake with " + endpoint_ + " (verifying name " + verify_name_ + ") " +
                (timeout ? "timed out: no answer within " + millis(opts_.tls_handshake_timeout)
                         : "failed: " + hec.message()));
      }
    }
    client_log()->debug("opened connection #{} to {}", c.id, endpoint_);
    co_return error{};
  }

private:
  /// The TLS context of a new connection: the config's, or, when the exec plugin's newest
  /// credential holds a client certificate, one with that certificate (made once per
  /// credential; the authenticator has checked that it loads).
  /// `c` keeps the credential it is made with (current() compares it).
  base::result<std::shared_ptr<ssl::context>> tls_context(connection& c) {
    if (!config_.exec) {
      return ssl_;
    }
    auto newest = config_.exec->newest();
    if (!newest || newest->client_cert_pem.empty()) {
      return ssl_;
    }
    if (newest != exec_ssl_for_) {
      rest_config with_cert = config_;
      with_cert.client_cert_pem = newest->client_cert_pem;
      with_cert.client_key_pem = newest->client_key_pem;
      auto ctx = detail::make_tls_context(with_cert);
      if (!ctx) {
        return ctx.error();
      }
      exec_ssl_ = std::make_shared<ssl::context>(std::move(ctx).value());
      exec_ssl_for_ = newest;
    }
    c.client_certificate = std::move(newest);
    return exec_ssl_;
  }

  static void set_keepalive(tcp::socket& socket, std::chrono::seconds period) {
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (period <= std::chrono::seconds::zero()) {
      return;
    }
    socket.set_option(asio::socket_base::keep_alive(true), ignored);
    const int secs = static_cast<int>(period.count());
    const int fd = socket.native_handle();
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof secs);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &secs, sizeof secs);
  }

  asio::awaitable<base::result<tcp::resolver::results_type>> resolve(steady::time_point deadline) {
    // The resolver has no deadline of its own: a timer cancels it.
    auto resolver = std::make_shared<tcp::resolver>(ex_);
    auto timed_out = std::make_shared<bool>(false);
    auto ring = clock_.at(ex_, deadline, [resolver, timed_out] {
      *timed_out = true;
      resolver->cancel();
    });
    auto [ec, results] = co_await resolver->async_resolve(config_.host, config_.port, use_tuple);
    ring.reset();
    if (ec) {
      co_return fail(*timed_out ? base::errc::timeout : base::errc::connection_failed,
                     "cannot resolve " + endpoint_ + ": " + ec.message());
    }
    co_return results;
  }

  asio::any_io_executor ex_;
  base::alarm_clock& clock_;
  const rest_config& config_;
  const client_options& opts_;
  std::string endpoint_;
  std::string verify_name_;
  unsigned short port_ = 0;
  std::shared_ptr<ssl::context> ssl_;  ///< The config's; null for plain http.
  /// With an exec plugin that returns a client certificate: the context made with its newest
  /// one, and that credential.
  std::shared_ptr<ssl::context> exec_ssl_;
  std::shared_ptr<const exec_credential> exec_ssl_for_;
  std::optional<error> config_error_;
};

/// The idle guard of a streamed body: closes `c` once `limit` passes without a touch().
/// One alarm, not one per read: a touch() only notes the time, and the alarm, when it comes
/// due before the limit has passed since the last touch, arms again for then (an alarm per
/// read costs CPU on a big LIST; issue 16). Lives on the executor, as the alarm's callback,
/// which it outlives.
class idle_guard {
public:
  idle_guard(base::alarm_clock& clock, asio::any_io_executor ex, connection& c,
             std::chrono::nanoseconds limit, std::shared_ptr<bool> fired)
      : clock_(clock),
        ex_(std::move(ex)),
        c_(c),
        limit_(std::chrono::duration_cast<steady::duration>(limit)),
        fired_(std::move(fired)),
        last_(clock.now()) {
    *fired_ = false;
    arm(last_ + limit_);
  }
  idle_guard(const idle_guard&) = delete;
  idle_guard& operator=(const idle_guard&) = delete;

  void touch() { last_ = clock_.now(); }

private:
  void arm(steady::time_point when) {
    alarm_ = clock_.at(ex_, when, [this] { due(); });
  }
  void due() {
    if (clock_.now() - last_ < limit_) {
      arm(last_ + limit_);  // replaces the alarm running this: its callback is kept alive
      return;
    }
    *fired_ = true;
    c_.close();
  }

  base::alarm_clock& clock_;
  asio::any_io_executor ex_;
  connection& c_;
  steady::duration limit_;
  std::shared_ptr<bool> fired_;
  steady::time_point last_;
  std::unique_ptr<base::alarm_clock::alarm> alarm_;
};

/// One request and its answer on one connection: the message built, written and its answer
/// read under request_timeout (a streamed body instead under its idle guard), the body
/// bounded. Runs on the client's executor.
class http_exchange {
public:
  /// `config` and `opts` (the client's) outlive it.
  http_exchange(asio::any_io_executor ex, base::alarm_clock& clock, const rest_config& config,
                const client_options& opts)
      : ex_(std::move(ex)),
        clock_(clock),
        config_(config),
        opts_(opts),
        endpoint_(endpoint_of(config)) {}

  http::request<http::string_body> build(const request& req, const std::string& token) const {
    http::request<http::string_body> msg{req.method, config_.base_path + req.target, 11};
    msg.set(http::field::host, endpoint_);
    msg.set(http::field::user_agent, opts_.user_agent);
    msg.set(http::field::accept, req.accept);
    if (!token.empty()) {
      msg.set(http::field::authorization, "Bearer " + token);
    }
    if (!req.body.empty()) {
      msg.set(http::field::content_type, req.content_type);
      msg.body() = req.body;
    }
    msg.keep_alive(true);
    msg.prepare_payload();
    return msg;
  }

  /// Writes `msg` on `stream` (c's) and reads the answer: the whole body when `sink` is null,
  /// else a 2xx body fed to `sink` until it ends, `sink` returns false or `idle_timeout`
  /// passes without a byte.
  template <class Stream>
  asio::awaitable<attempt_outcome> run(Stream& stream, connection& c,
                                       http::request<http::string_body>& msg, const body_sink* sink,
                                       std::chrono::milliseconds idle_timeout) {
    attempt_outcome out;
    // One deadline for the write and the whole response; a stream's body instead has the idle
    // guard: idle_timeout without a byte.
    auto fired = std::make_shared<bool>(false);
    auto guard = close_at(clock_, ex_, c, clock_.now() + opts_.request_timeout, fired);
    auto [wec, wn] = co_await http::async_write(stream, msg, use_tuple);
    if (tracing()) {
      client_log()->trace("stage=written {} {} conn=#{} t_us={}",
                          std::string(http::to_string(msg.method())), std::string(msg.target()),
                          c.id, trace_us());
    }
    if (wec) {
      out.err = transport_error(wec, *fired, "writing a request to", opts_.request_timeout);
      out.write_failed = true;
      co_return out;
    }

    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    auto [hec, hn] = co_await http::async_read_header(stream, c.buffer, parser, use_tuple);
    if (hec) {
      out.err = transport_error(hec, *fired, "reading a response from", opts_.request_timeout);
      co_return out;
    }
    const auto& head = parser.get();
    out.status = head.result_int();
    if (tracing()) {
      client_log()->trace("stage=response {} {} conn=#{} status={} t_us={}",
                          std::string(http::to_string(msg.method())), std::string(msg.target()),
                          c.id, out.status, trace_us());
    }
    if (auto it = head.find(http::field::retry_after); it != head.end()) {
      out.retry_after = parse_retry_after(it->value());
    }
    const bool streaming = sink != nullptr && out.status >= 200 && out.status < 300;
    const std::size_t limit = sink != nullptr ? error_body_limit : opts_.max_response_bytes;

    std::array<char, 16384> piece{};
    std::optional<idle_guard> idle;
    if (streaming) {
      guard.reset();
      idle.emplace(clock_, ex_, c, idle_timeout, fired);
    }
    while (!parser.is_done()) {
      if (idle) {
        idle->touch();
      }
      parser.get().body().data = piece.data();
      parser.get().body().size = piece.size();
      auto [rec, rn] = co_await http::async_read_some(stream, c.buffer, parser, use_tuple);
      const std::size_t got = piece.size() - parser.get().body().size;
      if (rec == http::error::need_buffer) {
        rec = {};
      }
      if (got > 0) {
        if (streaming) {
          out.body_started = true;
          if (!(*sink)(std::string_view(piece.data(), got))) {
            co_return out;  // Stopped by the caller: the connection is not reusable.
          }
        } else if (out.body.size() + got > limit) {
          // Dropped with the connection at once (never buffered past the bound) and never
          // retried: the same request would bring the same body.
          out.err = fail(base::errc::response_too_large,
                         "the response to " + std::string(http::to_string(msg.method())) + " " +
                             std::string(msg.target()) + " from " + endpoint_ + " is larger than " +
                             std::to_string(limit) + " bytes");
          co_return out;
        } else {
          out.body.append(piece.data(), got);
        }
      }
      if (rec) {
        out.err =
            transport_error(rec, *fired, streaming ? "streaming from" : "reading a response from",
                            streaming ? idle_timeout : opts_.request_timeout);
        co_return out;
      }
    }
    out.reusable = parser.keep_alive();
    co_return out;
  }

private:
  error transport_error(const boost::system::error_code& ec, bool timed_out,
                        std::string_view during, std::chrono::nanoseconds limit) const {
    if (timed_out) {
      return fail(base::errc::timeout,
                  std::string(during) + " " + endpoint_ + ": no progress within " + millis(limit));
    }
    return fail(base::errc::connection_failed,
                std::string(during) + " " + endpoint_ + ": " + ec.message());
  }

  asio::any_io_executor ex_;
  base::alarm_clock& clock_;
  const rest_config& config_;
  const client_options& opts_;
  std::string endpoint_;
};

/// One warning when a streak of 429 answers begins and one line when it ends, whatever the
/// request (issue 29).
class throttling_log {
public:
  explicit throttling_log(std::string endpoint) : endpoint_(std::move(endpoint)) {}

  /// `status` answered `req` at `now`.
  void note(const request& req, unsigned status, steady::time_point now) {
    if (status == 429) {
      if (answers_++ == 0) {
        since_ = now;
        client_log()->warn(
            "429 Too Many Requests from {} for {} {}: the API server is throttling this client "
            "(API Priority and Fairness or --max-requests-inflight); requests are retried after "
            "Retry-After or backed off; one more line when it stops",
            endpoint_, std::string(http::to_string(req.method)), req.target);
      }
      return;
    }
    if (answers_ > 0) {
      client_log()->info("{} stopped throttling this client: {} answers 429 in {}", endpoint_,
                         answers_, millis(now - since_));
      answers_ = 0;
    }
  }

private:
  std::string endpoint_;
  std::uint64_t answers_ = 0;  // in the current streak
  steady::time_point since_{};
};

}  // namespace

struct client::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor executor, rest_config config, client_options options)
      : ex_(std::move(executor)),
        config_(std::move(config)),
        opts_(with_clock(std::move(options))),
        clock_(opts_.clock),
        endpoint_(endpoint_of(config_)),
        throttling_(endpoint_),
        dialer_(ex_, *clock_, config_, opts_),
        exchange_(ex_, *clock_, config_, opts_),
        pool_(
            ex_, *clock_,
            {opts_.max_connections, opts_.initial_plain_window, opts_.idle_connection_timeout},
            [this](connection& c) { return dialer_.open(c); }, stopping_,
            [this] { return shutting_down_error(); }, [this] { return no_free_connection(); }) {
    if (opts_.qps > 0) {
      limiter_.emplace(opts_.qps, static_cast<double>(opts_.burst), clock_->now());
    }
    if (!config_.bearer_token.empty() || !config_.token_file.empty()) {
      tokens_ = std::make_unique<token_source>(config_.bearer_token, config_.token_file,
                                               opts_.token_refresh_period);
    }
  }

  /// The clock defaulted and a pool of at least one.
  static client_options with_clock(client_options opts) {
    if (opts.max_connections == 0) {
      opts.max_connections = 1;
    }
    if (!opts.clock) {
      opts.clock = async::real_alarm_clock();
    }
    return opts;
  }

  error shutting_down_error() const {
    return fail(base::errc::shutting_down, "client to " + endpoint_ + " is shutting down");
  }

  static error cancelled_error() {
    return fail(base::errc::cancelled, "the request was cancelled before it was sent");
  }

  [[nodiscard]] error no_free_connection() const {
    return fail(base::errc::timeout, "no free connection to " + endpoint_ +
                                         " within the request timeout (pool of " +
                                         std::to_string(opts_.max_connections) + ")");
  }

  error past_deadline_error(const request& req) const {
    return fail(base::errc::timeout, std::string(http::to_string(req.method)) + " " + req.target +
                                         " to " + endpoint_ + " was not complete by its deadline");
  }

  static bool withdrawn(const request& req) { return req.cancelled && req.cancelled(); }

  /// Takes a token of the QPS limit: how long to wait before sending (it is spent either way).
  std::chrono::nanoseconds reserve_token() {
    return limiter_ ? limiter_->reserve(clock_->now()) : std::chrono::nanoseconds::zero();
  }

  /// The wait actually slept for a wait of `wanted` (the test seam, when set).
  [[nodiscard]] std::chrono::nanoseconds delay(wait_reason why,
                                               std::chrono::nanoseconds wanted) const {
    return opts_.delay ? opts_.delay(why, wanted) : wanted;
  }

  /// Sleeps `d` on the clock unless shut down; false when the client is shutting down.
  asio::awaitable<bool> sleep_for(std::chrono::nanoseconds d) {
    if (d > std::chrono::nanoseconds::zero()) {
      asio::steady_timer timer(ex_, steady::time_point::max());
      auto ring = clock_->at(ex_, clock_->now() + std::chrono::duration_cast<steady::duration>(d),
                             [&timer] { timer.cancel(); });
      sleepers_.insert(&timer);
      co_await timer.async_wait(use_tuple);
      sleepers_.erase(&timer);
    }
    co_return !stopping_;
  }

  // ---- the request loop -----------------------------------------------------------------

  asio::awaitable<std::optional<base::result<response>>> run(
      request req, body_sink sink, std::chrono::milliseconds idle_timeout) {
    auto self = shared_from_this();
    co_return co_await run_inner(std::move(req), sink ? &sink : nullptr, idle_timeout);
  }

  asio::awaitable<base::result<response>> run_inner(request req, const body_sink* sink,
                                                    std::chrono::milliseconds idle_timeout) {
    if (const auto& bad = dialer_.config_error()) {
      co_return *bad;
    }
    int retries = 0;
    bool auth_retried = false;
    // Made on the first network error only: most requests are never resent, and seeding
    // costs a read from std::random_device.
    std::optional<base::backoff> network_backoff;
    if (tracing()) {
      client_log()->trace("stage=request {} {} t_us={}", std::string(http::to_string(req.method)),
                          req.target, trace_us());
    }
    for (;;) {
      if (stopping_) {
        co_return shutting_down_error();
      }
      if (!co_await sleep_for(delay(wait_reason::rate_limit, reserve_token()))) {
        co_return shutting_down_error();
      }
      if (withdrawn(req)) {
        co_return cancelled_error();
      }
      if (clock_->now() >= req.deadline) {
        co_return past_deadline_error(req);
      }
      exec_authenticator::snapshot exec_used;
      auto credential = co_await token_for_try(exec_used);
      if (!credential) {
        co_return credential.error();
      }
      const std::string token = std::move(credential).value();
      auto tried = co_await send_once(req, token, sink, idle_timeout);
      auto& out = tried.exchange;
      if (!tried.sent) {
        co_return std::move(out.err);
      }
      if (out.err) {
        if (stopping_) {
          co_return shutting_down_error();
        }
        if (replayable(req, tried) && retries < opts_.max_retries) {
          ++retries;
          if (!network_backoff) {
            network_backoff.emplace(opts_.network_retry_backoff, *clock_);
          }
          const auto wait = delay(wait_reason::network_retry, network_backoff->next());
          client_log()->debug("{} {}: retrying in {} after a network error ({}/{}): {}",
                              std::string(http::to_string(req.method)), req.target, millis(wait),
                              retries, opts_.max_retries, out.err.message);
          if (!co_await sleep_for(wait)) {
            co_return shutting_down_error();
          }
          continue;
        }
        co_return std::move(out.err);
      }

      if (out.status == 401 && exec_ && !auth_retried) {
        // client-go's exec authenticator forgets the credential at a 401 and runs the plugin
        // again; one run for a burst of 401s to the same credential (rejected() counts it).
        auth_retried = true;
        exec_->rejected(exec_used.generation);
        auto fresh = co_await exec_credential();
        if (fresh && !fresh->credential->same_secret(*exec_used.credential)) {
          client_log()->info("401 from {}: the exec plugin gave a new credential, retrying",
                             endpoint_);
          continue;
        }
      }
      if (out.status == 401 && tokens_ && !config_.token_file.empty() && !auth_retried) {
        auth_retried = true;
        if (token_file_changed(token)) {
          continue;
        }
      }

      const bool retry_status = out.status == 429 || out.status >= 500;
      if (retry_status && out.retry_after && retries < opts_.max_retries) {
        ++retries;
        const auto wait = delay(wait_reason::retry_after,
                                retry_after_wait(*out.retry_after, opts_.request_timeout));
        client_log()->debug("{} {}: status {}, retrying in {} ({}/{})",
                            std::string(http::to_string(req.method)), req.target, out.status,
                            millis(wait), retries, opts_.max_retries);
        if (!co_await sleep_for(wait)) {
          co_return shutting_down_error();
        }
        continue;
      }
      co_return response{out.status, std::move(out.body)};
    }
  }

  /// The bearer token for one try: the exec plugin's credential (its snapshot into `used`),
  /// the token file's, or none (empty).
  asio::awaitable<base::result<std::string>> token_for_try(exec_authenticator::snapshot& used) {
    if (exec_) {
      auto credential = co_await exec_credential();
      if (!credential) {
        co_return credential.error();
      }
      used = std::move(credential).value();
      note_exec_generation(used);
      co_return used.credential->token;
    }
    if (tokens_) {
      auto current = tokens_->current();
      if (!current) {
        co_return current.error();
      }
      co_return std::move(current.value());
    }
    co_return std::string();
  }

  /// After a 401 to `token` from the token file: whether the file now holds another token (it
  /// is read again), to retry with.
  bool token_file_changed(const std::string& token) {
    tokens_->invalidate();
    auto fresh = tokens_->current();
    if (!fresh || fresh.value() == token) {
      return false;
    }
    client_log()->info("401 from {}: the token file changed, retrying with the new token",
                       endpoint_);
    return true;
  }

  /// A credential of the exec plugin valid now: at once when one is cached, else after the run
  /// the authenticator starts on its own thread (this coroutine waits without blocking the
  /// executor; shutdown() ends the wait). The run's error when it fails.
  asio::awaitable<base::result<exec_authenticator::snapshot>> exec_credential() {
    for (int waits = 0;; ++waits) {
      auto now = exec_->current();
      if (!now) {
        co_return now.error();
      }
      if (now.value()) {
        co_return std::move(*now.value());
      }
      if (stopping_) {
        co_return shutting_down_error();
      }
      if (waits == 3) {  // each run ended, and another was started: give up for this request
        co_return fail(errc::config_invalid,
                       exec_->config().source + ": the exec plugin gave no usable credential");
      }
      auto timer = std::make_shared<asio::steady_timer>(ex_, steady::time_point::max());
      sleepers_.insert(timer.get());
      exec_->when_refreshed([timer, ex = ex_] { asio::post(ex, [timer] { timer->cancel(); }); });
      co_await timer->async_wait(use_tuple);
      sleepers_.erase(timer.get());
      if (stopping_) {
        co_return shutting_down_error();
      }
    }
  }

  /// A credential newer than any seen: idle connections that present a client certificate it
  /// replaced are closed (client-go closes its connections when the certificate rotates).
  void note_exec_generation(const exec_authenticator::snapshot& used) {
    if (used.generation <= exec_generation_seen_) {
      return;
    }
    const bool had = exec_generation_seen_ != 0;
    exec_generation_seen_ = used.generation;
    if (had && !used.credential->client_cert_pem.empty()) {
      pool_.close_idle();
    }
  }

  /// One try of `req` with `token`: a pooled or new connection, the exchange on it under the
  /// request's own deadline, the connection given back and the request observed. `sent` is
  /// false when no exchange happened (no connection, or the request was withdrawn meanwhile):
  /// its error is then final.
  asio::awaitable<try_outcome> send_once(const request& req, const std::string& token,
                                         const body_sink* sink,
                                         std::chrono::milliseconds idle_timeout) {
    try_outcome tried;
    auto msg = exchange_.build(req, token);

    const auto start = clock_->now();
    std::optional<detail::connection_pool::unanswered_mark> unanswered;
    if (!req.background && sink == nullptr) {
      unanswered.emplace(pool_);
    }
    auto acquired = co_await pool_.acquire(start + opts_.request_timeout, req.background,
                                           !req.background && sink == nullptr);
    if (!acquired) {
      observe(req.method, 0, start);
      tried.exchange.err = acquired.error();
      co_return tried;
    }
    std::unique_ptr<connection> conn = std::move(acquired.value());
    if (withdrawn(req)) {
      pool_.release(std::move(conn), true);
      tried.exchange.err = cancelled_error();
      co_return tried;
    }
    tried.sent = true;
    tried.reused = conn->exchanges > 0;
    const bool reused = tried.reused;
    if (tracing()) {
      client_log()->trace("stage=acquired {} {} conn=#{} reused={} idle_ms={} t_us={}",
                          std::string(http::to_string(req.method)), req.target, conn->id, reused,
                          reused ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                       clock_->now() - conn->idle_since)
                                       .count()
                                 : 0,
                          trace_us());
    }
    // The request's own deadline closes the connection, as the other deadlines do.
    std::unique_ptr<base::alarm_clock::alarm> whole;
    auto past_deadline = std::make_shared<bool>(false);
    if (req.deadline != steady::time_point::max()) {
      whole = close_at(*clock_, ex_, *conn, req.deadline, past_deadline);
    }
    // Not a ?: with two co_awaits: GCC 12 miscompiles that (double destruction).
    auto& out = tried.exchange;
    if (conn->custom) {
      detail::byte_stream_ref custom(*conn->custom);
      out = co_await exchange_.run(custom, *conn, msg, sink, idle_timeout);
    } else if (conn->tls) {
      out = co_await exchange_.run(*conn->tls, *conn, msg, sink, idle_timeout);
    } else {
      out = co_await exchange_.run(*conn->plain, *conn, msg, sink, idle_timeout);
    }
    whole.reset();
    tried.past_deadline = *past_deadline;
    if (*past_deadline && out.err) {
      out.err = past_deadline_error(req);
    }
    const bool reusable = !out.err && out.reusable && dialer_.current(*conn);
    unanswered.reset();
    if (tracing() && !sink) {
      client_log()->trace("stage=done {} {} conn=#{} status={} t_us={}",
                          std::string(http::to_string(req.method)), req.target, conn->id,
                          out.status, trace_us());
    }
    pool_.release(std::move(conn), reusable);
    observe(req.method, out.err ? 0 : out.status, start);
    if (!out.err) {
      throttling_.note(req, out.status, clock_->now());
    }
    co_return tried;
  }

  void observe(http::verb verb, unsigned status, steady::time_point start) const {
    if (opts_.observer) {
      opts_.observer(verb, status, clock_->now() - start);
    }
  }

  void do_shutdown() {
    stopping_ = true;
    for (auto* t : sleepers_) {
      t->cancel();
    }
    pool_.stop();
  }

  asio::any_io_executor ex_;
  rest_config config_;
  client_options opts_;
  std::shared_ptr<base::alarm_clock> clock_;
  std::string endpoint_;  ///< host:port
  /// The QPS limit (client-go's token-bucket rate limiter); none when qps <= 0.
  std::optional<base::token_bucket> limiter_;
  std::unique_ptr<token_source> tokens_;
  std::shared_ptr<exec_authenticator> exec_ = config_.exec;
  std::uint64_t exec_generation_seen_ = 0;  ///< The newest exec credential a request used.
  std::atomic<bool> stopping_{false};
  std::set<asio::steady_timer*> sleepers_;
  throttling_log throttling_;
  dialer dialer_;
  http_exchange exchange_;
  // Last: it refers to ex_, clock_, stopping_ and dialer_.
  detail::connection_pool pool_;
};

client::client(asio::any_io_executor executor, rest_config config, client_options options)
    : impl_(std::make_shared<impl>(std::move(executor), std::move(config), std::move(options))) {}

client::~client() {
  shutdown();
}

asio::awaitable<base::result<response>> client::send(request req) {
  // Hop onto the client's executor: the pool and limiter are only touched there.
  auto out =
      co_await asio::co_spawn(impl_->ex_, impl_->run(std::move(req), {}, {}), asio::use_awaitable);
  co_return std::move(*out);
}

asio::awaitable<base::result<response>> client::stream(request req, body_sink sink,
                                                       std::chrono::milliseconds idle_timeout) {
  if (!sink) {
    co_return fail(base::errc::config_invalid, "stream() needs a body sink");
  }
  auto out = co_await asio::co_spawn(
      impl_->ex_, impl_->run(std::move(req), std::move(sink), idle_timeout), asio::use_awaitable);
  co_return std::move(*out);
}

void client::shutdown() {
  impl_->stopping_ = true;
  asio::post(impl_->ex_, [self = impl_] { self->do_shutdown(); });
}

base::alarm_clock& client::clock() const noexcept {
  return *impl_->clock_;
}

}  // namespace tec::k8sclient
