#pragma once

// Timestamps as the API writes them (metav1.Time and metav1.MicroTime).

#include <chrono>
#include <string>

namespace tec::k8sclient {

/// RFC 3339 in UTC: "2024-05-01T12:00:00Z" (metav1.Time) or, with `microseconds`,
/// "2024-05-01T12:00:00.123456Z" (metav1.MicroTime).
std::string format_rfc3339(std::chrono::system_clock::time_point t, bool microseconds = false);

}  // namespace tec::k8sclient
