#include "controller/support/fakes.hpp"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>
#include <utility>

#include "tec/timedqueue/asio_driver.hpp"

namespace tec::controller::testing {

namespace {

std::string key_of(std::string_view ns, std::string_view name) {
  std::string key(ns);
  key.push_back('/');
  key.append(name);
  return key;
}

}  // namespace

// --- fake_index ---

void fake_index::put(const pod_view& pod) {
  std::lock_guard lock(mu_);
  pods_.insert_or_assign(key_of(pod.namespace_, pod.name), pod);
}

std::optional<pod_view> fake_index::erase(std::string_view ns, std::string_view name) {
  std::lock_guard lock(mu_);
  const auto it = pods_.find(key_of(ns, name));
  if (it == pods_.end()) {
    return std::nullopt;
  }
  pod_view old = std::move(it->second);
  pods_.erase(it);
  return old;
}

std::vector<pod_view> fake_index::all() const {
  std::lock_guard lock(mu_);
  std::vector<pod_view> out;
  out.reserve(pods_.size());
  for (const auto& [key, pod] : pods_) {
    out.push_back(pod);
  }
  return out;
}

std::vector<pod_view> fake_index::pods_on_node(std::string_view node) const {
  if (on_pods_on_node) {
    on_pods_on_node(node);
  }
  std::lock_guard lock(mu_);
  std::vector<pod_view> out;
  for (const auto& [key, pod] : pods_) {
    if (pod.node_name == node) {
      out.push_back(pod);
    }
  }
  return out;
}

std::optional<pod_view> fake_index::get_pod(std::string_view ns, std::string_view name) const {
  std::lock_guard lock(mu_);
  const auto it = pods_.find(key_of(ns, name));
  if (it == pods_.end()) {
    return std::nullopt;
  }
  return it->second;
}

// --- recording_sink ---

void recording_sink::evict(eviction_request request, std::function<void(eviction_result)> done) {
  const pod_ref& pod = request.pod;
  bool current = false;
  if (api_ != nullptr) {
    const auto p = api_->get_pod(pod.namespace_, pod.name);
    current = p && p->uid == pod.uid;
  }
  std::optional<eviction_status> now;
  {
    std::lock_guard lock(mu_);
    calls_.push_back(call{pod, current, request.cancelled, request.stuck, request.method,
                          request.node, request.causes});
    if (hold_) {
      held_.emplace_back(pod, std::move(done));
    } else if (!script_.empty() && (!script_applies_to_ || script_applies_to_(pod))) {
      now = script_.front();
      script_.pop_front();
      if (*now == eviction_status::blocked && request.method != eviction_method::evict) {
        now = eviction_status::deleted;  // only the Eviction API refuses; a DELETE goes through
      }
    } else {
      now = eviction_status::deleted;
    }
    // Under the lock: a waiter that sees this call (e.g. held() == n) may release it, let
    // the controller shut down and destroy this sink at once; a notify after the unlock
    // would then touch a destroyed condition variable (TSan, Threaded.Shutdown...).
    cv_.notify_all();
  }
  if (now) {
    finish(pod, done, *now);
  }
}

void recording_sink::record_event(const pod_ref& pod, event_kind kind, std::string_view detail) {
  {
    std::lock_guard lock(mu_);
    events_.emplace_back(pod, kind);
    event_details_.emplace_back(detail);
    cv_.notify_all();  // under the lock, as in evict()
  }
}

void recording_sink::finish(const pod_ref& pod, std::function<void(eviction_result)>& done,
                            eviction_status status) {
  if (status == eviction_status::deleted && api_ != nullptr) {
    const auto p = api_->get_pod(pod.namespace_, pod.name);
    if (p && p->uid == pod.uid) {  // preconditions.uid: never deletes a re-created pod.
      api_->erase(pod.namespace_, pod.name);
      if (on_deleted) {
        on_deleted(*p);
      }
    }
  }
  eviction_result result;
  result.status = status;
  if (status == eviction_status::failed || status == eviction_status::blocked) {
    std::lock_guard lock(mu_);
    result.error = failure_message_;
  }
  done(std::move(result));
}

void recording_sink::set_failure_message(std::string message) {
  std::lock_guard lock(mu_);
  failure_message_ = std::move(message);
}

void recording_sink::set_hold(bool hold) {
  std::lock_guard lock(mu_);
  hold_ = hold;
}

void recording_sink::script(std::vector<eviction_status> results,
                            std::function<bool(const pod_ref&)> applies_to) {
  std::lock_guard lock(mu_);
  script_.assign(results.begin(), results.end());
  script_applies_to_ = std::move(applies_to);
}

std::optional<pod_ref> recording_sink::release_oldest(eviction_status status) {
  return release(0, status);
}

std::optional<pod_ref> recording_sink::release(std::size_t index, eviction_status status) {
  std::pair<pod_ref, std::function<void(eviction_result)>> entry;
  {
    std::lock_guard lock(mu_);
    if (index >= held_.size()) {
      return std::nullopt;
    }
    const auto it = held_.begin() + static_cast<std::ptrdiff_t>(index);
    entry = std::move(*it);
    held_.erase(it);
  }
  finish(entry.first, entry.second, status);
  return entry.first;
}

void recording_sink::drop_held() {
  std::deque<std::pair<pod_ref, std::function<void(eviction_result)>>> dropped;
  {
    std::lock_guard lock(mu_);
    dropped.swap(held_);
  }
}

std::size_t recording_sink::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

std::vector<recording_sink::call> recording_sink::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::vector<std::pair<pod_ref, event_kind>> recording_sink::events() const {
  std::lock_guard lock(mu_);
  return events_;
}

std::vector<std::string> recording_sink::event_details() const {
  std::lock_guard lock(mu_);
  return event_details_;
}

std::size_t recording_sink::evictions_of(std::string_view name) const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& c : calls_) {
    n += c.pod.name == name ? 1U : 0U;
  }
  return n;
}

bool recording_sink::evicted_uid(std::string_view uid) const {
  std::lock_guard lock(mu_);
  for (const auto& c : calls_) {
    if (c.pod.uid == uid) {
      return true;
    }
  }
  return false;
}

std::size_t recording_sink::events_of(std::string_view name, event_kind kind) const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [pod, k] : events_) {
    n += (pod.name == name && k == kind) ? 1U : 0U;
  }
  return n;
}

bool recording_sink::wait_until(const std::function<bool()>& pred,
                                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mu_);
  for (;;) {
    lock.unlock();
    const bool ok = pred();
    lock.lock();
    if (ok) {
      return true;
    }
    // Bounded: re-check at least every 10 ms in case the state changed elsewhere.
    const auto wake =
        std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(10));
    if (cv_.wait_until(lock, wake) == std::cv_status::timeout &&
        std::chrono::steady_clock::now() >= deadline) {
      lock.unlock();
      return pred();
    }
  }
}

// --- thread_driver ---

struct thread_driver::impl {
  impl() : drv(io.get_executor(), io.get_executor()), thread([this] { io.run(); }) {}

  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work =
      boost::asio::make_work_guard(io);
  timedqueue::asio_driver drv;
  std::thread thread;
};

thread_driver::thread_driver() : impl_(std::make_unique<impl>()) {}

thread_driver::~thread_driver() {
  impl_->io.stop();
  impl_->thread.join();
}

timedqueue::time_point thread_driver::now() const {
  return impl_->drv.now();
}

void thread_driver::arm(timedqueue::time_point deadline, std::function<void()> on_due) {
  impl_->drv.arm(deadline, std::move(on_due));
}

void thread_driver::disarm() {
  impl_->drv.disarm();
}

void thread_driver::post(std::function<void()> fn) {
  impl_->drv.post(std::move(fn));
}

// --- builders ---

taint make_taint(int i) {
  taint t;
  t.key = "testTaint" + std::to_string(i);
  t.value = "test" + std::to_string(i);
  t.effect = taint_effect::no_execute;
  return t;
}

toleration make_toleration(int i, std::int64_t seconds) {
  toleration tol;
  tol.key = "testTaint" + std::to_string(i);
  tol.value = "test" + std::to_string(i);
  tol.op = toleration_operator::equal;
  tol.effect = taint_effect::no_execute;
  if (seconds >= 0) {
    tol.seconds = seconds;
  }
  return tol;
}

std::string fresh_uid() {
  static std::atomic<std::uint64_t> next{1};
  return "uid-" + std::to_string(next.fetch_add(1));
}

pod_view make_pod(std::string name, std::string node, std::vector<toleration> tolerations) {
  pod_view p;
  p.namespace_ = "default";
  p.name = std::move(name);
  p.uid = fresh_uid();
  p.node_name = std::move(node);
  p.tolerations = std::move(tolerations);
  p.phase = pod_phase::running;
  return p;
}

node_view make_node(std::string name, std::vector<taint> taints) {
  node_view n;
  n.name = std::move(name);
  n.taints = std::move(taints);
  return n;
}

controller_options threaded_options(std::size_t workers) {
  using namespace std::chrono_literals;
  controller_options o;
  o.workers = workers;
  o.threaded = true;
  o.retry.initial = 1ms;
  o.retry.max = 5ms;
  o.retry.seed = 7;
  return o;
}

}  // namespace tec::controller::testing
