// Keeps the controller's per-eviction info logs out of test output (warnings still show).

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

namespace {

class quiet_logs final : public ::testing::Environment {
public:
  void SetUp() override { spdlog::set_level(spdlog::level::warn); }
};

[[maybe_unused]] const auto* const registered = ::testing::AddGlobalTestEnvironment(new quiet_logs);

}  // namespace
