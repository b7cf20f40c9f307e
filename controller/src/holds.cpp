#include "holds.hpp"
#include "tec/base/rfc3339.hpp"

#include <algorithm>

namespace tec::controller {

hold_mark parse_hold(std::string_view value) {
  hold_mark out;
  if (value.size() > max_hold_value) {
    out.value = std::string(value.substr(0, max_hold_value)) + "...";
    return out;
  }
  out.value = std::string(value);
  out.until_unix = base::parse_rfc3339(value);
  if (out.until_unix && *out.until_unix > latest_hold_unix) {
    out.until_unix.reset();
    out.too_late = true;
  }
  return out;
}

}  // namespace tec::controller

namespace tec::controller::detail {

wall_time wall_of_unix(std::int64_t seconds) {
  return wall_time(std::chrono::seconds(std::clamp<std::int64_t>(seconds, 0, latest_unix)));
}

hold_verdict hold_book::see(std::string_view key, const std::optional<hold_mark>& mark,
                            wall_time now) {
  std::lock_guard lock(mu_);
  const auto it = records_.find(key);
  if (!mark) {
    if (it != records_.end()) {
      records_.erase(it);
    }
    return {};
  }
  if (it != records_.end() && it->second.value == mark->value) {
    const record& r = it->second;
    if (r.ignored || wall_of_unix(r.until_unix) <= now) {
      return {};
    }
    return {wall_of_unix(r.until_unix), std::nullopt};
  }
  record r;
  r.value = mark->value;
  hold_verdict out;
  if (mark->too_late) {
    r.ignored = true;
    out.ignored = "later than 2200-01-01T00:00:00Z, the latest time a hold may name";
  } else if (mark->malformed()) {
    r.ignored = true;
    out.ignored = "not an RFC 3339 time";
  } else if (wall_of_unix(*mark->until_unix) <= now) {
    r.ignored = true;
    r.until_unix = *mark->until_unix;
    out.ignored = "already past when first seen";
  } else {
    r.until_unix = *mark->until_unix;
    out.until = wall_of_unix(r.until_unix);
  }
  if (it != records_.end()) {
    it->second = std::move(r);
  } else {
    records_.emplace(std::string(key), std::move(r));
  }
  return out;
}

std::optional<wall_time> hold_book::in_force(std::string_view key, wall_time now) const {
  std::lock_guard lock(mu_);
  const auto it = records_.find(key);
  if (it == records_.end() || it->second.ignored || wall_of_unix(it->second.until_unix) <= now) {
    return std::nullopt;
  }
  return wall_of_unix(it->second.until_unix);
}

void hold_book::forget(std::string_view key) {
  std::lock_guard lock(mu_);
  const auto it = records_.find(key);
  if (it != records_.end()) {
    records_.erase(it);
  }
}

std::size_t hold_book::size() const {
  std::lock_guard lock(mu_);
  return records_.size();
}

}  // namespace tec::controller::detail
