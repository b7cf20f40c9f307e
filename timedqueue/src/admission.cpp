#include "tec/timedqueue/admission.hpp"
#include "saturating_add.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace tec::timedqueue {

namespace {

/// Refills are sums of products of seconds and rates: a token due "now" may be short by a
/// rounding error, which must not cost a tick.
constexpr double token_epsilon = 1e-9;

/// While held entries wait for tokens, the queue is woken at most this often (it starts the
/// tokens due since, together), so a high rate does not cost a timer wake-up per start.
constexpr auto min_token_wake_interval = std::chrono::milliseconds(10);

/// A wake-up for a token that comes late (a busy machine) still counts the tokens due since
/// the planned time, as a waiter of client-go's rate.Limiter reserves its slot when it starts
/// to wait: lateness does not lower the rate. At most this much lateness is made up (a stalled
/// process does not release a long burst when it resumes).
constexpr auto max_token_catch_up = std::chrono::milliseconds(100);

}  // namespace

bool admission_control::set_limits(const admission_limits& limits, time_point now) {
  if (limits == limits_) {
    return false;
  }
  const bool rate_changed =
      limits.starts_per_second != limits_.starts_per_second || limits.burst != limits_.burst;
  limits_ = limits;
  if (rate_changed) {
    tokens_ = bucket_size();  // a new bucket starts full
    tokens_at_ = now;
  }
  for (auto& groups : blocked_) {
    for (auto& [group, set] : groups) {
      for (auto& [order, slot] : set) {
        slot.ticket->hold = hold_reason::rate_limit;
        ready_.emplace(order, slot);
      }
    }
    groups.clear();
  }
  return true;
}

bool admission_control::set_paused(bool paused) {
  if (paused == paused_) {
    return false;
  }
  paused_ = paused;
  if (paused) {
    token_wake_.reset();
    const auto mark = [](held_set& set) {
      for (auto& [order, slot] : set) {
        slot.ticket->held_by = hold_reason::paused;
      }
    };
    mark(ready_);
    for (auto& groups : blocked_) {
      for (auto& [group, set] : groups) {
        mark(set);
      }
    }
  }
  return true;
}

bool admission_control::on_due(admission_ticket& t, const group_names& groups, time_point due,
                               time_point now) {
  t.due_at = due;
  if (ready_.empty() && !paused_ && admits(groups, now)) {
    take_slots(groups);
    t.hold = hold_reason::none;
    t.held_by = hold_reason::none;
    return true;
  }
  ++held_;
  t.hold = hold_reason::rate_limit;
  t.hold_group = 0;
  t.held_by = paused_ ? hold_reason::paused : hold_reason::rate_limit;
  t.held_by_group = 0;
  ready_.emplace(held_order{t.due_at, t.generation}, held_slot{&t, groups});
  return false;
}

admission_control::pump_result admission_control::pump(time_point now, std::size_t max_admitted,
                                                       std::vector<admission_ticket*>& admitted) {
  const bool waited = token_wake_.has_value();
  token_wake_.reset();
  if (paused_) {
    return pump_result::idle;
  }
  if (waited && now > token_due_ && limits_.starts_per_second > 0) {
    catch_up(now);
  }
  std::size_t started = 0;
  while (!ready_.empty()) {
    if (started == max_admitted) {
      return pump_result::more_now;
    }
    const auto first = ready_.begin();
    const held_slot slot = first->second;
    if (const std::size_t c = full_group(slot.groups); c != group_classes) {
      auto [it, inserted] = blocked_[c].try_emplace(std::string(slot.groups[c]));
      it->second.insert(ready_.extract(first));
      slot.ticket->hold = hold_reason::group_limit;
      slot.ticket->hold_group = static_cast<std::uint8_t>(c);
      slot.ticket->held_by = hold_reason::group_limit;
      slot.ticket->held_by_group = static_cast<std::uint8_t>(c);
      continue;
    }
    if (!admits(slot.groups, now)) {
      wait_for_token(now);
      return pump_result::idle;
    }
    ready_.erase(first);
    --held_;
    take_slots(slot.groups);
    slot.ticket->hold = hold_reason::none;
    admitted.push_back(slot.ticket);
    ++started;
  }
  return pump_result::idle;
}

void admission_control::release(const group_names& groups) {
  for (std::size_t c = 0; c < group_classes; ++c) {
    if (groups[c].empty()) {
      continue;
    }
    const auto it = running_in_group_[c].find(groups[c]);
    assert(it != running_in_group_[c].end() && it->second > 0);
    if (it == running_in_group_[c].end()) {
      continue;
    }
    if (--it->second == 0) {
      running_in_group_[c].erase(it);
    }
    // One slot is free: the earliest entry blocked on this group gets another look.
    const auto blocked = blocked_[c].find(groups[c]);
    if (blocked != blocked_[c].end()) {
      auto node = blocked->second.extract(blocked->second.begin());
      if (blocked->second.empty()) {
        blocked_[c].erase(blocked);
      }
      node.mapped().ticket->hold = hold_reason::rate_limit;
      ready_.insert(std::move(node));
    }
  }
}

void admission_control::unhold(const admission_ticket& t, const group_names& groups) {
  const held_order at{t.due_at, t.generation};
  if (t.hold == hold_reason::group_limit) {
    const std::size_t c = t.hold_group;
    const auto it = blocked_[c].find(groups[c]);
    assert(it != blocked_[c].end());
    it->second.erase(at);
    if (it->second.empty()) {
      blocked_[c].erase(it);
    }
  } else {
    ready_.erase(at);
  }
  --held_;
}

void admission_control::drop_held() {
  ready_.clear();
  for (auto& groups : blocked_) {
    groups.clear();
  }
  token_wake_.reset();
  held_ = 0;
}

hold_reason admission_control::hold_of(const admission_ticket& t) const {
  if (t.hold == hold_reason::group_limit) {
    return hold_reason::group_limit;
  }
  return paused_ ? hold_reason::paused : hold_reason::rate_limit;
}

std::size_t admission_control::full_group(const group_names& groups) const {
  for (std::size_t c = 0; c < group_classes; ++c) {
    const std::uint32_t cap = limits_.max_running_per_group[c];
    if (cap == 0 || groups[c].empty()) {
      continue;
    }
    const auto it = running_in_group_[c].find(groups[c]);
    if (it != running_in_group_[c].end() && it->second >= cap) {
      return c;
    }
  }
  return group_classes;
}

bool admission_control::admits(const group_names& groups, time_point now) {
  if (full_group(groups) != group_classes) {
    return false;
  }
  if (limits_.starts_per_second <= 0) {
    return true;
  }
  refill(now);
  if (tokens_ < 1.0 - token_epsilon) {
    return false;
  }
  tokens_ = std::max(0.0, tokens_ - 1.0);
  return true;
}

void admission_control::take_slots(const group_names& groups) {
  for (std::size_t c = 0; c < group_classes; ++c) {
    if (!groups[c].empty()) {
      auto [it, inserted] = running_in_group_[c].try_emplace(std::string(groups[c]), 0);
      ++it->second;
    }
  }
}

void admission_control::refill(time_point now) {
  const double cap = bucket_size();
  if (now > tokens_at_) {
    // Tokens made up for a late wake-up (catch_up) may exceed the bucket: they are not cut.
    if (tokens_ < cap) {
      tokens_ = std::min(cap, tokens_ + std::chrono::duration<double>(now - tokens_at_).count() *
                                            limits_.starts_per_second);
    }
    tokens_at_ = now;
  }
}

double admission_control::bucket_size() const {
  return limits_.burst > 0 ? static_cast<double>(limits_.burst)
                           : std::max(1.0, std::ceil(limits_.starts_per_second));
}

void admission_control::catch_up(time_point now) {
  // Held entries waited for the token due at token_due_: the bucket fills (up to its size)
  // until then, and the tokens due between then and now are theirs on top of it.
  refill(token_due_);
  const auto late = std::min<duration>(now - token_due_, max_token_catch_up);
  tokens_ += std::chrono::duration<double>(late).count() * limits_.starts_per_second;
  tokens_at_ = now;
}

void admission_control::wait_for_token(time_point now) {
  // The next token comes in (1 - tokens) / rate seconds (the tokens due by a later wake-up are
  // counted then, see max_token_catch_up).
  const auto wait = std::chrono::duration<double>((1.0 - tokens_) / limits_.starts_per_second);
  const auto to_token = std::max<duration>(std::chrono::duration_cast<duration>(wait), duration(1));
  token_due_ = saturating_add(now, to_token);
  token_wake_ = saturating_add(
      now,
      std::max<duration>(to_token, std::chrono::duration_cast<duration>(min_token_wake_interval)));
}

}  // namespace tec::timedqueue
