#pragma once

// The daemon's own small HTTP/1.1 server for /metrics, /healthz, /readyz, the /debug
// documents and the admission webhook's POSTs (Boost.Beast, one coroutine per connection), over
// plain TCP or TLS (tls_credentials), optionally asking a request_authorizer before each
// request.
//
// It faces the pod network, so every connection is bounded: a kept-alive connection may idle
// for read_timeout; once a request's first byte is in, its headers must follow within
// header_timeout (slowloris) and the whole request within read_timeout of the wait's start; a
// response must be written within write_timeout; headers and bodies have size limits. At most
// max_connections are open at once, and a full server makes room for a new connection by
// closing one that has sent nothing (the one idle for the longest), else the oldest with an
// incomplete request, else the oldest: idle or trickling connections cannot starve a kubelet
// probe (a server that refused new connections when full answered nothing to /healthz while
// 64 idle connections were open), and a probe whose request is in is closed last, even before
// the server has read its first byte (issue 29: a flood of idle connections closed 5.6% of
// the probes' own connections).
//
// The documents of async handlers (/debug/evictions: a few MB) are bounded in memory however
// many clients ask and however slowly they read (issue 29: 64 clients that asked and never
// read added 149 MB, a copy each, in the heap or the kernel's send buffers):
// - a request that arrives while its path's document is computed, or within
//   async_response_reuse of it while a connection still writes it, gets that document,
//   shared, not copied;
// - at most max_async_responses are computed or written at once; beyond, 503 with
//   Retry-After: 1;
// - a connection writing one has a small kernel send buffer (64 KiB), so the shared copy is
//   the only whole one, and write_timeout drops a reader that does not take it in time.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tec/base/result.hpp"
#include "tec/serving/request_authorizer.hpp"

namespace tec::serving {

class tls_credentials;

struct http_endpoints_options {
  /// Where to listen: ":8080" (all interfaces, IPv6 and IPv4 when the host has IPv6),
  /// "127.0.0.1:8080", "[::1]:8080", "localhost:8080"; port 0 picks a free port; "0" disables
  /// the server.
  std::string bind_address = "0";
  /// Time to receive one whole request, from when the server starts waiting for it (also the
  /// idle timeout of a kept-alive connection).
  std::chrono::milliseconds read_timeout{10'000};
  /// Time from the first byte of a request to the end of its headers (a kubelet probe sends
  /// them in one packet; a client trickling header bytes is cut off after this).
  std::chrono::milliseconds header_timeout{3'000};
  /// Time to send one whole response.
  std::chrono::milliseconds write_timeout{10'000};
  /// Request line plus headers.
  std::uint32_t header_limit = 8 * 1024;
  /// Request bodies (GET and HEAD need none; a handle_post() route has its own limit).
  std::uint64_t body_limit = 1024;
  /// Connections open at once. A new one beyond this closes the connection idle for the
  /// longest that has sent nothing, else the oldest with an incomplete request, else the
  /// oldest.
  std::size_t max_connections = 64;
  /// Responses of async handlers (handle_async) computed or written at once, over all their
  /// paths; a request beyond gets 503 with Retry-After. Each may hold a document of a few MB
  /// until written (or write_timeout), and each computation takes a thread for tens of ms.
  std::size_t max_async_responses = 2;
  /// How long an async handler's response is served again to requests for the same path,
  /// while a connection still writes it (it is never kept beyond that). Requests that arrive
  /// while it is computed share it in any case.
  std::chrono::milliseconds async_response_reuse{1'000};
  /// HTTPS with the certificate it holds at each new connection (nullptr: plain HTTP). The TLS
  /// handshake counts as the start of the first request: it waits up to read_timeout for the
  /// client's first byte, then must end within header_timeout.
  std::shared_ptr<tls_credentials> tls = nullptr;
  /// Asked before every request is routed, whatever its path (nullptr: none), except a POST
  /// to a route handle_post() marked unauthenticated: 401 (with WWW-Authenticate: Bearer), 403
  /// or 503 unless it allows. Requests that do not parse are refused before it is asked.
  std::shared_ptr<request_authorizer> authorizer = nullptr;
};

/// What a handler answers. HEAD requests get the same status and headers without the body.
struct http_response {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

/// A POST route's own bounds (handle_post).
struct post_route_options {
  /// Its request bodies (instead of http_endpoints_options::body_limit).
  std::uint64_t body_limit = 1024;
  /// The whole request, from its first byte (within read_timeout of the wait's start too).
  std::chrono::milliseconds timeout{10'000};
  /// Served without asking http_endpoints_options::authorizer: for a caller that sends no
  /// credentials (the API server calling an admission webhook).
  bool unauthenticated = false;
};

/// A health or readiness check: ok, or not ok with a reason an operator can act on (e.g. the
/// last LIST error). The response carries at most max_check_reason bytes of it, control
/// characters escaped (\xNN): the reason may quote what an API server answered.
struct check_result {
  bool ok = true;
  std::string message;
};

/// The longest reason a failed check's response carries (kubelet reads 10 KiB of a probe's
/// body); longer ones end with "... (N more bytes)".
inline constexpr std::size_t max_check_reason = 1024;

/// Parses a bind address (see http_endpoints_options::bind_address). nullopt means disabled.
/// Host names other than "localhost" are not resolved: an IP literal is expected.
base::result<std::optional<boost::asio::ip::tcp::endpoint>> parse_bind_address(
    std::string_view address);

/// The HTTP server.
///
/// Thread/ownership: handlers are registered before start(), from one thread. start() and
/// stop() may be called from any thread; the server's coroutines run on a strand of
/// `executor`, and handlers and checks are called there, so they must be quick, must not
/// block, and must be safe to call concurrently with the rest of the program (read atomics
/// or take short locks). The server's state is shared with its coroutines: destroying the
/// object stops it, and the coroutines finish on the executor, whose execution context must
/// outlive the object.
class http_endpoints {
public:
  http_endpoints(const boost::asio::any_io_executor& executor, http_endpoints_options options);
  ~http_endpoints();
  http_endpoints(const http_endpoints&) = delete;
  http_endpoints& operator=(const http_endpoints&) = delete;

  /// Serves `fn()` at `path` (exact match, query string ignored) for GET and HEAD.
  void handle(std::string path, std::function<http_response()> fn);
  /// Serves the result of awaiting `fn()` at `path`, as handle() does. For a costly response:
  /// the connection's coroutine awaits it (on the server's strand) while the work runs where
  /// the awaitable puts it (e.g. co_spawn onto another executor), so the executor the server
  /// shares with the rest of the program stays free. An exception it throws is a 500. After
  /// stop(), a response still being computed is dropped with its connection. The response is
  /// shared between concurrent requests and their number capped (see the file comment and
  /// max_async_responses, async_response_reuse): one call of `fn` may answer many requests.
  void handle_async(std::string path, std::function<boost::asio::awaitable<http_response>()> fn);
  /// Serves `fn(body)` at `path` (exact match, query string ignored) for POST, under `limits`
  /// (a body over its limit gets 413 before it is read). Called on the server's strand, as
  /// handle()'s handlers: it must be quick. A GET or HEAD of the path gets 405.
  void handle_post(std::string path, post_route_options limits,
                   std::function<http_response(std::string_view body)> fn);
  /// handle_async() for a document that depends on the request's query string (`fn` is given
  /// it, without the '?', as the client sent it): a document is shared only between requests
  /// with the same query string.
  void handle_async_query(
      std::string path, std::function<boost::asio::awaitable<http_response>(std::string query)> fn);
  /// Serves a check at `path`: 200 "ok", or 500 with the check's message when it fails (or
  /// throws), bounded and escaped (see check_result); "readyz check failed" (for "/readyz") when it
  /// gave none.
  void handle_check(std::string path, std::function<check_result()> check);

  /// Binds, listens and starts accepting. Returns the bound endpoint (with the real port
  /// when 0 was asked for), nullopt when the bind address disables the server, or an error
  /// (invalid address, bind failure). Call once.
  base::result<std::optional<boost::asio::ip::tcp::endpoint>> start();

  /// Stops accepting and closes every connection; a response being written is abandoned.
  /// No handler is called once stop() has returned, except one already running on another
  /// thread of the executor (a request still in flight gets 503).
  /// Returns at once; the coroutines end on the executor shortly after, leaving it no work.
  /// Idempotent.
  void stop();

  /// Tests: connections currently open.
  [[nodiscard]] std::size_t connections_for_test() const;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace tec::serving
