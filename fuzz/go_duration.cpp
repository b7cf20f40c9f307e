// Fuzz target: the Go-duration parser (tec/base/duration.hpp) of the flags and the policy
// file.
//
// parse_go_duration is checked against an exact model of Go's time.ParseDuration grammar
// ([-+]?("0" | ([0-9]*(\.[0-9]*)?unit)+), units ns us µs μs ms s m h, at least one digit per
// number): the same inputs are accepted, and the value is the model's to the millisecond.
// The model computes in integer nanoseconds; the parser in long double and rounds to
// milliseconds, so values agree within 1 ms and the 9.2e18 ns limit is fuzzy by 1 ms. Then:
// the sign of the text is the sign of the value, a "-" prefix negates, and format_duration's
// output parses back to the same value.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "support.hpp"
#include "tec/base/duration.hpp"

namespace {

__extension__ typedef __int128 i128;  // NOLINT(modernize-use-using): __extension__ for -Wpedantic

constexpr i128 limit_ns = static_cast<i128>(9'200'000'000'000'000'000ULL);  // the parser's
constexpr i128 saturated = static_cast<i128>(1) << 100;
constexpr i128 max_scale = static_cast<i128>(10'000'000'000) * 10'000'000'000;  // 20 digits

i128 saturating_add(i128 a, i128 b) {
  return a + b > saturated ? saturated : a + b;
}

/// Go's grammar, exactly; the magnitude in nanoseconds (saturated far above the limit), or
/// nullopt when the text is not a duration.
std::optional<i128> model_ns(std::string_view s) {
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    s.remove_prefix(1);
  }
  if (s == "0") {
    return 0;
  }
  if (s.empty()) {
    return std::nullopt;
  }
  i128 total = 0;
  while (!s.empty()) {
    i128 whole = 0;
    i128 frac = 0;  // the first 20 fraction digits; later ones weigh < 1e-7 ns
    i128 scale = 1;
    bool digits = false;
    std::size_t i = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      whole = whole > saturated ? whole : whole * 10 + (s[i] - '0');
      digits = true;
    }
    if (i < s.size() && s[i] == '.') {
      for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
        if (scale < max_scale) {
          frac = frac * 10 + (s[i] - '0');
          scale *= 10;
        }
        digits = true;
      }
    }
    if (!digits) {
      return std::nullopt;
    }
    std::size_t j = i;
    while (j < s.size() && s[j] != '.' && (s[j] < '0' || s[j] > '9')) {
      ++j;
    }
    const std::string_view unit = s.substr(i, j - i);
    i128 ns = 0;
    if (unit == "ns") {
      ns = 1;
    } else if (unit == "us" || unit == "\u00b5s" || unit == "\u03bcs") {
      ns = 1'000;
    } else if (unit == "ms") {
      ns = 1'000'000;
    } else if (unit == "s") {
      ns = 1'000'000'000;
    } else if (unit == "m") {
      ns = 60'000'000'000;
    } else if (unit == "h") {
      ns = 3'600'000'000'000;
    } else {
      return std::nullopt;
    }
    const i128 part = whole > saturated / ns ? saturated : whole * ns + frac * ns / scale;
    total = saturating_add(total, part);
    s.remove_prefix(j);
  }
  return total;
}

std::string show(std::optional<std::chrono::milliseconds> d) {
  return d ? std::to_string(d->count()) + "ms" : "nullopt";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using tec::base::format_duration;
  using tec::base::parse_go_duration;
  const std::string text(tec::fuzz::as_text(data, size));
  const auto parsed = parse_go_duration(text);
  const auto model = model_ns(text);

  const i128 fuzz_band = 1'000'000;  // 1 ms either side of the limit: either answer is right
  if (!model || *model > limit_ns + fuzz_band) {
    TEC_FUZZ_CHECK(!parsed, "accepted \"" + text + "\" as " + show(parsed));
  } else if (*model < limit_ns - fuzz_band) {
    TEC_FUZZ_CHECK(parsed.has_value(), "rejected \"" + text + "\"");
    const auto magnitude = static_cast<std::int64_t>((*model + 500'000) / 1'000'000);
    const std::int64_t got = parsed->count() < 0 ? -parsed->count() : parsed->count();
    TEC_FUZZ_CHECK(got - magnitude <= 1 && magnitude - got <= 1,
                   "\"" + text + "\" parsed as " + show(parsed) + ", Go says " +
                       std::to_string(magnitude) + "ms");
  }
  if (!parsed) {
    return 0;
  }
  const bool negative = !text.empty() && text.front() == '-';
  TEC_FUZZ_CHECK(negative ? parsed->count() <= 0 : parsed->count() >= 0,
                 "\"" + text + "\" parsed as " + show(parsed));
  if (!text.empty() && text.front() != '-' && text.front() != '+') {
    TEC_FUZZ_CHECK(parse_go_duration("-" + text) == -*parsed, "\"-" + text + "\"");
    TEC_FUZZ_CHECK(parse_go_duration("+" + text) == parsed, "\"+" + text + "\"");
  }
  const std::string formatted = format_duration(*parsed);
  TEC_FUZZ_CHECK(parse_go_duration(formatted) == parsed, "\"" + text + "\" -> " + show(parsed) +
                                                             " -> \"" + formatted + "\" -> " +
                                                             show(parse_go_duration(formatted)));
  return 0;
}
