#pragma once

#include "common.hpp"
#include "tec/controller/controller.hpp"

#include <spdlog/logger.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace tec::controller::detail {

/// What a worker does with an update (pod_decider). Called on the worker's thread (in manual
/// mode, the thread of run_until_idle()); a node and every pod update for it are always
/// handed to the same worker, in order. May throw: the update is logged and dropped.
class update_handler {
public:
  virtual ~update_handler() = default;
  /// `taints`: the node's latest NoExecute taints (nullopt: deleted). `replay`: the replay at
  /// activation is among the updates merged into this one.
  virtual void node_changed(const std::string& node, std::optional<std::vector<taint>> taints,
                            bool replay) = 0;
  /// The pod `key` ("namespace/name") changed, seen on `node`.
  virtual void pod_changed(std::string_view node, std::string_view key) = 0;
};

/// Intake and workers (see the Pipeline section of controller.hpp): one coalescing queue per
/// worker, chosen by shard_of(node name), and in threaded mode one std::thread per worker
/// draining it into the handler, node updates before pod updates. The enqueue functions, the
/// readers and stop() may be called from any thread; each worker's mutex guards its queue.
/// Borrows the handler and the counters.
class worker_pool {
public:
  worker_pool(std::size_t workers, bool threaded, update_handler& handler, counters& ctr,
              std::shared_ptr<spdlog::logger> log);
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;
  ~worker_pool();

  /// Puts a node update on its worker's queue, replacing the one waiting for that node (its
  /// `replay` is kept). False after stop().
  bool enqueue_node(std::string name, std::optional<std::vector<taint>> taints, bool replay);
  /// The same for a node to be decided again (redecide_all): a node with an update already
  /// waiting is left alone, as that update decides its pods anyway, with newer taints.
  bool requeue_node(const std::string& name, std::vector<taint> taints);
  /// Puts a pod update on the queue of `node`'s worker, unless one is waiting. False after
  /// stop().
  bool enqueue_pod(std::string_view node, std::string_view ns, std::string_view name);

  /// Threaded mode: starts the threads (once; not after stop()). Manual mode: no-op.
  void start();
  /// Drops the updates still waiting and joins the threads. Not from a worker.
  void stop();
  [[nodiscard]] bool stopping() const { return stopping_.load(); }
  /// Manual mode: handles waiting updates on the calling thread until none is left.
  std::size_t run_until_idle();
  /// Waits (bounded) until every enqueued update has been handled.
  bool wait_idle(std::chrono::milliseconds timeout);
  /// Updates waiting, per worker.
  [[nodiscard]] std::vector<std::size_t> depths() const;

private:
  // One waiting pod update: "<node>/<namespace>/<name>" (node names contain no '/').
  struct pod_item {
    std::string combined;
    std::size_t node_len = 0;

    [[nodiscard]] std::string_view node() const {
      return std::string_view(combined).substr(0, node_len);
    }
    [[nodiscard]] std::string_view key() const {
      return std::string_view(combined).substr(node_len + 1);
    }
  };

  // One waiting node update: its latest NoExecute taints (nullopt = deleted), and whether the
  // replay at activation is among the updates merged into it.
  struct node_pending {
    std::optional<std::vector<taint>> taints;
    bool replay = false;
  };

  struct work_item {
    bool is_node = false;
    std::string node;
    node_pending update;  // Node items.
    pod_item pod;
  };

  struct worker {
    std::mutex mu;  // guards the four queue members
    std::condition_variable cv;
    std::deque<std::string> node_order;
    std::unordered_map<std::string, node_pending> node_latest;
    std::deque<pod_item> pod_order;
    std::unordered_set<std::string> pod_waiting;
    std::thread thread;

    [[nodiscard]] bool has_work() const { return !node_order.empty() || !pod_order.empty(); }
    // Node updates first (docs/behaviour.md §2). Caller holds mu and has checked has_work().
    void pop(work_item& out);
  };

  bool push_node(std::string name, std::optional<std::vector<taint>> taints, bool replay,
                 bool replace);
  worker& worker_of(std::string_view node) { return *workers_[shard_of(node, workers_.size())]; }
  void enqueued(worker& w, metrics::count& counter, bool fresh);
  void loop(worker& w);
  // Hands `item` to the handler, then counts it as handled (wait_idle()).
  void handle(work_item& item);

  const bool threaded_;
  update_handler& handler_;
  counters& ctr_;
  std::shared_ptr<spdlog::logger> log_;
  std::vector<std::unique_ptr<worker>> workers_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};
  std::atomic<std::size_t> outstanding_{0};  // updates enqueued and not yet handled
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
};

}  // namespace tec::controller::detail
