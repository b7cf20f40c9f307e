#include "tec/controller/ports.hpp"

#include "tec/base/rfc3339.hpp"

#include <array>
#include <cstdio>

namespace tec::controller {

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
