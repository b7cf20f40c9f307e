#include "entry.hpp"

namespace tec::timedqueue::detail {

entry_info entry::info(hold_reason hold_now, std::optional<time_point> deadline) const {
  entry_info out;
  out.state = state;
  out.created_at = created_at;
  out.fire_at = fire_at;
  out.next_attempt_at = deadline ? *deadline : state == entry_state::held ? due_at : fire_at;
  if (state == entry_state::held) {
    out.hold = hold_now;
    out.hold_group = hold_group;
  }
  const group_names names = groups();
  for (std::size_t c = 0; c < group_classes; ++c) {
    out.groups[c] = std::string(names[c]);
  }
  out.deferred = deferral{not_before, defer_tag};
  out.payload = std::string(payload());
  out.generation = generation;
  out.attempts = attempts;
  if (last_error) {
    out.last_error = *last_error;
  }
  return out;
}

}  // namespace tec::timedqueue::detail
