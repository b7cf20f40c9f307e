#pragma once

// Time arithmetic shared by the queue and its admission control (private to timedqueue/src).

#include "tec/timedqueue/admission.hpp"

namespace tec::timedqueue {

/// `t + d`, or time_point::max() where that would overflow (a deadline that is never reached).
inline time_point saturating_add(time_point t, duration d) {
  if (d.count() > 0 && t > time_point::max() - d) {
    return time_point::max();
  }
  return t + d;
}

}  // namespace tec::timedqueue
