// Fuzz target: the request path of the daemon's HTTP server (tec/serving/http_endpoints.hpp).
//
// One server for the whole run, on 127.0.0.1:0, with /healthz (ok), /readyz (failing), /metrics
// and /throws (a handler that throws), and small header and body limits so that short inputs
// reach them. Each input is written to a new connection, followed by a half-close, and
// everything the server sends is read until it closes. Then:
//  - the first response is what the server promises for the first request, which the harness
//    parses with the same Beast parser and limits: 200/500/404/405 for a complete request,
//    a refusal (400/413/431) for one over the limits or malformed, nothing when no byte of a
//    request came;
//  - the server closes the connection (the input ended), and its connection count and the
//    process's open sockets go back to where they were: no socket leaks.
// Every wait is bounded by `cap` (a hang is a failure). Inputs are cut at 2 KiB, below the
// server's read buffer, so that buffer_overflow cannot make it disagree with the one-shot parse.

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support.hpp"
#include "tec/metrics/metrics.hpp"
#include "tec/serving/http_endpoints.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

constexpr std::uint32_t header_limit = 1024;
constexpr std::uint64_t body_limit = 256;
constexpr std::size_t max_input = 2048;
// No wait in a passing run comes near this; it only turns a hang into a failure.
constexpr auto cap = 20s;

/// The open sockets, as "fd -> socket:[inode]" lines. Only sockets: libFuzzer itself opens
/// pipes to a symbolizer while it runs.
std::vector<std::string> open_sockets() {
  std::vector<std::string> out;
  DIR* dir = ::opendir("/proc/self/fd");
  TEC_FUZZ_CHECK(dir != nullptr, "opendir /proc/self/fd");
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == ".." || std::stoi(name) == ::dirfd(dir)) {
      continue;
    }
    std::array<char, 256> target{};
    const std::string link = "/proc/self/fd/" + name;
    const ssize_t n = ::readlink(link.c_str(), target.data(), target.size() - 1);
    const std::string_view what(target.data(), n > 0 ? static_cast<std::size_t>(n) : 0);
    if (what.substr(0, 7) == "socket:") {
      out.push_back(name + " -> " + std::string(what));
    }
  }
  ::closedir(dir);
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    out += l + "\n";
  }
  return out;
}

struct fixture {
  asio::io_context ioc;
  tec::metrics::registry registry;
  std::optional<tec::serving::http_endpoints> server;
  tcp::endpoint endpoint;
  std::vector<std::string> baseline_sockets;

  fixture() {
    spdlog::set_level(spdlog::level::warn);
    registry.add_counter("fuzz_requests_total", "A counter, so that /metrics renders something")
        .with({})
        .inc();
    tec::serving::http_endpoints_options o;
    o.bind_address = "127.0.0.1:0";
    o.read_timeout = 5s;
    o.write_timeout = 5s;
    o.header_limit = header_limit;
    o.body_limit = body_limit;
    server.emplace(ioc.get_executor(), o);
    server->handle_check("/healthz", [] { return tec::serving::check_result{}; });
    server->handle_check("/readyz", [] { return tec::serving::check_result{false, "not ready"}; });
    server->handle("/metrics", [this] {
      return tec::serving::http_response{200, std::string(tec::metrics::metrics_content_type),
                                         registry.render()};
    });
    server->handle("/throws", []() -> tec::serving::http_response {
      throw std::runtime_error("handler failed");
    });
    auto bound = server->start();
    TEC_FUZZ_CHECK(bound.has_value() && bound.value().has_value(), "start the server");
    endpoint = *bound.value();
    baseline_sockets = open_sockets();
  }
};

// Never destroyed: the server's coroutines stay parked in the io_context until exit.
fixture& the_fixture() {
  static fixture* const f = new fixture;  // NOLINT(cppcoreguidelines-owning-memory)
  return *f;
}

template <class Pred>
void run_until(asio::io_context& ioc, Pred done, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + cap;
  while (!done()) {
    TEC_FUZZ_CHECK(std::chrono::steady_clock::now() < deadline, what);
    if (ioc.stopped()) {
      ioc.restart();
    }
    ioc.run_one_for(10ms);
  }
}

/// What the server must send first for this input: nothing (no byte of a request came), a
/// refusal, or the handler's status.
struct expectation {
  bool response = false;
  /// 400, 413 or 431: which one depends on where the reads cut the bytes (a header over the
  /// limit with a bad byte is 431 when the limit is hit before the byte is parsed, else 400).
  bool refusal = false;
  unsigned status = 0;
  bool head = false;  // the response has no body
  /// Beast enforces header_limit only roughly when the header comes in several reads (the
  /// start line can fall outside the count): a request refused here for header_limit may be
  /// served. The status it then gets, or 0.
  unsigned over_limit_status = 0;
};

expectation expect(std::string_view input, std::uint32_t limit = header_limit) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(limit);
  parser.body_limit(body_limit);
  parser.eager(true);
  beast::error_code ec;
  std::size_t used = 0;
  while (!parser.is_done()) {
    std::size_t n = 0;
    if (used < input.size()) {
      n = parser.put(asio::buffer(input.data() + used, input.size() - used), ec);
      used += n;
    }
    if (ec && ec != http::error::need_more) {
      break;
    }
    if (n == 0 || ec == http::error::need_more) {
      // All the rest was offered and the parser wants more: the input ends here, and the
      // server's read sees EOF (Beast's read: end_of_stream before any byte, else put_eof).
      ec = {};
      if (!parser.got_some()) {
        return {};
      }
      parser.put_eof(ec);
      break;
    }
  }
  if (ec) {
    expectation refusal{true, true};
    if (ec == http::error::header_limit && limit == header_limit) {
      const expectation lifted = expect(input, static_cast<std::uint32_t>(max_input));
      refusal.over_limit_status = lifted.refusal ? 0 : lifted.status;
      refusal.head = lifted.head;
    }
    return refusal;
  }
  const auto& req = parser.get();
  const bool head = req.method() == http::verb::head;
  if (req.method() != http::verb::get && !head) {
    return {true, false, 405U};
  }
  std::string_view path = req.target();
  path = path.substr(0, path.find('?'));
  unsigned status = 404;
  if (path == "/healthz" || path == "/metrics") {
    status = 200;
  } else if (path == "/readyz" || path == "/throws") {
    status = 500;
  }
  return {true, false, status, head};
}

/// Sends `input` on a new connection, half-closes, and reads until the server closes.
struct exchange {
  std::string received;
  beast::error_code read_error;  // eof when the server closed cleanly
  bool done = false;

  void run(fixture& f, std::string_view input) {
    tcp::socket socket(f.ioc);
    socket.async_connect(f.endpoint, [&](const beast::error_code& ec) {
      TEC_FUZZ_CHECK(!ec, "connect: " + ec.message());
      asio::async_write(socket, asio::buffer(input.data(), input.size()),
                        [&](const beast::error_code& wec, std::size_t /*n*/) {
                          // The server may hang up before reading all of a bad request.
                          beast::error_code ignored;
                          if (!wec) {
                            socket.shutdown(tcp::socket::shutdown_send, ignored);
                          }
                          read_more(socket);
                        });
    });
    run_until(
        f.ioc, [&] { return done; }, "the server did not close the connection in time");
  }

  void read_more(tcp::socket& socket) {
    auto chunk = std::make_shared<std::array<char, 4096>>();
    socket.async_read_some(asio::buffer(*chunk),
                           [this, &socket, chunk](const beast::error_code& ec, std::size_t n) {
                             received.append(chunk->data(), n);
                             if (ec) {
                               read_error = ec;
                               done = true;
                               return;
                             }
                             read_more(socket);
                           });
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fixture& f = the_fixture();
  std::string_view input = tec::fuzz::as_text(data, size);
  input = input.substr(0, max_input);
  const expectation expected = expect(input);

  exchange x;
  x.run(f, input);
  const std::string shown = "input:\n" + std::string(input) + "\nreceived:\n" + x.received;

  http::response_parser<http::string_body> response;
  response.skip(expected.head);
  response.eager(true);
  beast::error_code ec;
  response.put(asio::buffer(x.received), ec);
  if (ec == http::error::need_more && response.got_some()) {
    ec = {};
    response.put_eof(ec);
  }
  const bool closed_cleanly = x.read_error == asio::error::eof;
  if (!expected.response) {
    TEC_FUZZ_CHECK(x.received.empty(), "a response to no request; " + shown);
  } else if (response.is_done()) {
    const unsigned got = response.get().result_int();
    if (expected.refusal) {
      TEC_FUZZ_CHECK(got == 400 || got == 413 || got == 431 ||
                         (expected.over_limit_status != 0 && got == expected.over_limit_status),
                     "expected a refusal; " + shown);
    } else {
      TEC_FUZZ_CHECK(got == expected.status,
                     "expected " + std::to_string(expected.status) + "; " + shown);
    }
  } else {
    // A reset may destroy a response in flight (the server closed with input unread);
    // otherwise the response must be there, complete.
    TEC_FUZZ_CHECK(!closed_cleanly, "no complete response (" + ec.message() + "); " + shown);
  }

  run_until(
      f.ioc, [&] { return f.server->connections_for_test() == 0; }, "connections stay open");
  const auto sockets = open_sockets();
  TEC_FUZZ_CHECK(sockets.size() <= f.baseline_sockets.size(),
                 "sockets leak; before:\n" + join(f.baseline_sockets) + "now:\n" + join(sockets));
  return 0;
}
