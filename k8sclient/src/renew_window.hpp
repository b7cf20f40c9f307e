#pragma once

#include <chrono>

namespace tec::k8sclient {

/// The time by which a leader must have renewed its Lease, counted as client-go's
/// LeaderElector.renew counts it: each renewal cycle begins a retry period after the last one
/// succeeded and gets the whole renew deadline from its own beginning (attempts every retry
/// period under a renew-deadline timeout). A renewal may therefore end up to retry period +
/// renew deadline after the last success (12 s with the 15/10/2 s defaults), not a renew
/// deadline after it. Durations are clamped by the caller (int32 seconds each), so the sums
/// cannot overflow a steady_clock time point. Not thread-safe: the elector's executor only.
class renew_window {
public:
  using time_point = std::chrono::steady_clock::time_point;

  renew_window(std::chrono::milliseconds retry_period, std::chrono::milliseconds renew_deadline)
      : retry_(retry_period), deadline_(renew_deadline) {}

  /// The Lease was acquired or renewed at `at`: the next cycle begins a retry period later.
  void succeeded(time_point at) { by_ = at + retry_ + deadline_; }
  /// A renewal cycle (its first attempt) begins at `at`.
  void cycle_began(time_point at) { by_ = at + deadline_; }
  [[nodiscard]] time_point renew_by() const { return by_; }
  [[nodiscard]] bool expired(time_point now) const { return now >= by_; }

private:
  std::chrono::milliseconds retry_;
  std::chrono::milliseconds deadline_;
  time_point by_{};
};

}  // namespace tec::k8sclient
