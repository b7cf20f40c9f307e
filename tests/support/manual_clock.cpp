#include "support/manual_clock.hpp"

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <utility>

namespace tec::test {

struct manual_clock::entry {
  boost::asio::any_io_executor ex;
  std::function<void()> fire;
  std::atomic<bool> alive{true};
};

class manual_clock::handle final : public alarm {
public:
  explicit handle(std::shared_ptr<entry> e) : entry_(std::move(e)) {}
  ~handle() override { entry_->alive = false; }
  handle(const handle&) = delete;
  handle& operator=(const handle&) = delete;

private:
  std::shared_ptr<entry> entry_;
};

manual_clock::manual_clock(time_point start, base::wall_clock::time_point wall_start)
    : start_(start), wall_start_(wall_start), now_(start) {}

manual_clock::time_point manual_clock::now() {
  std::lock_guard lock(mu_);
  return now_;
}

base::wall_clock::time_point manual_clock::wall() {
  std::lock_guard lock(mu_);
  return wall_start_ + std::chrono::duration_cast<base::wall_clock::duration>(now_ - start_);
}

std::unique_ptr<base::clock::alarm> manual_clock::at(const boost::asio::any_io_executor& ex,
                                                     time_point when, std::function<void()> fire) {
  auto e = std::make_shared<entry>();
  e->ex = ex;
  e->fire = std::move(fire);
  std::lock_guard lock(mu_);
  pending_.emplace(when, e);
  post_due();
  return std::make_unique<handle>(std::move(e));
}

void manual_clock::advance(std::chrono::nanoseconds d) {
  std::lock_guard lock(mu_);
  now_ += std::chrono::duration_cast<time_point::duration>(d);
  post_due();
}

std::optional<manual_clock::time_point> manual_clock::next_alarm() {
  std::lock_guard lock(mu_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second->alive) {
      return it->first;
    }
    it = pending_.erase(it);
  }
  return std::nullopt;
}

std::size_t manual_clock::armed() {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [when, e] : pending_) {
    n += e->alive ? 1U : 0U;
  }
  return n;
}

void manual_clock::post_due() {
  while (!pending_.empty() && pending_.begin()->first <= now_) {
    auto e = std::move(pending_.begin()->second);
    pending_.erase(pending_.begin());
    if (!e->alive) {
      continue;
    }
    // The check runs on the alarm's executor, where its owner destroys it: an alarm destroyed
    // after it came due but before this ran never fires.
    boost::asio::post(e->ex, [e] {
      if (e->alive.exchange(false)) {
        e->fire();
      }
    });
  }
}

}  // namespace tec::test
