#pragma once

// Go time.Duration text ("15s", "500ms", "1m30s", "1.5h", "0"): the format of Kubernetes'
// flags and of durations in its configuration files. Pure functions, any thread.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tec::base {

/// Parses a Go duration, rounded to milliseconds. A leading '-' gives a negative value
/// (callers that need a positive one check); nullopt when malformed (no unit, an unknown
/// unit, no digits) or beyond Go's int64-nanosecond range (~292 years).
std::optional<std::chrono::milliseconds> parse_go_duration(std::string_view text);

/// "1m30s"-style rendering for logs and messages ("0s", "250ms", "1h2m3.5s").
std::string format_duration(std::chrono::milliseconds d);

}  // namespace tec::base
