#pragma once

// A scripted HTTP/1.1 server for unit tests of the client and everything built on it.
//
// In memory (the default for unit tests: fake_http_server(executor)) it has no socket and no
// thread: connector() is a client_options::connector whose every connection is a Beast test
// stream pair (the client's end behind a byte_stream), the server end served on the test's own
// executor, so a test drives client and server with one io_context and a manual clock. On loopback
// (fake_http_server(), for what is truly about sockets: TLS, refused connections, real TCP) it
// listens on 127.0.0.1 on a kernel-chosen port and runs on its own thread with its own io_context.
// Each request received is recorded, then answered by the first queued `reply` whose `match` is a
// substring of the request target (FIFO among matches); with no match it answers the fallback reply
// if one is set, else `404 no scripted reply`. A reply is a list of steps written in order, so a
// test controls exactly where chunk boundaries fall, when a response stops (stall), and whether the
// connection is closed mid-response.
//
// Thread-safety: every public member may be called from any thread (the test thread usually).
// The destructor stops a loopback server and joins its thread; in-flight connections are dropped.
// An in-memory server's connections live on the test's executor (until its io_context goes).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tec/k8sclient/client.hpp"

namespace tec::k8sclient::testing {

/// One request as the server read it. Header names are lower-cased.
struct recorded_request {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;
  std::string body;
  std::uint64_t connection = 0;  ///< 1-based index of the connection it came on.

  /// The header's value, or "" when absent. `name` must be lower-case.
  [[nodiscard]] std::string header(const std::string& name) const;
};

/// A scripted answer: a sequence of steps, built with the chaining helpers below.
class reply {
public:
  enum class step_kind {
    raw,         ///< Write `data` verbatim (status line and headers are raw writes too).
    chunk,       ///< Write `data` as one HTTP chunk ("<hex>\r\n<data>\r\n"), one write.
    repeat,      ///< Write `data` as one chunk `count` times (a huge body in bounded memory).
    end_chunks,  ///< Write the terminating "0\r\n\r\n".
    hold,        ///< Wait until `fake_http_server::release(data)` is called.
    stall,       ///< Write nothing more; keep the connection open until the peer closes it.
    close,       ///< Close the connection now.
  };
  struct step {
    step_kind kind;
    std::string data;
    std::uint64_t count = 1;
  };

  /// A complete response with a Content-Length body (connection kept alive).
  static reply with(unsigned status, std::string body = {},
                    std::vector<std::pair<std::string, std::string>> headers = {});
  /// Only the status line and headers of a chunked response; add chunk()/end() steps.
  static reply chunked(unsigned status,
                       std::vector<std::pair<std::string, std::string>> headers = {});
  /// No response at all: the request is read, then nothing is ever written.
  static reply no_response();
  /// The connection is closed as soon as the request has been read.
  static reply close_now();

  reply& raw(std::string bytes);
  reply& chunk(std::string piece);
  /// `piece` as `times` chunks; stops early when the peer goes away.
  reply& repeat(std::string piece, std::uint64_t times);
  reply& end();
  reply& hold(std::string gate);
  reply& stall();
  reply& close();

  /// Only requests whose target contains `substring` take this reply ("" matches all).
  reply& match(std::string substring);

  [[nodiscard]] const std::vector<step>& steps() const noexcept { return steps_; }
  [[nodiscard]] const std::string& matcher() const noexcept { return match_; }

private:
  std::vector<step> steps_;
  std::string match_;
};

class fake_http_server {
public:
  /// Binds 127.0.0.1:0 and starts serving on a new thread.
  fake_http_server();
  /// In memory, on `ex`: serves the connections connector() opens.
  explicit fake_http_server(boost::asio::any_io_executor ex);
  ~fake_http_server();
  fake_http_server(const fake_http_server&) = delete;
  fake_http_server& operator=(const fake_http_server&) = delete;

  /// The port the kernel chose, as text for rest_config::port ("6443" in memory).
  [[nodiscard]] std::string port() const;

  /// In memory: for client_options::connector. Each call opens one connection.
  [[nodiscard]] std::function<
      base::result<std::unique_ptr<byte_stream>>(const boost::asio::any_io_executor&)>
  connector() const;

  /// Queues a reply for the next matching request.
  void push(reply r);
  /// The answer used when no queued reply matches (reused, never consumed).
  void set_fallback(reply r);
  /// Lets every reply waiting on (or later reaching) hold(`gate`) continue.
  void release(const std::string& gate);

  /// Copies of the requests received so far, in arrival order.
  [[nodiscard]] std::vector<recorded_request> requests() const;
  /// Number of connections accepted (or opened in memory) so far.
  [[nodiscard]] std::size_t connections() const;
  /// Blocks until at least `n` requests were received or `timeout` passed; true if reached.
  /// Loopback only (in memory, the server runs on the caller's own io_context).
  bool wait_for_requests(std::size_t n, std::chrono::milliseconds timeout) const;

private:
  struct state;
  std::shared_ptr<state> state_;
  std::thread thread_;
};

}  // namespace tec::k8sclient::testing
