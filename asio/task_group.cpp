#include "tec/asio/task_group.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <vector>

namespace tec::async {

void task_group::close() {
  const std::lock_guard lock(mutex_);
  closed_ = true;
}

void task_group::cancel(std::optional<int> stage) {
  std::vector<std::shared_ptr<entry>> targets;
  {
    const std::lock_guard lock(mutex_);
    for (const auto& e : tasks_) {
      if (!stage || e->stage == *stage) {
        targets.push_back(e);
      }
    }
  }
  // Emitted without the lock: a handler the emission runs may finish a task (finish() locks).
  // The shared pointers keep each signal alive through its emission.
  boost::asio::post(executor_, [targets = std::move(targets)] {
    for (const auto& e : targets) {
      e->signal.emit(boost::asio::cancellation_type::terminal);
    }
  });
}

bool task_group::wait_idle(std::optional<int> stage, clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return idle_.wait_until(lock, deadline, [&] {
    return std::none_of(tasks_.begin(), tasks_.end(),
                        [&](const auto& e) { return !stage || e->stage == *stage; });
  });
}

std::size_t task_group::running(std::optional<int> stage) const {
  const std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(std::count_if(
      tasks_.begin(), tasks_.end(), [&](const auto& e) { return !stage || e->stage == *stage; }));
}

std::shared_ptr<task_group::entry> task_group::admit(int stage) {
  const std::lock_guard lock(mutex_);
  if (closed_) {
    return nullptr;
  }
  return tasks_.emplace_back(std::make_shared<entry>(stage));
}

void task_group::finish(const std::shared_ptr<entry>& e) {
  {
    const std::lock_guard lock(mutex_);
    tasks_.remove(e);
  }
  idle_.notify_all();
}

}  // namespace tec::async
