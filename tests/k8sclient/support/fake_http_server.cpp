#include "k8sclient/support/fake_http_server.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <cstdio>
#include <deque>
#include <set>
#include <stdexcept>

namespace tec::k8sclient::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

/// One end of an in-memory connection (Beast's test stream).
using memory_stream = beast::test::basic_stream<asio::any_io_executor>;

/// The client's end of an in-memory connection, as client_options::connector opens it.
class memory_byte_stream final : public byte_stream {
public:
  explicit memory_byte_stream(const asio::any_io_executor& ex) : stream_(ex) {}

  memory_stream& stream() { return stream_; }

  asio::any_io_executor get_executor() override { return stream_.get_executor(); }
  void async_read_some(asio::mutable_buffer buffer, handler done) override {
    stream_.async_read_some(buffer, std::move(done));
  }
  void async_write_some(std::vector<asio::const_buffer> buffers, handler done) override {
    stream_.async_write_some(buffers, std::move(done));
  }
  void close() override { stream_.close(); }
  bool has_unread_bytes() override { return stream_.buffer().size() != 0; }

private:
  memory_stream stream_;
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string reason(unsigned status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

std::string head(unsigned status, const std::vector<std::pair<std::string, std::string>>& headers,
                 const std::string& framing) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  for (const auto& [name, value] : headers) {
    out += name + ": " + value + "\r\n";
  }
  out += framing + "\r\n\r\n";
  return out;
}

void close_stream(tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

void close_stream(memory_stream& stream) {
  stream.close();
}

}  // namespace

std::string recorded_request::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string{} : it->second;
}

reply reply::with(unsigned status, std::string body,
                  std::vector<std::pair<std::string, std::string>> headers) {
  reply r;
  std::string bytes = head(status, headers, "Content-Length: " + std::to_string(body.size()));
  bytes += body;
  r.raw(std::move(bytes));
  return r;
}

reply reply::chunked(unsigned status, std::vector<std::pair<std::string, std::string>> headers) {
  reply r;
  r.raw(head(status, headers, "Transfer-Encoding: chunked"));
  return r;
}

reply reply::no_response() {
  reply r;
  r.stall();
  return r;
}

reply reply::close_now() {
  reply r;
  r.close();
  return r;
}

reply& reply::raw(std::string bytes) {
  steps_.push_back({step_kind::raw, std::move(bytes)});
  return *this;
}

reply& reply::chunk(std::string piece) {
  steps_.push_back({step_kind::chunk, std::move(piece)});
  return *this;
}

reply& reply::repeat(std::string piece, std::uint64_t times) {
  steps_.push_back({step_kind::repeat, std::move(piece), times});
  return *this;
}

reply& reply::end() {
  steps_.push_back({step_kind::end_chunks, {}});
  return *this;
}

reply& reply::hold(std::string gate) {
  steps_.push_back({step_kind::hold, std::move(gate)});
  return *this;
}

reply& reply::stall() {
  steps_.push_back({step_kind::stall, {}});
  return *this;
}

reply& reply::close() {
  steps_.push_back({step_kind::close, {}});
  return *this;
}

reply& reply::match(std::string substring) {
  match_ = std::move(substring);
  return *this;
}

// Everything below `mu` is shared with the test thread; the gate maps are touched only on the
// server thread.
struct fake_http_server::state {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::any_io_executor ex;  ///< Where the connections are served: io's, or the test's.
  bool in_memory = false;

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::deque<reply> queue;
  std::unique_ptr<reply> fallback;
  std::vector<recorded_request> received;
  std::size_t accepted = 0;

  std::set<std::string> released;
  std::multimap<std::string, asio::steady_timer*> gate_waiters;

  reply pick(const std::string& target) {
    std::lock_guard lock(mu);
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (target.find(it->matcher()) != std::string::npos) {
        reply r = std::move(*it);
        queue.erase(it);
        return r;
      }
    }
    if (fallback) {
      return *fallback;
    }
    return reply::with(404, "no scripted reply");
  }

  asio::awaitable<void> wait_gate(const std::string& gate) {
    if (released.contains(gate)) {
      co_return;
    }
    asio::steady_timer timer(ex, asio::steady_timer::time_point::max());
    auto it = gate_waiters.emplace(gate, &timer);
    co_await timer.async_wait(use_tuple);
    gate_waiters.erase(it);
  }

  template <class Stream>
  asio::awaitable<void> serve(Stream socket, std::uint64_t id) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64U << 20U);
      auto [ec, n] = co_await http::async_read(socket, buffer, parser, use_tuple);
      if (ec) {
        co_return;
      }
      recorded_request rec;
      const auto& msg = parser.get();
      rec.method = std::string(msg.method_string());
      rec.target = std::string(msg.target());
      for (const auto& field : msg) {
        rec.headers[lower(field.name_string())] = std::string(field.value());
      }
      rec.body = msg.body();
      rec.connection = id;
      {
        std::lock_guard lock(mu);
        received.push_back(rec);
      }
      cv.notify_all();

      reply r = pick(rec.target);
      for (const auto& s : r.steps()) {
        switch (s.kind) {
          case reply::step_kind::repeat: {
            char size[32];
            std::snprintf(size, sizeof size, "%zx\r\n", s.data.size());
            const std::string bytes = size + s.data + "\r\n";
            for (std::uint64_t i = 0; i < s.count; ++i) {
              auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(bytes), use_tuple);
              if (wec) {
                co_return;
              }
            }
            break;
          }
          case reply::step_kind::raw:
          case reply::step_kind::chunk:
          case reply::step_kind::end_chunks: {
            std::string bytes;
            if (s.kind == reply::step_kind::raw) {
              bytes = s.data;
            } else if (s.kind == reply::step_kind::chunk) {
              char size[32];
              std::snprintf(size, sizeof size, "%zx\r\n", s.data.size());
              bytes = size + s.data + "\r\n";
            } else {
              bytes = "0\r\n\r\n";
            }
            auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(bytes), use_tuple);
            if (wec) {
              co_return;
            }
            break;
          }
          case reply::step_kind::hold:
            co_await wait_gate(s.data);
            break;
          case reply::step_kind::stall: {
            // Drain until the peer goes away so the coroutine ends with the connection.
            char sink[512];
            for (;;) {
              auto [rec_ec, rn] = co_await socket.async_read_some(asio::buffer(sink), use_tuple);
              if (rec_ec) {
                co_return;
              }
            }
          }
          case reply::step_kind::close:
            close_stream(socket);
            co_return;
        }
      }
    }
  }

  /// An in-memory connection's server end keeps the state alive (the test's io_context owns
  /// it). Not for loopback: the state's own io_context would then own the state.
  static asio::awaitable<void> serve_owned(std::shared_ptr<state> s, memory_stream end,
                                           std::uint64_t id) {
    co_await s->serve(std::move(end), id);
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
      if (ec) {
        co_return;
      }
      std::uint64_t id = 0;
      {
        std::lock_guard lock(mu);
        id = ++accepted;
      }
      asio::co_spawn(io, serve(std::move(socket), id), asio::detached);
    }
  }
};

fake_http_server::fake_http_server(asio::any_io_executor ex) : state_(std::make_shared<state>()) {
  state_->ex = std::move(ex);
  state_->in_memory = true;
}

std::function<base::result<std::unique_ptr<byte_stream>>(const asio::any_io_executor&)>
fake_http_server::connector() const {
  return
      [s = state_](const asio::any_io_executor& ex) -> base::result<std::unique_ptr<byte_stream>> {
        auto near = std::make_unique<memory_byte_stream>(ex);
        memory_stream far(s->ex);
        near->stream().connect(far);
        std::uint64_t id = 0;
        {
          std::lock_guard lock(s->mu);
          id = ++s->accepted;
        }
        asio::co_spawn(s->ex, state::serve_owned(s, std::move(far), id), asio::detached);
        return near;
      };
}

fake_http_server::fake_http_server() : state_(std::make_shared<state>()) {
  state_->ex = state_->io.get_executor();
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  state_->acceptor.open(ep.protocol());
  state_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  state_->acceptor.bind(ep);
  state_->acceptor.listen();
  asio::co_spawn(state_->io, state_->accept_loop(), asio::detached);
  thread_ = std::thread([s = state_.get()] { s->io.run(); });
}

fake_http_server::~fake_http_server() {
  if (thread_.joinable()) {
    state_->io.stop();
    thread_.join();
  }
}

std::string fake_http_server::port() const {
  if (state_->in_memory) {
    return "6443";
  }
  return std::to_string(state_->acceptor.local_endpoint().port());
}

void fake_http_server::push(reply r) {
  std::lock_guard lock(state_->mu);
  state_->queue.push_back(std::move(r));
}

void fake_http_server::set_fallback(reply r) {
  std::lock_guard lock(state_->mu);
  state_->fallback = std::make_unique<reply>(std::move(r));
}

void fake_http_server::release(const std::string& gate) {
  asio::post(state_->ex, [s = state_.get(), gate] {
    s->released.insert(gate);
    auto [first, last] = s->gate_waiters.equal_range(gate);
    for (auto it = first; it != last; ++it) {
      it->second->cancel();
    }
  });
}

std::vector<recorded_request> fake_http_server::requests() const {
  std::lock_guard lock(state_->mu);
  return state_->received;
}

std::size_t fake_http_server::connections() const {
  std::lock_guard lock(state_->mu);
  return state_->accepted;
}

bool fake_http_server::wait_for_requests(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(state_->mu);
  return state_->cv.wait_for(lock, timeout, [&] { return state_->received.size() >= n; });
}

}  // namespace tec::k8sclient::testing
