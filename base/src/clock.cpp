#include "tec/base/clock.hpp"

namespace tec::base {

namespace {

class real_time final : public clock {
public:
  time_point now() override { return std::chrono::steady_clock::now(); }
  wall_clock::time_point wall() override { return wall_clock::now(); }
};

}  // namespace

std::shared_ptr<clock> real_clock() {
  static const auto source = std::make_shared<real_time>();
  return source;
}

}  // namespace tec::base
