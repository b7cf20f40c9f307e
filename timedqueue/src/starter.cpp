#include "starter.hpp"

#include <utility>

namespace tec::timedqueue::detail {

namespace {

/// Tells the gate that a post is done (see starter::post).
class posted_guard {
public:
  posted_guard(std::mutex& mu, run_gate& gate) : mu_(mu), gate_(gate) {}
  posted_guard(const posted_guard&) = delete;
  posted_guard& operator=(const posted_guard&) = delete;
  ~posted_guard() {
    const std::lock_guard lock(mu_);
    gate_.post_ended();
  }

private:
  std::mutex& mu_;
  run_gate& gate_;
};

}  // namespace

/// Entries whose work was posted to the driver and not yet started.
struct starter::batch {
  batch(std::shared_ptr<start_target> to, std::vector<entry*> due)
      : target(std::move(to)), entries(std::move(due)) {}
  batch(const batch&) = delete;
  batch& operator=(const batch&) = delete;
  ~batch() {
    for (; next < entries.size(); ++next) {
      target->drop_unstarted(entries[next]);
    }
  }

  std::shared_ptr<start_target> target;
  std::vector<entry*> entries;
  std::size_t next = 0;
};

void starter::post(std::shared_ptr<start_target> target, std::vector<entry*> due) {
  const posted_guard guard(mu_, gate_);
  std::shared_ptr<batch> running;  // released after the mutex (its destructor locks it)
  {
    const std::lock_guard lock(mu_);
    running = starting_.lock();
    if (running && !gate_.closed()) {
      running->entries.insert(running->entries.end(), due.begin(), due.end());
      return;
    }
  }
  auto b = std::make_shared<batch>(std::move(target), std::move(due));
  {
    const std::lock_guard lock(mu_);
    starting_ = b;
  }
  post_batch(std::move(b));
}

// The batch keeps its target alive, and with it the queue that owns this starter.
void starter::post_batch(std::shared_ptr<batch> b) {
  drv_.post([this, b = std::move(b)]() mutable { run(std::move(b)); });
}

void starter::run(std::shared_ptr<batch> b) {
  entry* e = nullptr;
  {
    const std::lock_guard lock(mu_);
    if (b->next < b->entries.size()) {
      e = b->entries[b->next++];
    }
  }
  if (e != nullptr) {
    b->target->start_one(e);
  }
  {
    const std::lock_guard lock(mu_);
    if (b->next >= b->entries.size() || gate_.closed()) {
      if (starting_.lock() == b) {
        starting_.reset();
      }
      return;
    }
    gate_.post_begins();
  }
  const posted_guard guard(mu_, gate_);
  post_batch(std::move(b));
}

}  // namespace tec::timedqueue::detail
