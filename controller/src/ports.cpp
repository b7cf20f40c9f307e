#include "tec/controller/ports.hpp"

#include "tec/base/rfc3339.hpp"

#include <array>
#include <cstdio>

namespace tec::controller {

namespace {

// What an Event of one kind says: its type and reason, and its message around the pod's
// "<ns>/<name>" (the detail follows `after`; kinds without `after` have no detail).
struct event_text {
  std::string_view type;
  std::string_view reason;
  std::string_view before;
  std::string_view after;
};

// By event_kind.
constexpr std::array<event_text, 8> event_texts{{
    {event_type, event_reason, "Marking for deletion Pod ", ""},
    {event_type, event_reason, "Cancelling deletion of Pod ", ""},
    {"Warning", "TaintEvictionFailed", "Cannot delete Pod ", ": "},
    {event_type, "TaintEvictionScheduled", "Pod ", " will be evicted at "},
    {"Warning", "TaintEvictionBlocked", "Pod ", " not evicted yet: "},
    {"Warning", "TaintEvictionFallback", "Deleting Pod ", " "},
    {"Warning", "TaintEvictionHoldIgnored", "Ignoring the hold-until annotation of ", ": "},
    {event_type, "TaintEvictionHeld", "Eviction of Pod ", " held: "},
}};

const event_text& text_of(event_kind kind) {
  return event_texts.at(static_cast<std::size_t>(kind));
}

}  // namespace

std::string_view event_type_of(event_kind kind) {
  return text_of(kind).type;
}

std::string_view event_reason_of(event_kind kind) {
  return text_of(kind).reason;
}

std::string event_message(const pod_ref& pod, event_kind kind, std::string_view detail) {
  const event_text& text = text_of(kind);
  std::string msg(text.before);
  if (!pod.namespace_.empty()) {
    msg.append(pod.namespace_).push_back('/');
  }
  msg.append(pod.name);
  if (!text.after.empty()) {
    msg.append(text.after).append(detail);
  }
  return msg;
}

std::string describe_taint(const taint& t) {
  std::string out = t.key;
  if (!t.value.empty()) {
    out.push_back('=');
    out += t.value;
  }
  out += t.effect == taint_effect::no_execute ? ":NoExecute" : ":Other";
  return out;
}

std::string scheduled_event_detail(std::chrono::system_clock::time_point due, const taint& t,
                                   std::int64_t seconds) {
  std::string out = base::format_rfc3339(due);
  out.append(": taint ").append(describe_taint(t));
  out.append(", tolerationSeconds ").append(std::to_string(seconds));
  return out;
}

}  // namespace tec::controller
