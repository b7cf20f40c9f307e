#include "worker_pool.hpp"
#include "common.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

namespace tec::controller {

std::uint32_t fnv1a_32(std::string_view s) noexcept {
  std::uint32_t h = 2166136261U;
  for (const char c : s) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 16777619U;
  }
  return h;
}

std::size_t shard_of(std::string_view node_name, std::size_t workers) noexcept {
  return workers == 0 ? 0 : static_cast<std::size_t>(fnv1a_32(node_name) % workers);
}

}  // namespace tec::controller

namespace tec::controller::detail {

void worker_pool::worker::pop(work_item& out) {
  if (!node_order.empty()) {
    out.is_node = true;
    out.node = std::move(node_order.front());
    node_order.pop_front();
    auto it = node_latest.find(out.node);
    out.update = std::move(it->second);
    node_latest.erase(it);
    return;
  }
  out.is_node = false;
  out.pod = std::move(pod_order.front());
  pod_order.pop_front();
  pod_waiting.erase(out.pod.combined);
}

worker_pool::worker_pool(std::size_t workers, bool threaded, update_handler& handler, counters& ctr,
                         std::shared_ptr<spdlog::logger> log)
    : threaded_(threaded), handler_(handler), ctr_(ctr), log_(std::move(log)) {
  const std::size_t n = std::max<std::size_t>(workers, 1);
  workers_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    workers_.push_back(std::make_unique<worker>());
  }
}

worker_pool::~worker_pool() {
  stop();
}

bool worker_pool::enqueue_node(std::string name, std::optional<std::vector<taint>> taints,
                               bool replay) {
  if (log_->should_log(spdlog::level::trace)) {
    log_->trace("stage=enqueued node=\"{}\" t_us={}", name, trace_us());
  }
  return push_node(std::move(name), std::move(taints), replay, /*replace=*/true);
}

bool worker_pool::requeue_node(const std::string& name, std::vector<taint> taints) {
  return push_node(name, std::move(taints), /*replay=*/false, /*replace=*/false);
}

// `replace`: the update replaces one waiting for that node (else leaves it alone).
bool worker_pool::push_node(std::string name, std::optional<std::vector<taint>> taints, bool replay,
                            bool replace) {
  worker& w = worker_of(name);
  bool fresh = false;
  {
    std::lock_guard lock(w.mu);
    if (stopping_.load()) {
      return false;
    }
    auto [it, inserted] = w.node_latest.try_emplace(name);
    if (inserted || replace) {
      it->second.taints = std::move(taints);
      it->second.replay = it->second.replay || replay;  // the pods are still to be replayed
    }
    if (inserted) {
      w.node_order.push_back(std::move(name));
      outstanding_.fetch_add(1);
      fresh = true;
    }
  }
  enqueued(w, ctr_.node_updates, fresh);
  return true;
}

bool worker_pool::enqueue_pod(std::string_view node, std::string_view ns, std::string_view name) {
  pod_item item;
  item.combined.reserve(node.size() + ns.size() + name.size() + 2);
  item.combined.append(node).push_back('/');
  item.combined.append(ns).push_back('/');
  item.combined.append(name);
  item.node_len = node.size();
  worker& w = worker_of(node);
  bool fresh = false;
  {
    std::lock_guard lock(w.mu);
    if (stopping_.load()) {
      return false;
    }
    if (w.pod_waiting.insert(item.combined).second) {
      w.pod_order.push_back(std::move(item));
      outstanding_.fetch_add(1);
      fresh = true;
    }
  }
  enqueued(w, ctr_.pod_updates, fresh);
  return true;
}

// After an update was put on (fresh) or merged into (coalesced) worker w's queue, outside
// its lock: count it and wake the worker only when there is something new to do.
void worker_pool::enqueued(worker& w, metrics::count& counter, bool fresh) {
  bump(counter);
  if (fresh) {
    w.cv.notify_one();
  } else {
    bump(ctr_.coalesced);
  }
}

void worker_pool::start() {
  if (!threaded_ || started_.exchange(true) || stopping_.load()) {
    return;
  }
  for (auto& w : workers_) {
    worker* wp = w.get();
    wp->thread = std::thread([this, wp] { loop(*wp); });
  }
}

void worker_pool::stop() {
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mu);
      stopping_.store(true);
    }
    w->cv.notify_all();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) {
      w->thread.join();
    }
  }
}

void worker_pool::loop(worker& w) {
  for (;;) {
    work_item item;
    {
      std::unique_lock lock(w.mu);
      w.cv.wait(lock, [&] { return stopping_.load() || w.has_work(); });
      if (stopping_.load()) {
        return;
      }
      w.pop(item);
    }
    handle(item);
  }
}

void worker_pool::handle(work_item& item) {
  try {
    if (item.is_node) {
      handler_.node_changed(item.node, std::move(item.update.taints), item.update.replay);
    } else {
      handler_.pod_changed(item.pod.node(), item.pod.key());
    }
  } catch (const std::exception& e) {
    // A throwing pod_index or sink (or bad_alloc) must not kill the worker. The update is
    // lost; the next update for the same node or pod decides again from the latest state.
    log_->error("failed to handle {} update {}: {}", item.is_node ? "node" : "pod",
                item.is_node ? item.node : item.pod.combined, e.what());
  }
  if (outstanding_.fetch_sub(1) == 1) {
    std::lock_guard lock(idle_mu_);
    idle_cv_.notify_all();
  }
}

std::size_t worker_pool::run_until_idle() {
  if (threaded_) {
    return 0;
  }
  std::size_t handled = 0;
  bool any = true;
  while (any) {
    any = false;
    for (auto& w : workers_) {
      for (;;) {
        work_item item;
        {
          std::lock_guard lock(w->mu);
          if (stopping_.load() || !w->has_work()) {
            break;
          }
          w->pop(item);
        }
        handle(item);
        ++handled;
        any = true;
      }
    }
  }
  return handled;
}

bool worker_pool::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(idle_mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return outstanding_.load() == 0; });
}

std::vector<std::size_t> worker_pool::depths() const {
  std::vector<std::size_t> out;
  out.reserve(workers_.size());
  for (const auto& w : workers_) {
    std::lock_guard lock(w->mu);
    out.push_back(w->node_order.size() + w->pod_order.size());
  }
  return out;
}

}  // namespace tec::controller::detail
