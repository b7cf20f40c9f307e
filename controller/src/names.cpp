#include "tec/controller/controller.hpp"

#include <array>

// The text helpers of controller.hpp: label values and Event details.

namespace tec::controller {

namespace {

// names[e], or "unknown" for a value outside the enum.
template <class Enum, std::size_t N>
std::string_view name_of(Enum e, const std::array<std::string_view, N>& names) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : "unknown";
}

}  // namespace

std::string_view to_string(decision_kind kind) noexcept {
  static constexpr std::array<std::string_view, 3> names{"scheduled", "would_delete", "cancelled"};
  return name_of(kind, names);
}

std::string_view to_string(cancel_reason reason) noexcept {
  static constexpr std::array<std::string_view, 4> names{"none", "untainted", "pod_gone",
                                                         "replaced"};
  return name_of(reason, names);
}

std::string_view to_string(skip_reason reason) noexcept {
  static constexpr std::array<std::string_view, skip_reason_count> names{
      "annotation", "namespace_annotation", "namespace", "pod_selector", "mirror", "terminal",
      "daemonset",  "taint_ignored"};
  return name_of(reason, names);
}

std::string event_detail(std::string_view text) {
  constexpr std::string_view ellipsis = "...";
  std::string out;
  const bool clipped = text.size() > max_event_detail;
  if (clipped) {
    // Cut at a UTF-8 character boundary: never before a continuation byte (10xxxxxx).
    std::size_t cut = max_event_detail - ellipsis.size();
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) {
      --cut;
    }
    text = text.substr(0, cut);
  }
  out.reserve(text.size() + (clipped ? ellipsis.size() : 0));
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20U || u == 0x7FU ? ' ' : c);
  }
  if (clipped) {
    out.append(ellipsis);
  }
  return out;
}

}  // namespace tec::controller
