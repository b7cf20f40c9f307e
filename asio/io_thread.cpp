#include "tec/asio/io_thread.hpp"

#include <pthread.h>

#include <exception>
#include <utility>

namespace tec::async {

io_thread::io_thread(std::string name) : name_(std::move(name)), work_(io_.get_executor()) {}

io_thread::~io_thread() {
  if (thread_.joinable()) {
    finish(std::chrono::steady_clock::now());
  }
}

void io_thread::start(std::function<void(const std::exception&)> on_failure) {
  {
    const std::lock_guard lock(mutex_);
    started_ = true;
  }
  thread_ = std::thread([this, on_failure = std::move(on_failure)] {
    // Linux keeps 15 characters and a NUL.
    ::pthread_setname_np(::pthread_self(), name_.substr(0, 15).c_str());
    try {
      io_.run();
    } catch (const std::exception& e) {
      if (on_failure) {
        on_failure(e);
      }
    }
    {
      const std::lock_guard lock(mutex_);
      ended_ = true;
    }
    done_.notify_all();
  });
}

bool io_thread::finish(std::chrono::steady_clock::time_point deadline) {
  work_.reset();
  if (!thread_.joinable()) {
    return true;
  }
  bool drained = false;
  {
    std::unique_lock lock(mutex_);
    drained = done_.wait_until(lock, deadline, [this] { return ended_; });
  }
  if (!drained) {
    io_.stop();
  }
  thread_.join();
  return drained;
}

bool io_thread::running() const {
  const std::lock_guard lock(mutex_);
  return started_ && !ended_;
}

}  // namespace tec::async
