#pragma once

// The client's pool of persistent connections (internal to k8sclient): which connection a
// request gets, who waits for one and in what order, and how many plain requests may be on the
// wire at once. Dialling, TLS and the exchange itself stay in client.cpp, which hands the pool
// a function that opens a connection. Defined here, not in a .cpp: clang-analyzer reports a false
// uninitialized pointer inside Asio's awaitable when these coroutines are awaited from another
// translation unit.

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_prefix.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/k8sclient/client.hpp"

namespace tec::k8sclient::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

/// A byte_stream (client_options::connector's) as Beast's AsyncReadStream and AsyncWriteStream.
class byte_stream_ref {
public:
  using executor_type = boost::asio::any_io_executor;

  explicit byte_stream_ref(byte_stream& s) : stream_(&s) {}

  [[nodiscard]] executor_type get_executor() const { return stream_->get_executor(); }

  /// Reads into the first buffer only, as a read_some may (Beast reads into a flat_buffer's one).
  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [](auto done, byte_stream* s, boost::asio::mutable_buffer b) {
          s->async_read_some(b, std::move(done));
        },
        token, stream_, boost::beast::buffers_front(buffers));
  }

  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [](auto done, byte_stream* s, const ConstBufferSequence& b) {
          std::vector<boost::asio::const_buffer> copy(boost::asio::buffer_sequence_begin(b),
                                                      boost::asio::buffer_sequence_end(b));
          s->async_write_some(std::move(copy), std::move(done));
        },
        token, stream_, buffers);
  }

private:
  byte_stream* stream_;
};

/// One persistent connection. Exactly one of plain/tls/custom is set.
struct connection {
  std::uint64_t id = 0;
  /// The TLS context `tls` was made with (each exec client certificate has its own); declared
  /// first, so that it outlives the stream.
  std::shared_ptr<boost::asio::ssl::context> tls_context;
  std::unique_ptr<boost::beast::tcp_stream> plain;
  std::unique_ptr<boost::beast::ssl_stream<boost::beast::tcp_stream>> tls;
  std::unique_ptr<byte_stream> custom;  ///< client_options::connector's
  /// The exec plugin's credential whose client certificate `tls` presents; null for none.
  std::shared_ptr<const void> client_certificate;
  boost::beast::flat_buffer buffer;
  std::chrono::steady_clock::time_point idle_since{};
  std::uint64_t exchanges = 0;
  bool windowed = false;  ///< Holds a plain request's place in the slow-start window.

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  /// Also how a deadline ends the I/O in flight: its operations complete with an error. Does
  /// nothing before a stream is set.
  void close() {
    if (custom) {
      custom->close();
    } else if (plain || tls) {
      boost::system::error_code ignored;
      lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
      lowest().socket().close(ignored);
    }
  }

  /// False for an idle connection the server has closed or sent unsolicited bytes on (a TLS
  /// close_notify): a non-idempotent request on it would fail in a way we may not retry.
  bool still_usable() {
    if (custom) {
      return buffer.size() == 0 && !custom->has_unread_bytes();
    }

    auto& socket = lowest().socket();
    if (!socket.is_open() || buffer.size() != 0) {
      return false;
    }

    char byte = 0;
    const auto n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
};
/// The slow-start window's count of plain requests: after an idle second at most `initial`
/// places (0 = `max`), one more for each place given back, up to `max`. On the pool's executor.
class slow_start_window {
public:
  slow_start_window(std::size_t initial, std::size_t max)
      : restart_(initial == 0 ? max : std::min(initial, max)), max_(max), window_(restart_) {}

  /// Takes a place if one is free and `queue_empty` (nobody waits ahead); back to the initial
  /// window first when none was held for a second before `now`.
  bool try_enter(std::chrono::steady_clock::time_point now, bool queue_empty) {
    if (in_flight_ == 0 && now - idle_since_ >= std::chrono::seconds{1}) {
      window_ = restart_;
    }

    if (in_flight_ < window_ && queue_empty) {
      ++in_flight_;
      return true;
    }

    return false;
  }

  /// Gives a place back and widens the window; then hands out (counts) up to `waiting` free
  /// places and returns how many, for the waiters at the front of the queue.
  std::size_t release(std::chrono::steady_clock::time_point now, std::size_t waiting) {
    --in_flight_;
    window_ = std::min(window_ + 1, max_);
    if (in_flight_ == 0 && waiting == 0) {
      idle_since_ = now;
    }

    const std::size_t handed = std::min(waiting, window_ - std::min(window_, in_flight_));
    in_flight_ += handed;
    return handed;
  }

private:
  const std::size_t restart_;
  const std::size_t max_;
  std::size_t window_;
  std::size_t in_flight_ = 0;
  std::chrono::steady_clock::time_point idle_since_{};
};

/// The pool. Every member runs on the client's executor (the one given). A plain request
/// waiting for a connection is served before any background one, and a background request also
/// waits while any plain request is unanswered (unanswered_mark). Plain requests start slowly
/// (client_options::initial_plain_window).
class connection_pool {
public:
  using steady = std::chrono::steady_clock;
  /// Opens the connection given (new, its id set): an empty error when it is open.
  using connect_fn = std::function<boost::asio::awaitable<base::error>(connection&)>;

  struct settings {
    std::size_t max_connections = 1;
    std::size_t initial_plain_window = 0;  ///< 0: no slow start.
    steady::duration idle_connection_timeout{};
  };

  /// `connect` opens a connection (counted in the pool's size, and closed by stop(), while it
  /// is being opened); `stopping` is the client's flag; `stopped` and `no_free_connection` make
  /// the errors the pool returns.
  connection_pool(asio::any_io_executor ex, base::alarm_clock& clock, settings s,
                  connect_fn connect, const std::atomic<bool>& stopping,
                  std::function<base::error()> stopped,
                  std::function<base::error()> no_free_connection)
      : ex_(std::move(ex)),
        clock_(clock),
        settings_(s),
        connect_(std::move(connect)),
        stopping_(stopping),
        stopped_(std::move(stopped)),
        no_free_connection_(std::move(no_free_connection)),
        window_(s.initial_plain_window, s.max_connections) {}

  /// Marks a plain request from when it has passed the rate limiter until its attempt is over:
  /// background requests wait while any request is marked. Yielding a connection is not
  /// enough: with one free, an event POST went out with its eviction's DELETE and slowed it.
  /// Backoff and rate-limit waits are not marked.
  class unanswered_mark {
  public:
    explicit unanswered_mark(connection_pool& owner) : owner_(owner) { ++owner_.unanswered_; }
    ~unanswered_mark() {
      if (--owner_.unanswered_ == 0 && owner_.waiters_.empty() && owner_.handoffs_ == 0) {
        owner_.wake_one_waiter();  // the background waiters
      }
    }

    unanswered_mark(const unanswered_mark&) = delete;
    unanswered_mark& operator=(const unanswered_mark&) = delete;

  private:
    connection_pool& owner_;
  };

  /// A connection: an idle one still usable, a new one while the pool is not full, else the
  /// next one freed (until `deadline`; a background request waits as long as it takes). A
  /// `plain` request (not streamed, not background) first waits for its place in the
  /// slow-start window, which it holds until the connection is released.
  asio::awaitable<base::result<std::unique_ptr<connection>>> acquire(steady::time_point deadline,
                                                                     bool background, bool plain) {
    if (plain) {
      const bool entered = co_await enter_window(deadline);
      if (!entered) {
        co_return stopping_ ? stopped_() : no_free_connection_();
      }
    }

    auto taken = co_await take_connection(deadline, background);
    if (plain) {
      if (taken) {
        taken.value()->windowed = true;
      } else {
        release_window();
      }
    }

    co_return taken;
  }

  /// Gives `c` back (and its place in the slow-start window): kept for reuse when `reusable`
  /// (and the pool is not stopping), else closed. Wakes the next waiter.
  void release(std::unique_ptr<connection> c, bool reusable) {
    busy_.erase(c.get());
    if (std::exchange(c->windowed, false)) {
      release_window();
    }

    ++c->exchanges;
    if (reusable && !stopping_) {
      c->idle_since = clock_.now();
      idle_.push_back(std::move(c));
    } else {
      c->close();
      --open_;
    }

    wake_one_waiter();
  }

  /// Closes the idle connections (made with a client certificate that has been replaced).
  void close_idle() {
    for (auto& c : idle_) {
      c->close();
    }
    open_ -= idle_.size();
    idle_.clear();
    wake_one_waiter();
  }

  /// Shutdown: wakes every waiter (they fail) and closes every connection, busy or idle.
  void stop() {
    for (auto* list : {&waiters_, &background_waiters_, &window_waiters_}) {
      for (auto* w : *list) {
        w->timer.cancel();
      }
    }

    for (auto* c : busy_) {
      c->close();
    }

    for (auto& c : idle_) {
      c->close();
    }

    open_ -= idle_.size();
    idle_.clear();
  }

private:
  struct waiter {
    explicit waiter(const boost::asio::any_io_executor& ex)
        : timer(ex, steady::time_point::max()) {}
    boost::asio::steady_timer timer;
    bool woken = false;
  };

  /// Wakes the first waiter of `list`, which must not be empty.
  static void wake_first(std::list<waiter*>& list) {
    waiter* w = list.front();
    list.pop_front();
    w->woken = true;
    w->timer.cancel();
  }

  /// Waits on `list` until woken (true), or the deadline (on the clock) or shutdown (false).
  asio::awaitable<bool> wait_in(std::list<waiter*>& list, steady::time_point deadline) {
    waiter w(ex_);
    std::unique_ptr<base::alarm_clock::alarm> ring;
    if (deadline != steady::time_point::max()) {
      ring = clock_.at(ex_, deadline, [&w] { w.timer.cancel(); });
    }

    auto pos = list.insert(list.end(), &w);
    co_await w.timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!w.woken) {
      list.erase(pos);
    }

    co_return w.woken;
  }

  /// The first foreground waiter; when there is none (none on its way and no plain request
  /// unanswered), every background waiter (they look again and queue up anew if need be).
  void wake_one_waiter() {
    if (!waiters_.empty()) {
      ++handoffs_;
      wake_first(waiters_);
      return;
    }

    if (handoffs_ > 0 || unanswered_ > 0) {
      return;  // a background waiter would only look and queue up again (see take_connection)
    }

    while (!background_waiters_.empty()) {
      wake_first(background_waiters_);
    }
  }

  /// Waits for and counts a place in the slow-start window (release_window() hands places to
  /// waiters in arrival order). False at the deadline or on shutdown.
  asio::awaitable<bool> enter_window(steady::time_point deadline) {
    if (window_.try_enter(clock_.now(), window_waiters_.empty())) {
      co_return true;
    }

    if (stopping_) {
      co_return false;
    }

    // Woken = handed a place by release_window(), already counted.
    co_return co_await wait_in(window_waiters_, deadline);
  }

  asio::awaitable<base::result<std::unique_ptr<connection>>> take_connection(
      steady::time_point deadline, bool background) {
    for (;;) {
      if (stopping_) {
        co_return stopped_();
      }
      // A background request yields to every other waiter (woken ones on their way included)
      // and to every unanswered plain request.
      const bool yield = background && (!waiters_.empty() || handoffs_ > 0 || unanswered_ > 0);
      while (!yield && !idle_.empty()) {
        std::unique_ptr<connection> c = std::move(idle_.back());
        idle_.pop_back();
        if (clock_.now() - c->idle_since < settings_.idle_connection_timeout && c->still_usable()) {
          busy_.insert(c.get());
          co_return c;
        }
        c->close();
        --open_;
      }
      if (!yield && open_ < settings_.max_connections) {
        ++open_;
        auto c = std::make_unique<connection>();
        c->id = ++opened_;
        busy_.insert(c.get());
        auto failed = co_await connect_(*c);
        if (failed) {
          busy_.erase(c.get());
          c->close();
          --open_;
          wake_one_waiter();
          co_return stopping_ ? stopped_() : std::move(failed);
        }
        co_return c;
      }
      if (background) {
        co_await wait_in(background_waiters_, steady::time_point::max());
        continue;
      }
      if (co_await wait_in(waiters_, deadline)) {
        --handoffs_;
        if (waiters_.empty() && handoffs_ == 0) {
          wake_one_waiter();  // the background ones: what this one leaves is theirs
        }
        continue;
      }
      if (stopping_) {
        co_return stopped_();
      }
      co_return no_free_connection_();
    }
  }

  void release_window() {
    // Each free place goes to the longest waiter, counted here: a waiter woken is never sent back
    // to wait again, and one arriving meanwhile does not pass it.
    for (std::size_t n = window_.release(clock_.now(), window_waiters_.size()); n > 0; --n) {
      wake_first(window_waiters_);
    }
  }

  boost::asio::any_io_executor ex_;
  base::alarm_clock& clock_;
  const settings settings_;
  const connect_fn connect_;
  const std::atomic<bool>& stopping_;
  const std::function<base::error()> stopped_;
  const std::function<base::error()> no_free_connection_;

  std::vector<std::unique_ptr<connection>> idle_;
  std::set<connection*> busy_;
  std::size_t open_ = 0;
  std::uint64_t opened_ = 0;  // connections ever opened: the next one's id
  std::list<waiter*> waiters_;
  std::list<waiter*> background_waiters_;  // request::background, served last
  std::size_t handoffs_ = 0;               // waiters woken, not yet back in acquire()
  std::size_t unanswered_ = 0;             // unanswered_mark's count
  slow_start_window window_;
  std::list<waiter*> window_waiters_;
};

}  // namespace tec::k8sclient::detail
