#include "tec/serving/http_endpoints.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_generator.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/message_generator.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cassert>
#include <cctype>
#include <charconv>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "tec/base/logger.hpp"
#include "tec/serving/tls_credentials.hpp"

// GCC 12 reports a false -Wmismatched-new-delete on Asio's awaitable frame allocator for the
// session coroutine (as in informer.cpp: the operator new/delete pair is matched). Only this
// diagnostic, only this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace tec::serving {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const std::shared_ptr<spdlog::logger> log = base::named_logger("http");
  return log;
}

constexpr std::string_view server_name = "taint-eviction-controller";

// A handler's exception: logged, and answered with a 500.
http_response handler_failed(std::string_view path, const std::exception& e) {
  logger()->error("handler for {} threw: {}", path, e.what());
  return {.status = 500, .body = std::string("internal error: ") + e.what() + "\n"};
}

// An async route's fn(query), or handler_failed()'s 500 when it throws.
asio::awaitable<http_response> run_async(
    std::string_view path, const std::function<asio::awaitable<http_response>(std::string)>& fn,
    std::string query) {
  http_response r;
  try {
    auto op = fn(std::move(query));  // named: see session() on GCC 12
    r = co_await std::move(op);
  } catch (const std::exception& e) {
    r = handler_failed(path, e);
  }
  co_return r;
}

bool is_http_parse_error(const beast::error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::bad_method).category();
}

// A body shared with other responses (an async handler's document, written to every
// connection that asked for it) and kept alive by the message: never copied.
struct shared_string_body {
  using value_type = std::shared_ptr<const std::string>;

  static std::uint64_t size(const value_type& body) { return body ? body->size() : 0; }

  class writer {
  public:
    using const_buffers_type = asio::const_buffer;

    template <bool is_request, class Fields>
    writer(const http::header<is_request, Fields>& /*header*/, const value_type& body)
        : body_(body) {}

    void init(beast::error_code& ec) { ec = {}; }

    boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
      ec = {};
      if (done_ || !body_) {
        return boost::none;
      }
      done_ = true;
      return {{const_buffers_type(body_->data(), body_->size()), false}};
    }

  private:
    const value_type& body_;
    bool done_ = false;
  };
};

// Extra headers of some responses.
struct response_headers {
  std::string_view allow;             // 405
  std::string_view retry_after;       // 503 of a full server
  std::string_view www_authenticate;  // 401
};

http::message_generator make_response(unsigned version, bool keep_alive, bool head,
                                      const std::shared_ptr<const http_response>& r,
                                      response_headers extra = {}) {
  http::response<shared_string_body> res{static_cast<http::status>(r->status), version};
  res.set(http::field::server, server_name);
  res.set(http::field::content_type, r->content_type);
  res.set(http::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  if (!extra.allow.empty()) {
    res.set(http::field::allow, extra.allow);
  }
  if (!extra.retry_after.empty()) {
    res.set(http::field::retry_after, extra.retry_after);
  }
  if (!extra.www_authenticate.empty()) {
    res.set(http::field::www_authenticate, extra.www_authenticate);
  }
  res.keep_alive(keep_alive);
  if (head) {
    http::response<http::empty_body> empty{std::move(res.base())};
    empty.content_length(r->body.size());
    return http::message_generator{std::move(empty)};
  }
  res.body() = std::shared_ptr<const std::string>(r, &r->body);  // shares r's ownership
  res.prepare_payload();
  return http::message_generator{std::move(res)};
}

http::message_generator make_response(unsigned version, bool keep_alive, bool head, http_response r,
                                      response_headers extra = {}) {
  return make_response(version, keep_alive, head,
                       std::make_shared<const http_response>(std::move(r)), extra);
}

/// The 503 to `req` while `serving` documents (max_async_responses) are being served.
http::message_generator too_many_documents(const http::request<http::string_body>& req,
                                           std::size_t serving) {
  logger()->debug("{} documents being served: answering 503 to {}", serving,
                  std::string_view(req.target()));
  return make_response(
      req.version(), req.keep_alive(), req.method() == http::verb::head,
      http_response{.status = 503,
                    .body = "too many requests for documents at once, retry later\n"},
      {.allow = {}, .retry_after = "1", .www_authenticate = {}});
}

// The kernel send buffer of a connection that writes an async handler's document: the
// document is shared in the heap, so a reader that never reads holds this much more, not a
// copy of up to tcp_wmem's 4 MB (Linux doubles the value for its bookkeeping).
constexpr int document_send_buffer = 64 * 1024;

// A failed check's reason as its response carries it: control characters escaped, at most
// max_check_reason bytes (then how many were left out).
std::string bounded_reason(std::string_view reason) {
  std::string out;
  std::size_t used = 0;
  for (; used < reason.size() && out.size() < max_check_reason; ++used) {
    const auto c = static_cast<unsigned char>(reason[used]);
    if (c < 0x20 || c == 0x7f) {
      constexpr std::string_view hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (used < reason.size()) {
    out += "... (" + std::to_string(reason.size() - used) + " more bytes)";
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

base::result<std::optional<tcp::endpoint>> parse_bind_address(std::string_view address) {
  if (address == "0") {
    return std::optional<tcp::endpoint>{};
  }
  const auto bad = [&](std::string_view why) {
    return base::make_error(
        base::errc::config_invalid,
        "invalid bind address '" + std::string(address) + "': " + std::string(why) +
            " (expected [host]:port, e.g. :8080 or 127.0.0.1:8080, or 0 to disable)");
  };
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return bad("no port");
  }
  const auto host = address.substr(0, colon);
  const auto port_text = address.substr(colon + 1);
  std::uint16_t port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc{} || end != port_text.data() + port_text.size()) {
    return bad("the port is not a number from 0 to 65535");
  }
  if (host.empty()) {
    // All interfaces: start() makes this dual-stack, or falls back to 0.0.0.0 without IPv6.
    return std::optional<tcp::endpoint>{tcp::endpoint{asio::ip::address_v6::any(), port}};
  }
  if (host == "localhost") {
    return std::optional<tcp::endpoint>{tcp::endpoint{asio::ip::address_v4::loopback(), port}};
  }
  boost::system::error_code aec;
  asio::ip::address addr;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    addr = asio::ip::make_address_v6(std::string(host.substr(1, host.size() - 2)), aec);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("an IPv6 address must be in brackets, e.g. [::1]:8080");
  } else {
    addr = asio::ip::make_address_v4(std::string(host), aec);
  }
  if (aec) {
    return bad("the host is not an IP address");
  }
  return std::optional<tcp::endpoint>{tcp::endpoint{addr, port}};
}

// ---------------------------------------------------------------------------------------------

struct http_endpoints::impl {
  impl(const asio::any_io_executor& ex, http_endpoints_options o)
      : strand(asio::make_strand(ex)), options(std::move(o)), acceptor(strand) {}

  enum class phase {
    idle,     // waiting for the first byte of a request (a new or kept-alive connection)
    reading,  // the rest of the request
    serving,  // the request is in: computing or writing the response
  };

  struct session_entry {
    beast::tcp_stream* stream = nullptr;
    phase state = phase::idle;
    std::chrono::steady_clock::time_point since{};  // of `state`
  };
  struct registration;

  /// One async handler's document being computed: the requests that arrive meanwhile wait
  /// for it on `done`, which is cancelled once `result` is set.
  struct computation {
    explicit computation(const asio::strand<asio::any_io_executor>& strand)
        : done(strand, std::chrono::steady_clock::time_point::max()) {}
    asio::steady_timer done;
    std::shared_ptr<const http_response> result;
  };

  struct post_route {
    post_route_options limits;
    std::function<http_response(std::string_view)> fn;
  };

  struct async_route {
    std::string path;  // set before start
    // Set before start; handle_async's ignores the query (given "").
    std::function<asio::awaitable<http_response>(std::string)> fn;
    bool with_query = false;  // handle_async_query: documents are shared per query string
    // On the strand only:
    std::weak_ptr<const http_response> last;  // the latest document, while a connection has it
    std::chrono::steady_clock::time_point last_at{};
    std::string last_query;
    std::shared_ptr<computation> computing;  // while fn() runs
    std::string computing_query;
  };

  /// Holds one of max_async_responses from the request to the end of its response's write.
  class async_slot {
  public:
    explicit async_slot(impl& owner) : owner_(owner) { ++owner_.async_responses; }
    ~async_slot() { --owner_.async_responses; }
    async_slot(const async_slot&) = delete;
    async_slot& operator=(const async_slot&) = delete;

  private:
    impl& owner_;
  };

  static asio::awaitable<void> accept_loop(std::shared_ptr<impl> self);
  static asio::awaitable<void> session(std::shared_ptr<impl> self, tcp::socket socket);
  /// One connection's requests, over plain TCP or TLS (Stream).
  template <class Stream>
  static asio::awaitable<void> serve(std::shared_ptr<impl> self, Stream& stream);
  /// The TLS handshake of session `id`: idle until the client's first byte (read_timeout),
  /// then the handshake within header_timeout. False: the connection is to be closed.
  static asio::awaitable<bool> handshake(impl& self, std::uint64_t id,
                                         beast::ssl_stream<beast::tcp_stream>& stream,
                                         beast::flat_buffer& buffer);
  /// Reads the next request of session `id` into `parser` under the read, header and body
  /// deadlines; the error (end of stream, a timeout, a parse error) ends the connection.
  template <class Stream>
  static asio::awaitable<boost::system::error_code> read_request(
      impl& self, std::uint64_t id, Stream& stream, beast::flat_buffer& buffer,
      http::request_parser<http::string_body>& parser);
  /// Says why a malformed or oversized request is refused (best effort, before hanging up).
  template <class Stream>
  static asio::awaitable<void> refuse(const http_endpoints_options& opt, Stream& stream,
                                      boost::system::error_code ec);
  /// The refusal of `req` when options.authorizer decided `d` for it; nullopt when allowed.
  std::optional<http::message_generator> refusal(const auth_decision& d,
                                                 const http::request<http::string_body>& req) const;
  /// Records what session `id` does now, for make_room(); nothing once make_room() closed it.
  void set_phase(std::uint64_t id, phase p);
  /// The document of `route`: the one a connection still writes if it is recent enough, else
  /// the one being computed, else a new one. On the strand.
  static asio::awaitable<std::shared_ptr<const http_response>> shared_response(
      std::shared_ptr<impl> self, async_route& route, std::string query);
  /// The response to `req`; `computed` is what an async handler answered for it.
  http::message_generator respond(const http::request<http::string_body>& req,
                                  const std::shared_ptr<const http_response>& computed = {}) const;
  /// The POST route `req` asks for, or null.
  [[nodiscard]] const post_route* post_route_for(const http::request<http::string_body>& req) const;
  /// The async route `req` asks for, or null (another path or method, or stopped).
  async_route* async_route_for(const http::request<http::string_body>& req);
  void make_room();
  void close_all();

  asio::strand<asio::any_io_executor> strand;
  const http_endpoints_options options;
  std::map<std::string, std::function<http_response()>, std::less<>> handlers;  // set before start
  std::map<std::string, async_route, std::less<>> async_routes;                 // set before start
  std::map<std::string, post_route, std::less<>> post_routes;                   // set before start
  std::uint64_t largest_body_limit = 0;  // over options and post_routes; set by start()
  std::atomic<bool> started{false};
  std::atomic<bool> stopped{false};
  std::atomic<std::size_t> open_connections{0};
  // On the strand only:
  tcp::acceptor acceptor;
  std::map<std::uint64_t, session_entry> sessions;  // by id: the first is the oldest
  std::uint64_t next_session = 0;
  std::size_t async_responses = 0;  // async_slots held
};

namespace {

void log_coroutine_exception(const std::exception_ptr& ep, const char* what) {
  if (!ep) {
    return;
  }
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    logger()->error("{} ended with an exception: {}", what, e.what());
  }
}

}  // namespace

asio::awaitable<void> http_endpoints::impl::accept_loop(std::shared_ptr<impl> self) {
  asio::steady_timer backoff(self->strand);
  while (!self->stopped) {
    auto [ec, socket] = co_await self->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (self->stopped || ec == asio::error::operation_aborted) {
      break;
    }
    if (ec) {
      // E.g. out of file descriptors: do not spin; the listening socket stays usable.
      logger()->warn("accept failed: {}", ec.message());
      backoff.expires_after(std::chrono::milliseconds(100));
      co_await backoff.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    while (!self->sessions.empty() && self->sessions.size() >= self->options.max_connections) {
      self->make_room();
    }
    asio::co_spawn(self->strand, session(self, std::move(socket)),
                   [](const std::exception_ptr& ep) { log_coroutine_exception(ep, "session"); });
  }
}

namespace {

std::string_view path_of(const http::request<http::string_body>& req) {
  const auto target = std::string_view(req.target());
  return target.substr(0, target.find('?'));
}

// The query string of the request's target, without the '?' ("" when none).
std::string query_of(const http::request<http::string_body>& req) {
  const auto target = std::string_view(req.target());
  const auto q = target.find('?');
  return q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
}

}  // namespace

namespace {

bool visible_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// The token of an "Authorization: Bearer <token>" header (the scheme in any case), else empty.
std::string bearer_token(const http::request<http::string_body>& req) {
  const auto value = std::string_view(req[http::field::authorization]);
  constexpr std::string_view scheme = "bearer ";
  if (value.size() <= scheme.size()) {
    return {};
  }
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != scheme[i]) {
      return {};
    }
  }
  auto token = value.substr(scheme.size());
  const auto first = token.find_first_not_of(' ');
  if (first == std::string_view::npos) {
    return {};
  }
  token = token.substr(first);
  return std::string(token.substr(0, token.find_last_not_of(' ') + 1));
}

}  // namespace

// GCC 12 destroys some resource-owning temporaries of a co_await full-expression twice
// (seen here as a double free of a std::string argument), so operations whose arguments own
// memory are created into a named awaitable first and then awaited.
asio::awaitable<void> http_endpoints::impl::session(std::shared_ptr<impl> self,
                                                    tcp::socket socket) {
  if (self->options.tls) {
    // The connection keeps the context it starts with when the certificate files change.
    const auto context = self->options.tls->current();
    beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), *context);
    auto op = serve(self, stream);  // named: see above on GCC 12
    co_await std::move(op);
  } else {
    beast::tcp_stream stream(std::move(socket));
    auto op = serve(self, stream);
    co_await std::move(op);
  }
}

/// A connection's entry in its server's sessions (open_connections counted) for as long as
/// this lives.
struct http_endpoints::impl::registration {
  impl& owner;
  std::uint64_t id;
  registration(impl& o, std::uint64_t i, beast::tcp_stream* lowest) : owner(o), id(i) {
    owner.sessions.emplace(id, session_entry{lowest}).first->second.since =
        std::chrono::steady_clock::now();
    owner.open_connections = owner.sessions.size();
  }
  registration(const registration&) = delete;
  registration& operator=(const registration&) = delete;
  ~registration() {
    owner.sessions.erase(id);
    owner.open_connections = owner.sessions.size();
  }
};

template <class Stream>
asio::awaitable<void> http_endpoints::impl::serve(std::shared_ptr<impl> self, Stream& stream) {
  auto& lowest = beast::get_lowest_layer(stream);
  const auto id = self->next_session++;
  // Declared after `stream`, so it unregisters before the stream is destroyed.
  const registration reg{*self, id, &lowest};
  if (self->stopped) {  // stop() ran its close_all() before we registered
    co_return;
  }

  const auto& opt = self->options;
  beast::flat_buffer buffer(
      static_cast<std::size_t>(opt.header_limit) +
      static_cast<std::size_t>(std::min<std::uint64_t>(self->largest_body_limit, 1 << 20)) + 1024);
  boost::system::error_code ignored;
  if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
    if (!co_await handshake(*self, id, stream, buffer)) {
      lowest.socket().close(ignored);
      co_return;
    }
  }
  for (;;) {
    http::request_parser<http::string_body> parser;
    auto read = read_request(*self, id, stream, buffer, parser);  // named: see above on GCC 12
    const boost::system::error_code ec = co_await std::move(read);
    if (ec) {
      if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
          ec == asio::error::connection_reset || self->stopped) {
        break;
      }
      if (ec == beast::error::timeout) {
        logger()->debug(
            "closing a connection: no complete request in time (idle {} ms, headers {} ms)",
            opt.read_timeout.count(), opt.header_timeout.count());
        break;
      }
      if (!is_http_parse_error(ec)) {
        break;
      }
      auto refusal = refuse(opt, stream, ec);
      co_await std::move(refusal);
      break;
    }
    self->set_phase(id, phase::serving);
    std::optional<http::message_generator> early;  // a refusal: 400, 401, 403, 503
    const auto* post = self->post_route_for(parser.get());
    if (!visible_ascii(parser.get().target())) {
      // RFC 9112 allows no other byte in a request target; nothing is looked up with it.
      early.emplace(make_response(parser.get().version(), false, false,
                                  http_response{.status = 400, .body = "bad request target\n"}));
    } else if (opt.authorizer && (post == nullptr || !post->limits.unauthenticated)) {
      // An exception of the authorizer ends the connection (logged by the co_spawn).
      boost::system::error_code pec;
      const auto remote = lowest.socket().remote_endpoint(pec);
      auto decide =
          opt.authorizer->authorize(bearer_token(parser.get()), std::string(path_of(parser.get())),
                                    pec ? std::string() : remote.address().to_string());
      const auth_decision d = co_await std::move(decide);  // named: see above on GCC 12
      if (self->stopped) {
        break;
      }
      early = self->refusal(d, parser.get());
    }
    std::shared_ptr<const http_response> computed;
    std::optional<async_slot> slot;  // until the response is written
    if (auto* route = early ? nullptr : self->async_route_for(parser.get()); route != nullptr) {
      if (self->async_responses >= opt.max_async_responses) {
        early.emplace(too_many_documents(parser.get(), self->async_responses));
      } else {
        slot.emplace(*self);
        lowest.socket().set_option(asio::socket_base::send_buffer_size(document_send_buffer),
                                   ignored);
        auto op = shared_response(self, *route,
                                  route->with_query ? query_of(parser.get()) : std::string());
        computed = co_await std::move(op);
        if (self->stopped) {
          break;
        }
      }
    }
    auto res = early ? std::move(*early) : self->respond(parser.get(), computed);
    const bool keep_alive = res.keep_alive();
    lowest.expires_after(opt.write_timeout);
    auto write = beast::async_write(stream, std::move(res), asio::as_tuple(asio::use_awaitable));
    auto [wec, written] = co_await std::move(write);
    if (wec || !keep_alive || self->stopped) {
      break;
    }
  }
  lowest.socket().shutdown(tcp::socket::shutdown_send, ignored);
  lowest.socket().close(ignored);
}

asio::awaitable<bool> http_endpoints::impl::handshake(impl& self, std::uint64_t id,
                                                      beast::ssl_stream<beast::tcp_stream>& stream,
                                                      beast::flat_buffer& buffer) {
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_after(self.options.read_timeout);
  auto [ec, n] =
      co_await lowest.async_read_some(buffer.prepare(512), asio::as_tuple(asio::use_awaitable));
  buffer.commit(n);
  if (ec) {
    co_return false;
  }
  self.set_phase(id, phase::reading);
  lowest.expires_after(self.options.header_timeout);
  auto [hec, used] = co_await stream.async_handshake(asio::ssl::stream_base::server, buffer.data(),
                                                     asio::as_tuple(asio::use_awaitable));
  if (hec) {
    logger()->debug("closing a connection: TLS handshake failed: {}", hec.message());
    co_return false;
  }
  // A client sends nothing more before the handshake is over: what the buffer held was
  // handshake.
  buffer.consume(buffer.size());
  co_return true;
}

void http_endpoints::impl::set_phase(std::uint64_t id, phase p) {
  if (auto it = sessions.find(id); it != sessions.end()) {
    it->second.state = p;
    it->second.since = std::chrono::steady_clock::now();
  }
}

template <class Stream>
asio::awaitable<boost::system::error_code> http_endpoints::impl::read_request(
    impl& self, std::uint64_t id, Stream& stream, beast::flat_buffer& buffer,
    http::request_parser<http::string_body>& parser) {
  const auto& opt = self.options;
  auto& lowest = beast::get_lowest_layer(stream);
  parser.header_limit(opt.header_limit);
  // Any route's limit until the headers say which route it is (Beast checks a Content-Length
  // against the limit as the headers end).
  parser.body_limit(self.largest_body_limit);
  const auto request_deadline = std::chrono::steady_clock::now() + opt.read_timeout;
  lowest.expires_at(request_deadline);
  if (buffer.size() == 0) {
    // Idle until the first byte of the next request.
    self.set_phase(id, phase::idle);
    auto [ec, n] =
        co_await stream.async_read_some(buffer.prepare(512), asio::as_tuple(asio::use_awaitable));
    buffer.commit(n);
    if (ec) {
      self.set_phase(id, phase::reading);
      co_return ec;
    }
  }
  self.set_phase(id, phase::reading);
  const auto first_byte = std::chrono::steady_clock::now();
  // The headers, from the first byte on, get header_timeout; the body the rest.
  lowest.expires_at(std::min(request_deadline, first_byte + opt.header_timeout));
  auto [hec, hn] =
      co_await http::async_read_header(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
  if (hec) {
    co_return hec;
  }
  const auto* post = self.post_route_for(parser.get());
  const std::uint64_t limit = post != nullptr ? post->limits.body_limit : opt.body_limit;
  if (parser.content_length() && *parser.content_length() > limit) {
    co_return http::error::body_limit;
  }
  parser.body_limit(limit);
  if (parser.is_done()) {
    co_return hec;
  }
  lowest.expires_at(post != nullptr ? std::min(request_deadline, first_byte + post->limits.timeout)
                                    : request_deadline);
  auto [bec, bn] =
      co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
  co_return bec;
}

template <class Stream>
asio::awaitable<void> http_endpoints::impl::refuse(const http_endpoints_options& opt,
                                                   Stream& stream, boost::system::error_code ec) {
  unsigned status = 400;
  if (ec == http::error::header_limit) {
    status = 431;
  } else if (ec == http::error::body_limit) {
    status = 413;
  }
  auto refusal =
      make_response(11, false, false, http_response{.status = status, .body = ec.message() + "\n"});
  beast::get_lowest_layer(stream).expires_after(opt.write_timeout);
  auto write_refusal =
      beast::async_write(stream, std::move(refusal), asio::as_tuple(asio::use_awaitable));
  co_await std::move(write_refusal);
}

std::optional<http::message_generator> http_endpoints::impl::refusal(
    const auth_decision& d, const http::request<http::string_body>& req) const {
  const bool keep_alive = req.keep_alive() && !stopped;
  const bool head = req.method() == http::verb::head;
  switch (d.outcome) {
    case auth_outcome::allowed:
      return std::nullopt;
    case auth_outcome::unauthenticated:
      return make_response(req.version(), keep_alive, head,
                           http_response{.status = 401, .body = "Unauthorized\n"},
                           {.allow = {}, .retry_after = {}, .www_authenticate = "Bearer"});
    case auth_outcome::forbidden:
      return make_response(req.version(), keep_alive, head,
                           http_response{.status = 403, .body = d.reason + "\n"});
    case auth_outcome::unavailable:
      break;
  }
  return make_response(req.version(), keep_alive, head,
                       http_response{.status = 503, .body = d.reason + ", retry later\n"},
                       {.allow = {}, .retry_after = "1", .www_authenticate = {}});
}

const http_endpoints::impl::post_route* http_endpoints::impl::post_route_for(
    const http::request<http::string_body>& req) const {
  if (req.method() != http::verb::post) {
    return nullptr;
  }
  const auto it = post_routes.find(path_of(req));
  return it == post_routes.end() ? nullptr : &it->second;
}

http_endpoints::impl::async_route* http_endpoints::impl::async_route_for(
    const http::request<http::string_body>& req) {
  if (stopped || (req.method() != http::verb::get && req.method() != http::verb::head)) {
    return nullptr;
  }
  const auto it = async_routes.find(path_of(req));
  return it == async_routes.end() ? nullptr : &it->second;
}

asio::awaitable<std::shared_ptr<const http_response>> http_endpoints::impl::shared_response(
    std::shared_ptr<impl> self, async_route& route, std::string query) {
  if (auto last = route.last.lock();
      last && route.last_query == query &&
      std::chrono::steady_clock::now() - route.last_at < self->options.async_response_reuse) {
    co_return last;
  }
  if (const auto pending = route.computing) {
    if (route.computing_query == query) {
      co_await pending->done.async_wait(asio::as_tuple(asio::use_awaitable));
      co_return pending->result;
    }
    // Another query's document is computed: this one is not shared (max_async_responses
    // still bounds how many are made at once).
    auto op = run_async(route.path, route.fn, std::move(query));  // named: GCC 12
    http_response r = co_await std::move(op);
    co_return std::make_shared<const http_response>(std::move(r));
  }
  const auto mine = std::make_shared<computation>(self->strand);
  route.computing = mine;
  route.computing_query = query;
  // Whatever fn() does, the waiters get an answer and the next request computes afresh.
  struct publish {
    async_route& route;
    computation& c;
    publish(async_route& r, computation& co) : route(r), c(co) {}
    publish(const publish&) = delete;
    publish& operator=(const publish&) = delete;
    ~publish() {
      if (!c.result) {
        c.result = std::make_shared<const http_response>(
            http_response{.status = 500, .body = "internal error\n"});
      }
      route.last = c.result;
      route.last_at = std::chrono::steady_clock::now();
      route.last_query = route.computing_query;
      route.computing.reset();
      c.done.cancel();
    }
  };
  {
    const publish done{route, *mine};
    auto op = run_async(route.path, route.fn, std::move(query));  // named: GCC 12
    http_response r = co_await std::move(op);
    mine->result = std::make_shared<const http_response>(std::move(r));
  }
  co_return mine->result;
}

http::message_generator http_endpoints::impl::respond(
    const http::request<http::string_body>& req,
    const std::shared_ptr<const http_response>& computed) const {
  const bool keep_alive = req.keep_alive() && !stopped;
  const bool head = req.method() == http::verb::head;
  const auto path = path_of(req);
  const bool post_path = post_routes.find(path) != post_routes.end();
  if (const auto* post = post_route_for(req)) {
    if (stopped) {
      return make_response(req.version(), false, false,
                           http_response{.status = 503, .body = "shutting down\n"});
    }
    http_response r;
    try {
      r = post->fn(req.body());
    } catch (const std::exception& e) {
      r = handler_failed(path, e);
    }
    return make_response(req.version(), keep_alive, false, std::move(r));
  }
  if ((req.method() != http::verb::get && !head) || post_path) {
    return make_response(
        req.version(), keep_alive, false,
        http_response{.status = 405, .body = "method not allowed\n"},
        {.allow = post_path ? "POST" : "GET, HEAD", .retry_after = {}, .www_authenticate = {}});
  }
  const auto it = handlers.find(path);
  if (it == handlers.end() && !computed) {
    return make_response(req.version(), keep_alive, head,
                         http_response{.status = 404, .body = "404 page not found\n"});
  }
  if (stopped) {
    // Handlers may reference objects the owner destroys once stop() has returned.
    return make_response(req.version(), false, head,
                         http_response{.status = 503, .body = "shutting down\n"});
  }
  if (computed) {
    return make_response(req.version(), keep_alive, head, computed);
  }
  http_response r;
  try {
    r = it->second();
  } catch (const std::exception& e) {
    r = handler_failed(path, e);
  }
  return make_response(req.version(), keep_alive, head, std::move(r));
}

void http_endpoints::impl::make_room() {
  // The connection idle for the longest that has sent nothing, else the oldest with an
  // incomplete request, else the oldest: a new client (a kubelet probe) is served, and an
  // attacker holding every slot only keeps evicting its own connections. "Sent nothing"
  // asks the socket too: a probe's request may be in while its coroutine has not run yet
  // (issue 29: a connection flood closed 5.6% of the probes' own connections).
  const auto rank = [](const session_entry& e) {
    if (e.state == phase::idle) {
      boost::system::error_code ec;
      return e.stream->socket().available(ec) == 0 || ec ? 0 : 2;
    }
    return e.state == phase::reading ? 1 : 2;
  };
  auto victim = sessions.begin();
  auto victim_rank = rank(victim->second);
  for (auto it = std::next(sessions.begin()); it != sessions.end(); ++it) {
    const auto r = rank(it->second);
    if (r < victim_rank ||
        (r == 0 && victim_rank == 0 && it->second.since < victim->second.since)) {
      victim = it;
      victim_rank = r;
    }
  }
  constexpr std::array<std::string_view, 3> what = {"longest idle", "oldest incomplete", "oldest"};
  logger()->debug("{} connections open: closing the {} one to accept a new one", sessions.size(),
                  what.at(static_cast<std::size_t>(victim_rank)));
  boost::system::error_code ignored;
  victim->second.stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
  victim->second.stream->close();
  sessions.erase(victim);  // its coroutine ends on the aborted operation
  open_connections = sessions.size();
}

void http_endpoints::impl::close_all() {
  boost::system::error_code ignored;
  acceptor.close(ignored);
  for (auto& [id, entry] : sessions) {
    entry.stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    entry.stream->close();
  }
}

// ---------------------------------------------------------------------------------------------

http_endpoints::http_endpoints(const asio::any_io_executor& executor,
                               http_endpoints_options options)
    : impl_(std::make_shared<impl>(executor, std::move(options))) {}

http_endpoints::~http_endpoints() {
  stop();
}

void http_endpoints::handle(std::string path, std::function<http_response()> fn) {
  assert(!impl_->started && "register handlers before start()");
  impl_->handlers.insert_or_assign(std::move(path), std::move(fn));
}

void http_endpoints::handle_async(std::string path,
                                  std::function<asio::awaitable<http_response>()> fn) {
  assert(!impl_->started && "register handlers before start()");
  auto& route = impl_->async_routes[path];
  route.path = std::move(path);
  route.fn = [fn = std::move(fn)](const std::string& /*query*/) { return fn(); };
}

void http_endpoints::handle_async_query(
    std::string path, std::function<asio::awaitable<http_response>(std::string query)> fn) {
  assert(!impl_->started && "register handlers before start()");
  auto& route = impl_->async_routes[path];
  route.path = std::move(path);
  route.fn = std::move(fn);
  route.with_query = true;
}

void http_endpoints::handle_post(std::string path, post_route_options limits,
                                 std::function<http_response(std::string_view body)> fn) {
  assert(!impl_->started && "register handlers before start()");
  impl_->post_routes.insert_or_assign(std::move(path),
                                      impl::post_route{.limits = limits, .fn = std::move(fn)});
}

void http_endpoints::handle_check(std::string path, std::function<check_result()> check) {
  auto unnamed = path.substr(path.starts_with('/') ? 1 : 0) + " check failed";
  handle(std::move(path), [check = std::move(check), unnamed = std::move(unnamed)] {
    check_result c;
    try {
      c = check();
    } catch (const std::exception& e) {
      c = {false, std::string("check threw: ") + e.what()};
    }
    if (c.ok) {
      return http_response{.status = 200, .body = "ok"};
    }
    return http_response{.status = 500,
                         .body = c.message.empty() ? unnamed : bounded_reason(c.message)};
  });
}

base::result<std::optional<tcp::endpoint>> http_endpoints::start() {
  if (impl_->started.exchange(true)) {
    assert(false && "start() is called once");
    return base::make_error(base::errc::config_invalid, "the HTTP server was already started");
  }
  impl_->largest_body_limit = impl_->options.body_limit;
  for (const auto& [path, route] : impl_->post_routes) {
    impl_->largest_body_limit = std::max(impl_->largest_body_limit, route.limits.body_limit);
  }
  auto parsed = parse_bind_address(impl_->options.bind_address);
  if (!parsed) {
    return parsed.error();
  }
  if (!parsed.value()) {
    logger()->info("HTTP server disabled (bind address \"0\")");
    return std::optional<tcp::endpoint>{};
  }
  tcp::endpoint ep = *parsed.value();
  auto& acceptor = impl_->acceptor;
  const auto listen_on = [&acceptor](const tcp::endpoint& e) {
    boost::system::error_code ec;
    acceptor.open(e.protocol(), ec);
    if (!ec && e.address().is_v6() && e.address().is_unspecified()) {
      acceptor.set_option(asio::ip::v6_only(false), ec);  // dual-stack "all interfaces"
    }
    if (!ec) {
      acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
      acceptor.bind(e, ec);
    }
    if (!ec) {
      acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      boost::system::error_code ignored;
      acceptor.close(ignored);
    }
    return ec;
  };
  auto ec = listen_on(ep);
  if (ec && ep.address().is_v6() && ep.address().is_unspecified() &&
      impl_->options.bind_address.front() == ':') {
    // No IPv6 on this host (e.g. disabled in the pod): all IPv4 interfaces then.
    ep = tcp::endpoint{asio::ip::address_v4::any(), ep.port()};
    ec = listen_on(ep);
  }
  if (ec) {
    return base::make_error(
        base::errc::config_invalid,
        "cannot listen on " + impl_->options.bind_address + ": " + ec.message());
  }
  const auto bound = acceptor.local_endpoint(ec);
  if (ec) {
    return base::make_error(base::errc::config_invalid,
                            "cannot read the listening address: " + ec.message());
  }
  logger()->info("serving {} on {}:{}", impl_->options.tls ? "HTTPS" : "HTTP",
                 bound.address().to_string(), bound.port());
  asio::co_spawn(impl_->strand, impl::accept_loop(impl_), [](const std::exception_ptr& ep_) {
    log_coroutine_exception(ep_, "HTTP accept loop");
  });
  return std::optional<tcp::endpoint>{bound};
}

void http_endpoints::stop() {
  if (impl_->stopped.exchange(true)) {
    return;
  }
  asio::post(impl_->strand, [self = impl_] { self->close_all(); });
}

std::size_t http_endpoints::connections_for_test() const {
  return impl_->open_connections;
}

}  // namespace tec::serving
