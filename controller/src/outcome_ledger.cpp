#include "outcome_ledger.hpp"

#include <algorithm>
#include <utility>

namespace tec::controller {

std::string_view to_string(outcome_result result) noexcept {
  switch (result) {
    case outcome_result::deleted:
      return "deleted";
    case outcome_result::evicted:
      return "evicted";
    case outcome_result::deleted_after_fallback:
      return "deleted_after_fallback";
    case outcome_result::would_delete:
      return "would_delete";
    case outcome_result::pod_gone:
      return "pod_gone";
    case outcome_result::replaced:
      return "replaced";
    case outcome_result::cancelled_untainted:
      return "cancelled_untainted";
  }
  return "unknown";
}

}  // namespace tec::controller

namespace tec::controller::detail {

namespace {

bool same(const eviction_outcome& rec, const entry_id& id) {
  return rec.pod.uid == id.uid && rec.due == id.fire_at;
}

}  // namespace

void outcome_ledger::open(std::string_view key, eviction_outcome staged) {
  if (!on()) {
    return;
  }
  std::lock_guard lock(mu_);
  auto it = open_.find(key);
  if (it == open_.end()) {
    it = open_.emplace(std::string(key), records{}).first;
  }
  it->second.push_back(open_record{std::move(staged), false, std::nullopt});
}

void outcome_ledger::discard(std::string_view key, const entry_id& id) {
  if (!on()) {
    return;
  }
  std::lock_guard lock(mu_);
  const auto it = open_.find(key);
  if (it == open_.end()) {
    return;
  }
  records& list = it->second;
  // The last one: an older record with the same id belongs to the entry that is there.
  const auto r = std::find_if(list.rbegin(), list.rend(),
                              [&](const open_record& o) { return same(o.rec, id); });
  if (r == list.rend()) {
    return;
  }
  list.erase(std::next(r).base());
  if (list.empty()) {
    open_.erase(it);
  }
}

outcome_ledger::open_record* outcome_ledger::find(
    std::string_view key, const entry_id& id,
    std::unordered_map<std::string, records, string_hash, std::equal_to<>>::iterator& it) {
  it = open_.find(key);
  if (it == open_.end()) {
    return nullptr;
  }
  const auto r = std::find_if(it->second.begin(), it->second.end(),
                              [&](const open_record& o) { return same(o.rec, id); });
  return r == it->second.end() ? nullptr : &*r;
}

eviction_outcome outcome_ledger::take(
    std::unordered_map<std::string, records, string_hash, std::equal_to<>>::iterator it,
    open_record* r) {
  eviction_outcome out = std::move(r->rec);
  records& list = it->second;
  list.erase(list.begin() + (r - list.data()));
  if (list.empty()) {
    open_.erase(it);
  }
  return out;
}

void outcome_ledger::publish(eviction_outcome rec, outcome_result result) const {
  rec.result = result;
  rec.done = drv_.now();
  observer_(rec);
}

template <class Step>
void outcome_ledger::apply(std::string_view key, const entry_id& id, Step&& step) {
  if (!on()) {
    return;
  }
  std::optional<eviction_outcome> done;
  std::optional<outcome_result> result;
  {
    std::lock_guard lock(mu_);
    decltype(open_)::iterator it;
    open_record* r = find(key, id, it);
    if (r == nullptr) {
      return;
    }
    const step_result s = step(*r);
    if (!s.end) {
      return;
    }
    result = s.result;
    done = take(it, r);
  }
  if (result) {
    publish(std::move(*done), *result);
  }
}

void outcome_ledger::attempt_started(std::string_view key, const entry_id& id,
                                     std::uint32_t attempt, std::chrono::nanoseconds waited,
                                     std::string_view why, std::chrono::nanoseconds deferred,
                                     std::string_view deferred_why) {
  apply(key, id, [&](open_record& r) {
    r.in_flight = true;
    r.rec.attempts = std::max(r.rec.attempts, attempt);
    if (deferred > std::chrono::nanoseconds::zero()) {
      r.rec.deferred += deferred;
      r.rec.deferred_why = deferred_why;
    }
    if (waited > std::chrono::nanoseconds::zero()) {
      r.rec.waited += waited;
      r.rec.waited_why = why;
    }
    return step_result{};
  });
}

void outcome_ledger::attempt_failed(std::string_view key, const entry_id& id,
                                    std::string_view error, bool refused,
                                    std::chrono::milliseconds fallback) {
  apply(key, id, [&](open_record& r) {
    r.in_flight = false;
    r.rec.last_error = error;
    if (refused) {
      ++r.rec.refusals;
      r.rec.fallback_after = fallback;
    }
    return r.cancel ? step_result{true, r.cancel} : step_result{};
  });
}

void outcome_ledger::ended(std::string_view key, const entry_id& id, outcome_result result) {
  apply(key, id, [&](open_record& /*r*/) { return step_result{true, result}; });
}

void outcome_ledger::cancelled(std::string_view key, const entry_id& id,
                               std::optional<outcome_result> result) {
  apply(key, id, [&](open_record& r) {
    if (r.in_flight && result) {
      r.cancel = result;
      return step_result{};
    }
    return step_result{true, result};
  });
}

std::size_t outcome_ledger::open_count_for_test() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [key, list] : open_) {
    n += list.size();
  }
  return n;
}

}  // namespace tec::controller::detail
