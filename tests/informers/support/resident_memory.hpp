#pragma once

// Test-only: the process's resident memory from /proc, for the tests that bound what a hostile
// or huge LIST costs (informer_test, hostile_reflector_test).

#include <cstdlib>
#include <fstream>
#include <string>

namespace tec::informers::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized = true;  // their allocators make resident memory meaningless
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

/// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), or -1.
inline long status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
    }
  }
  return -1;
}

/// Resets the peak resident size (VmHWM) to the current one; false where the kernel refuses.
inline bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return out.good();
}

}  // namespace tec::informers::testing
