#include "fresh_node_reader.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>
#include <utility>

#include "tec/informers/decode.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/paths.hpp"

namespace tec::writers::detail {

namespace asio = boost::asio;

/// One GET of a node and the reads waiting for it. `wake` never expires: the GET's owner
/// cancels it once `answer` is set, which wakes every waiter.
struct fresh_node_reader::flight {
  explicit flight(const asio::any_io_executor& ex)
      : wake(ex, asio::steady_timer::time_point::max()) {}
  asio::steady_timer wake;
  std::optional<node_read> answer;
  base::clock::time_point sent_at{};
};

fresh_node_reader::fresh_node_reader(asio::any_io_executor executor, k8sclient::client& c,
                                     base::clock& clock, std::chrono::milliseconds window,
                                     std::chrono::milliseconds timeout)
    : executor_(std::move(executor)),
      client_(c),
      clock_(clock),
      window_(window),
      timeout_(timeout) {}

std::uint64_t fresh_node_reader::reads() const noexcept {
  return reads_.load(std::memory_order_relaxed);
}

void fresh_node_reader::forget_expired(base::clock::time_point now) {
  std::erase_if(flights_, [&](const auto& entry) {
    const flight& f = *entry.second;
    return f.answer && now - f.sent_at >= window_;
  });
}

asio::awaitable<node_read> fresh_node_reader::read(std::string name) {
  const base::clock::time_point now = clock_.now();
  if (const auto it = flights_.find(name); it != flights_.end()) {
    const std::shared_ptr<flight> f = it->second;
    if (!f->answer) {
      // (as_tuple: the cancel that wakes us is the expected way out, not an error)
      co_await f->wake.async_wait(asio::as_tuple(asio::use_awaitable));
      if (f->answer) {
        co_return *f->answer;
      }
      co_return node_read{node_read::kind::failed, {}, "the read of the node was abandoned"};
    }
    if (now - f->sent_at < window_) {
      co_return *f->answer;
    }
  }
  forget_expired(now);
  auto f = std::make_shared<flight>(executor_);
  f->sent_at = now;
  flights_[name] = f;
  reads_.fetch_add(1, std::memory_order_relaxed);
  f->answer = co_await get(name);
  f->wake.cancel();
  co_return *f->answer;
}

asio::awaitable<node_read> fresh_node_reader::get(const std::string& name) {
  const std::string what = "GET node " + name;
  k8sclient::request req(boost::beast::http::verb::get,
                         "/api/v1/nodes/" + k8sclient::escape_path_segment(name), {},
                         "application/json", /*idempotent_=*/true);
  req.deadline = client_.clock().now() + timeout_;
  auto resp = co_await client_.send(std::move(req));
  if (!resp) {
    co_return node_read{node_read::kind::failed, {}, what + ": " + resp.error().message};
  }
  if (resp->status == 404) {
    co_return node_read{node_read::kind::not_found, {}, {}};
  }
  if (resp->status < 200 || resp->status >= 300) {
    co_return node_read{node_read::kind::failed,
                        {},
                        k8sclient::api_error(what, *resp).message,
                        resp->status == 403};
  }
  auto decoded = informers::decode_node(resp->body);
  if (!decoded) {
    co_return node_read{node_read::kind::failed, {}, what + ": " + decoded.error().message};
  }
  co_return node_read{node_read::kind::found, std::move(decoded->node.taints), {}};
}

bool carries_any(const std::vector<controller::taint>& now_on_node,
                 const std::vector<controller::taint>& causes) noexcept {
  return std::any_of(causes.begin(), causes.end(), [&](const controller::taint& cause) {
    return std::any_of(now_on_node.begin(), now_on_node.end(), [&](const controller::taint& t) {
      return t.key == cause.key && t.value == cause.value && t.effect == cause.effect;
    });
  });
}

}  // namespace tec::writers::detail
