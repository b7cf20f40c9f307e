#include "tec/controller/matching.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>
#include <vector>

namespace tec::controller {

std::optional<std::int64_t> parse_int64(std::string_view text) noexcept {
  // Go's strconv.ParseInt(text, 10, 64): an optional sign ('+' or '-'), then one or more
  // decimal digits (leading zeros allowed, no '_', no whitespace), within int64.
  std::size_t i = 0;
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    i = 1;
  }
  if (i == text.size()) {
    return std::nullopt;
  }
  for (std::size_t j = i; j < text.size(); ++j) {
    if (text[j] < '0' || text[j] > '9') {
      return std::nullopt;
    }
  }
  // from_chars takes a '-' but not a '+'.
  const char* first = text.data() + (text.front() == '+' ? 1 : 0);
  const char* last = text.data() + text.size();
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(first, last, value, 10);
  if (ec != std::errc{} || end != last) {
    return std::nullopt;  // Out of int64 range.
  }
  return value;
}

namespace {

bool compare_numeric(const toleration& tol, const taint& t) noexcept {
  const auto want = parse_int64(tol.value);
  if (!want) {
    return false;
  }
  const auto have = parse_int64(t.value);
  if (!have) {
    return false;
  }
  return tol.op == toleration_operator::lt ? *have < *want : *have > *want;
}

// The first rule of `rules` whose key matches `key`, or null.
const taint_rule* rule_for(std::span<const taint_rule> rules, std::string_view key) noexcept {
  for (const taint_rule& r : rules) {
    if (r.matches(key)) {
      return &r;
    }
  }
  return nullptr;
}

}  // namespace

bool tolerates(const toleration& tol, const taint& t) noexcept {
  if (tol.effect && *tol.effect != t.effect) {
    return false;
  }
  if (tol.key.empty()) {
    return tol.op == toleration_operator::exists;
  }
  if (tol.key != t.key) {
    return false;
  }
  switch (tol.op) {
    case toleration_operator::equal:
      return tol.value == t.value;
    case toleration_operator::exists:
      return true;
    case toleration_operator::lt:
    case toleration_operator::gt:
      return compare_numeric(tol, t);
    case toleration_operator::unknown:
      return false;
  }
  return false;
}

std::chrono::nanoseconds toleration_time::delay() const {
  if (what != kind::after || seconds.count() <= 0) {
    return std::chrono::nanoseconds::zero();
  }
  constexpr auto max_seconds = std::chrono::duration_cast<std::chrono::seconds>(max_delay);
  if (seconds >= max_seconds) {
    return max_delay;
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(seconds);
}

ruled_decision decide(std::span<const taint> taints, std::span<const toleration> tolerations,
                      std::span<const taint_rule> rules) noexcept {
  ruled_decision out;
  // Per taint: 0 = now, > 0 = that many seconds, nullopt = forever; then the minimum.
  bool saw_any = false;
  bool any_finite = false;
  bool zero = false;
  std::int64_t min_seconds = 0;
  for (const taint& t : taints) {
    const taint_rule* r = rule_for(rules, t.key);
    if (r != nullptr && r->action == taint_action::ignore) {
      continue;
    }
    saw_any = true;
    const auto it = std::find_if(tolerations.begin(), tolerations.end(),
                                 [&](const toleration& tol) { return tolerates(tol, t); });
    std::optional<std::int64_t> own;  // The pod's own time for this taint.
    bool untolerated = it == tolerations.end();
    if (!untolerated) {
      own = it->seconds ? std::optional<std::int64_t>(std::max<std::int64_t>(*it->seconds, 0))
                        : std::nullopt;
    }
    std::optional<std::int64_t> applied = untolerated ? std::optional<std::int64_t>(0) : own;
    if (r != nullptr && applied) {
      if (r->min_toleration_seconds > 0 && *applied < r->min_toleration_seconds) {
        applied = r->min_toleration_seconds;
      }
      if (r->max_toleration_seconds > 0 && *applied > r->max_toleration_seconds) {
        applied = r->max_toleration_seconds;
      }
      if (*applied != (untolerated ? 0 : own.value_or(0)) && out.overridden == nullptr) {
        out.overridden = &t;
        out.rule = r;
      }
    }
    if (untolerated && *applied == 0) {
      out.decision.untolerated = true;
      return out;
    }
    if (!applied) {
      continue;  // Tolerated forever.
    }
    if (*applied == 0) {
      zero = true;  // Keep looking: a later untolerated taint still wins.
    } else if (!any_finite || *applied < min_seconds) {
      min_seconds = *applied;
      any_finite = true;
    }
  }
  if (!saw_any) {
    out.all_ignored = true;
    out.decision.time = toleration_time::never();
    return out;
  }
  out.decision.time = zero          ? toleration_time::immediately()
                      : !any_finite ? toleration_time::never()
                                    : toleration_time::after_seconds(min_seconds);
  return out;
}

std::optional<std::string_view> label_value(std::string_view labels,
                                            std::string_view key) noexcept {
  while (!labels.empty()) {
    const std::size_t end = std::min(labels.find('\n'), labels.size());
    const std::string_view line = labels.substr(0, end);
    const std::size_t eq = line.find('=');
    if (eq != std::string_view::npos && line.substr(0, eq) == key) {
      return line.substr(eq + 1);
    }
    labels.remove_prefix(std::min(end + 1, labels.size()));
  }
  return std::nullopt;
}

bool selects(const label_selector& selector, std::string_view labels) noexcept {
  if (selector.empty()) {
    return false;
  }
  for (const auto& [key, value] : selector.match_labels) {
    const auto have = label_value(labels, key);
    if (!have || *have != value) {
      return false;
    }
  }
  for (const label_requirement& req : selector.match_expressions) {
    const auto have = label_value(labels, req.key);
    const auto listed = [&] {
      return std::find(req.values.begin(), req.values.end(), *have) != req.values.end();
    };
    switch (req.operator_) {
      case label_requirement::op::in:
        if (!have || !listed()) {
          return false;
        }
        break;
      case label_requirement::op::not_in:
        if (have && listed()) {
          return false;
        }
        break;
      case label_requirement::op::exists:
        if (!have) {
          return false;
        }
        break;
      case label_requirement::op::does_not_exist:
        if (have) {
          return false;
        }
        break;
    }
  }
  return true;
}

std::optional<countdown> countdown_since(std::span<const taint> taints,
                                         std::span<const toleration> tolerations,
                                         std::int64_t bound_unix, std::int64_t now_unix,
                                         std::span<const taint_rule> rules) {
  const std::int64_t bound = std::min(bound_unix, now_unix);
  std::vector<std::pair<std::int64_t, std::size_t>> order;  // (counted from, index)
  order.reserve(taints.size());
  for (std::size_t i = 0; i < taints.size(); ++i) {
    const std::int64_t added =
        taints[i].time_added_unix != 0 ? taints[i].time_added_unix : now_unix;
    order.emplace_back(std::min(std::max(added, bound), now_unix), i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<taint> present;
  present.reserve(taints.size());
  for (std::size_t i = 0; i < order.size();) {
    const std::int64_t at = order[i].first;
    std::size_t last = i;
    for (; i < order.size() && order[i].first == at; ++i) {  // every taint present at `at`
      present.push_back(taints[order[i].second]);
      last = i;
    }
    const ruled_decision rd = decide(present, tolerations, rules);
    const pod_decision& d = rd.decision;
    if (d.untolerated) {
      return countdown{at, toleration_time::immediately(), &taints[order[last].second]};
    }
    if (!d.time.is_forever()) {
      return countdown{at, d.time, &taints[order[last].second]};
    }
  }
  return std::nullopt;
}

std::chrono::milliseconds fallback_after(std::span<const taint> taints,
                                         std::span<const toleration> tolerations,
                                         std::span<const taint_rule> rules,
                                         std::chrono::milliseconds global) noexcept {
  std::chrono::milliseconds shortest{0};
  for (const taint& t : taints) {
    const taint_rule* rule = rule_for(rules, t.key);
    if (rule != nullptr && rule->action == taint_action::ignore) {
      continue;
    }
    const ruled_decision d = decide(std::span<const taint>(&t, 1), tolerations, rules);
    if (!d.decision.untolerated && d.decision.time.is_forever()) {
      continue;
    }
    const std::chrono::milliseconds mine =
        rule != nullptr && rule->fallback_after ? *rule->fallback_after : global;
    if (mine.count() > 0 && (shortest.count() == 0 || mine < shortest)) {
      shortest = mine;
    }
  }
  return shortest;
}

std::vector<taint> evicting_taints(std::span<const taint> taints,
                                   std::span<const toleration> tolerations,
                                   std::span<const taint_rule> rules) {
  std::vector<taint> out;
  for (const taint& t : taints) {
    const taint_rule* rule = rule_for(rules, t.key);
    if (rule != nullptr && rule->action == taint_action::ignore) {
      continue;
    }
    const ruled_decision d = decide(std::span<const taint>(&t, 1), tolerations, rules);
    if (d.decision.untolerated || !d.decision.time.is_forever()) {
      out.push_back(t);
    }
  }
  return out;
}

}  // namespace tec::controller
