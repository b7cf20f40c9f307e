#pragma once

// The fresh read of a node that k8s_eviction_sink makes before an eviction (--fresh-node-check,
// docs/behaviour.md §8): a GET of the node from the API server, not the informer cache, shared
// by the evictions of one node (private to writers/src).

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tec/base/clock.hpp"
#include "tec/controller/model.hpp"
#include "tec/k8sclient/client.hpp"

namespace tec::writers::detail {

/// What one GET of a node said.
struct node_read {
  enum class kind : std::uint8_t {
    found,      ///< 2xx and a Node: `taints` are its taints (every effect, in order).
    not_found,  ///< 404: the node is gone.
    failed,     ///< Timeout, transport error, another status, an undecodable body: `error`.
  };
  kind what = kind::failed;
  std::vector<controller::taint> taints;
  std::string error;
  bool forbidden = false;  ///< failed with 403: the RBAC lacks `get` on nodes.
};

/// GETs nodes for the sink, single-flight per node: a read asked for while one of the same node
/// is in flight waits for that one's answer, and an answer is reused by every read asked for
/// within `window` of when its GET was sent. So the pods of one node evicted together cost one
/// GET, and a node whose pods trickle out (an eviction rate limit) at most one per window.
///
/// Thread/ownership: read() runs on `executor`, which must be the client's and run on one
/// thread (the sink's coroutines run there); the object is touched only there, except reads(),
/// any thread. `c` and `clock` must outlive every read in flight.
class fresh_node_reader {
public:
  fresh_node_reader(boost::asio::any_io_executor executor, k8sclient::client& c, base::clock& clock,
                    std::chrono::milliseconds window, std::chrono::milliseconds timeout);

  /// The node `name` as the API server has it, read now or at most `window` ago.
  boost::asio::awaitable<node_read> read(std::string name);

  /// How many GETs were sent.
  [[nodiscard]] std::uint64_t reads() const noexcept;

private:
  struct flight;
  boost::asio::awaitable<node_read> get(const std::string& name);
  void forget_expired(base::clock::time_point now);

  boost::asio::any_io_executor executor_;
  k8sclient::client& client_;
  base::clock& clock_;
  std::chrono::milliseconds window_;
  std::chrono::milliseconds timeout_;
  /// By node name: the read in flight or the last answer, while it may be reused. Answers
  /// older than the window are dropped whenever a new GET starts, so the map holds at most
  /// the nodes read within the last window (plus those in flight).
  std::unordered_map<std::string, std::shared_ptr<flight>> flights_;
  std::atomic<std::uint64_t> reads_{0};
};

/// True when `now_on_node` has a taint equal to one of `causes` in key, value and effect.
[[nodiscard]] bool carries_any(const std::vector<controller::taint>& now_on_node,
                               const std::vector<controller::taint>& causes) noexcept;

}  // namespace tec::writers::detail
