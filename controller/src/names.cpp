#include "tec/controller/controller.hpp"

// The text helpers of controller.hpp: label values and Event details.

namespace tec::controller {

std::string_view to_string(decision_kind kind) noexcept {
  switch (kind) {
    case decision_kind::scheduled:
      return "scheduled";
    case decision_kind::would_delete:
      return "would_delete";
    case decision_kind::cancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string_view to_string(cancel_reason reason) noexcept {
  switch (reason) {
    case cancel_reason::none:
      return "none";
    case cancel_reason::untainted:
      return "untainted";
    case cancel_reason::pod_gone:
      return "pod_gone";
    case cancel_reason::replaced:
      return "replaced";
  }
  return "unknown";
}

std::string_view to_string(skip_reason reason) noexcept {
  switch (reason) {
    case skip_reason::annotation:
      return "annotation";
    case skip_reason::namespace_annotation:
      return "namespace_annotation";
    case skip_reason::namespace_:
      return "namespace";
    case skip_reason::pod_selector:
      return "pod_selector";
    case skip_reason::mirror:
      return "mirror";
    case skip_reason::terminal:
      return "terminal";
    case skip_reason::daemon_set:
      return "daemonset";
    case skip_reason::taint_ignored:
      return "taint_ignored";
  }
  return "unknown";
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
