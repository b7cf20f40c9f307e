#pragma once

// RFC 3339 timestamps in UTC: the one formatter, with the digits of a second each user needs
// (the API's metav1.Time: none; metav1.MicroTime: six; the JSON reports on the metrics port:
// three), and the one parser of the API's timestamps. Pure functions, any thread.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tec::base {

/// How many digits of the second follow the seconds (the time is floored to them, never
/// rounded up).
enum class rfc3339_digits : std::uint8_t { none, milliseconds, microseconds };

/// "2024-05-01T12:00:00Z", "2024-05-01T12:00:00.123Z" or "2024-05-01T12:00:00.123456Z".
[[nodiscard]] std::string format_rfc3339(std::chrono::system_clock::time_point t,
                                         rfc3339_digits digits = rfc3339_digits::none);

/// An RFC 3339 timestamp ("2024-05-01T12:34:56Z", optional fraction of up to nine digits, "Z"
/// or "+hh:mm") as seconds since the Unix epoch (the fraction dropped); nullopt when malformed
/// (a field out of range, a day the month does not have, anything after the offset).
[[nodiscard]] std::optional<std::int64_t> parse_rfc3339(std::string_view text) noexcept;

}  // namespace tec::base
