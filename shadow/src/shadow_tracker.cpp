#include "tec/shadow/shadow_tracker.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "tec/base/logger.hpp"
#include "tec/base/rfc3339.hpp"

namespace tec::shadow {
namespace {

using time_point = base::wall_clock::time_point;
using controller::cancel_reason;
using controller::decision_kind;

std::shared_ptr<spdlog::logger> logger() {
  static const std::shared_ptr<spdlog::logger> log = base::named_logger("shadow");
  return log;
}

std::string millis(time_point t) {
  return base::format_rfc3339(t, base::rfc3339_digits::milliseconds);
}

bool disagrees(shadow_outcome outcome) {
  return outcome == shadow_outcome::only_them || outcome == shadow_outcome::only_us ||
         outcome == shadow_outcome::ambiguous;
}

double seconds_between(time_point a, time_point b) {
  return std::abs(std::chrono::duration<double>(a - b).count());
}

std::string why(cancel_reason r) {
  switch (r) {
    case cancel_reason::untainted:
      return "untainted or tolerated";
    case cancel_reason::pod_gone:
      return "pod gone";
    case cancel_reason::replaced:
      return "replaced by another pod";
    case cancel_reason::none:
      break;
  }
  return "cancelled";
}

// One occurrence of a TaintManagerEviction Event (a new Event, or one step of its count), kept by
// pod name. A Marking occurrence stands for one DELETE of theirs (by name), so it proves at most
// one deletion: the first to claim it (which takes it out).
struct mark {
  time_point at;
  std::string uid;
  bool marking = true;
  std::string message;
};

// At most this many occurrences are kept per pod name (older ones are dropped).
constexpr std::size_t marks_per_name = 16;

// By shadow_outcome's value: its name and its counter.
struct outcome_row {
  std::string_view name;
  std::uint64_t shadow_counts::*counter;
};
constexpr std::array<outcome_row, 5> outcomes = {
    {{"agreed", &shadow_counts::agreed},
     {"only_them", &shadow_counts::only_them},
     {"only_us", &shadow_counts::only_us},
     {"cancelled_both", &shadow_counts::cancelled_both},
     {"ambiguous", &shadow_counts::ambiguous}}};

// When ours would have evicted a pod (fired, or due when it found the pod gone), kept by pod
// name: the built-in one, deciding as ours does, deleted that name then, by name.
struct due_mark {
  time_point due;
  std::string uid;
};

// Drops the oldest items of each list of `by_name` while `old` says so (each list is oldest
// first), and the lists left empty; `count` counts the items of all lists.
template <typename Item, typename Old>
void drop_older(std::unordered_map<std::string, std::deque<Item>>& by_name, std::size_t& count,
                Old old) {
  for (auto it = by_name.begin(); it != by_name.end();) {
    auto& list = it->second;
    while (!list.empty() && old(list.front())) {
      list.pop_front();
      --count;
    }
    it = list.empty() ? by_name.erase(it) : std::next(it);
  }
}

}  // namespace

std::string_view to_string(shadow_outcome outcome) noexcept {
  const auto i = static_cast<std::size_t>(outcome);
  return i < outcomes.size() ? outcomes[i].name : "unknown";
}

shadow_note to_shadow_note(const controller::decision_note& note, const base::clock_bridge& clock) {
  shadow_note out;
  out.kind = note.kind;
  out.pod = note.pod;
  out.node = note.node;
  out.taints.reserve(note.taints.size());
  for (const auto& t : note.taints) {
    out.taints.push_back(describe_taint(t));
  }
  out.at = clock.wall(note.at);
  out.due = clock.wall(note.due);
  out.reason = note.reason;
  return out;
}

struct shadow_tracker::impl {
  enum class ours_state : std::uint8_t { none, scheduled, would_delete, cancelled };

  struct entry {
    controller::pod_ref pod;
    std::string node;
    std::vector<std::string> taints;
    std::uint64_t seq = 0;  // creation order, for the pending bound
    // Ours.
    ours_state ours = ours_state::none;
    time_point ours_at{};  // when decided (would_delete: fired; cancelled: when cancelled)
    time_point due{};      // scheduled / cancelled: when it fires or would have
    cancel_reason reason = cancel_reason::none;
    // Theirs.
    std::optional<time_point> deleted_at;    // deletionTimestamp first seen (or the pod gone)
    std::optional<time_point> gone_at;       // the pod went away
    std::optional<time_point> condition_at;  // DisruptionTarget DeletionByTaintManager seen
    std::optional<time_point> marked_at;     // their Marking event
    std::string mark_message;
    std::optional<time_point> their_cancel_at;
    std::string cancel_message;
  };

  explicit impl(shadow_options o) : opts(std::move(o)) {
    if (!opts.clock) {
      opts.clock = base::real_clock();
    }
    opts.max_pending = std::max<std::size_t>(opts.max_pending, 1);
  }

  shadow_options opts;
  mutable std::mutex mu;
  std::unordered_map<std::string, entry> entries;                  // by uid
  std::map<std::uint64_t, std::string> order;                      // seq -> uid
  std::unordered_map<std::string, std::set<std::string>> by_name;  // ns/name -> uids
  std::unordered_map<std::string, std::deque<mark>> marks;         // ns/name
  std::size_t mark_count = 0;
  std::unordered_map<std::string, std::deque<due_mark>> dues;  // ns/name, oldest first
  std::size_t due_count = 0;
  // UIDs settled after their eviction: later notes for them are ignored. Bounded (FIFO).
  std::unordered_set<std::string> done;
  std::deque<std::string> done_order;
  std::uint64_t next_seq = 1;
  shadow_counts counts;
  std::deque<shadow_settled> disagreements;
  builtin_eviction_log history{opts.max_builtin_evictions};
  bool warned_early = false;

  [[nodiscard]] auto window() const { return opts.window; }

  static std::string name_key(const std::string& ns, const std::string& name) {
    return ns + "/" + name;
  }

  // Caller holds mu. The entry of `pod` (created when missing, with the unmatched events of
  // its name attached); may settle the oldest entry early into `out`.
  entry& entry_for(const controller::pod_ref& pod, std::vector<shadow_settled>& out) {
    auto it = entries.find(pod.uid);
    if (it != entries.end()) {
      return it->second;
    }
    while (entries.size() >= opts.max_pending && !order.empty()) {
      settle_early(out);
    }
    entry e;
    e.pod = pod;
    e.seq = next_seq++;
    const std::string key = name_key(pod.namespace_, pod.name);
    if (auto m = marks.find(key); m != marks.end()) {
      for (const auto& mk : m->second) {
        if (!mk.marking && (mk.uid.empty() || mk.uid == pod.uid)) {
          e.their_cancel_at = mk.at;
          e.cancel_message = mk.message;
        }
      }
    }
    order.emplace(e.seq, pod.uid);
    by_name[key].insert(pod.uid);
    return entries.emplace(pod.uid, std::move(e)).first->second;
  }

  // Deleted with grace period 0 (a force delete): gone within forced_within of its
  // deletionTimestamp (the API server sets it and deletes at once), or gone without one.
  [[nodiscard]] bool forced(const entry& e) const {
    return e.deleted_at && e.gone_at && *e.gone_at - *e.deleted_at <= opts.forced_within;
  }

  // Another deletion of e's name, not proven theirs yet, nearer than `d` seconds to `at`: a
  // forced deletion leaves the occurrence to it (when the driver force-deletes the pod their
  // DELETE made terminating, it looks forced too, and the previous round's forced deletion
  // claims first).
  [[nodiscard]] bool nearer_deletion(const entry& e, time_point at, double d) const {
    const auto n = by_name.find(name_key(e.pod.namespace_, e.pod.name));
    if (n == by_name.end()) {
      return false;
    }
    return std::ranges::any_of(n->second, [&](const std::string& uid) {
      const entry& o = entries.at(uid);
      return uid != e.pod.uid && o.deleted_at && !o.marked_at && !o.condition_at &&
             seconds_between(at, *o.deleted_at) < d;
    });
  }

  // Gives `e`, deleted and not yet proven theirs, the unclaimed Marking occurrence of its name
  // (and uid, when the occurrence has one) nearest its deletion within the window. Their DELETE
  // sends no grace period, so a forced deletion is theirs only for a pod whose own grace period
  // is 0: it claims only after that window (unless `force`), so that every graceful deletion of
  // the name claims first (in the same-name race the pod someone force-deleted and its
  // successor that their DELETE hit share one occurrence). A deletion younger than
  // forced_within waits to show which it is.
  void claim(entry& e, time_point now, bool force) {
    if (!e.deleted_at || e.marked_at || e.condition_at) {
      return;
    }
    if (!force && (forced(e) ? now < *e.deleted_at + window()
                             : !e.gone_at && now < *e.deleted_at + opts.forced_within)) {
      return;
    }
    const auto m = marks.find(name_key(e.pod.namespace_, e.pod.name));
    if (m == marks.end()) {
      return;
    }
    const double w = std::chrono::duration<double>(window()).count();
    auto& list = m->second;
    auto best = list.end();
    for (auto mk = list.begin(); mk != list.end(); ++mk) {
      if (!mk->marking || (!mk->uid.empty() && mk->uid != e.pod.uid)) {
        continue;
      }
      const double d = seconds_between(mk->at, *e.deleted_at);
      if (d > w || (forced(e) && nearer_deletion(e, mk->at, d))) {
        continue;
      }
      if (best == list.end() || d < seconds_between(best->at, *e.deleted_at)) {
        best = mk;
      }
    }
    if (best == list.end()) {
      return;
    }
    e.marked_at = best->at;
    e.mark_message = best->message;
    list.erase(best);  // claimed: it proves nothing more
    --mark_count;
    if (list.empty()) {
      marks.erase(m);
    }
  }

  // Caller holds mu. Ours would have evicted `pod` at `due`.
  void note_due(const controller::pod_ref& pod, time_point due) {
    if (due_count >= opts.max_pending) {
      return;
    }
    auto& list = dues[name_key(pod.namespace_, pod.name)];
    list.push_back(due_mark{due, pod.uid});
    ++due_count;
    if (list.size() > marks_per_name) {
      list.pop_front();
      --due_count;
    }
  }

  // Why `e`, deleted gracefully without evidence of theirs, may be their wrong deletion: ours
  // would have evicted another pod of its name at most W before (see the header); empty if not.
  [[nodiscard]] std::string ambiguity(const entry& e) const {
    if (!e.deleted_at || forced(e) ||
        !(e.ours == ours_state::none ||
          (e.ours == ours_state::cancelled && e.reason != cancel_reason::untainted))) {
      return {};
    }
    const auto d = dues.find(name_key(e.pod.namespace_, e.pod.name));
    if (d == dues.end()) {
      return {};
    }
    const due_mark* nearest = nullptr;
    for (const auto& m : d->second) {
      if (m.uid != e.pod.uid && m.due <= *e.deleted_at + opts.forced_within &&
          *e.deleted_at - m.due <= window() && (nearest == nullptr || m.due > nearest->due)) {
        nearest = &m;
      }
    }
    if (nearest == nullptr) {
      return {};
    }
    return fmt::format(
        "deleted gracefully {:.3f} s after the built-in was due to evict an earlier pod of this "
        "name (uid {}), and its DELETE goes by name (before 1.29); no event or condition proves "
        "it theirs (client-go drops its Events about a name past 25 in 5 minutes)",
        std::chrono::duration<double>(*e.deleted_at - nearest->due).count(), nearest->uid);
  }

  void remove(const std::string& uid) {
    const auto it = entries.find(uid);
    if (it == entries.end()) {
      return;
    }
    order.erase(it->second.seq);
    const std::string key = name_key(it->second.pod.namespace_, it->second.pod.name);
    if (auto n = by_name.find(key); n != by_name.end()) {
      n->second.erase(uid);
      if (n->second.empty()) {
        by_name.erase(n);
      }
    }
    entries.erase(it);
  }

  void remember_done(const std::string& uid) {
    if (!done.insert(uid).second) {
      return;
    }
    done_order.push_back(uid);
    while (done_order.size() > opts.max_pending) {
      done.erase(done_order.front());
      done_order.pop_front();
    }
  }

  // Their eviction is proven: a deletion with the condition, or with a Marking event within W.
  [[nodiscard]] bool confirmed(const entry& e) const {
    if (!e.deleted_at) {
      return false;
    }
    if (e.condition_at) {
      return true;
    }
    return e.marked_at && *e.marked_at - *e.deleted_at <= window() &&
           *e.deleted_at - *e.marked_at <= window();
  }

  [[nodiscard]] std::string describe_ours(const entry& e) const {
    switch (e.ours) {
      case ours_state::none:
        return "none";
      case ours_state::scheduled:
        return "scheduled for " + millis(e.due);
      case ours_state::would_delete:
        return "would delete at " + millis(e.ours_at);
      case ours_state::cancelled:
        return "cancelled at " + millis(e.ours_at) + " (" + why(e.reason) + ")";
    }
    return "none";
  }

  // When ours would have deleted `e`: fired, or due (a timer that found the pod gone was due
  // then); nullopt: never (no decision, or cancelled by an untaint, a toleration, a new pod).
  [[nodiscard]] static std::optional<time_point> ours_deletion(const entry& e) {
    switch (e.ours) {
      case ours_state::would_delete:
        return e.ours_at;
      case ours_state::scheduled:
        return e.due;
      case ours_state::cancelled:
        if (e.reason == cancel_reason::pod_gone) {
          return e.due;
        }
        break;
      case ours_state::none:
        break;
    }
    return std::nullopt;
  }

  // What proves a confirmed() eviction theirs.
  [[nodiscard]] static std::string evidence(const entry& e) {
    return e.marked_at ? "event: " + e.mark_message
                       : std::string("condition: DisruptionTarget DeletionByTaintManager");
  }

  [[nodiscard]] std::string describe_theirs(const entry& e) const {
    if (confirmed(e)) {
      return "deleted at " + millis(*e.deleted_at) + " (" + evidence(e) + ")";
    }
    if (e.their_cancel_at) {
      return "none (event: " + e.cancel_message + ")";
    }
    return "none";
  }

  // What `e` settles as at `now` (nullopt: still pending; drop: settles unreported).
  struct verdict {
    bool settle = false;
    std::optional<shadow_outcome> outcome;  // empty with settle: dropped, unreported
    double delay = 0;
    bool others = false;   // dropped: our would-delete pod was deleted by someone else
    std::string reason{};  // their eviction's: why this outcome (the built-in's history)
  };

  [[nodiscard]] verdict evaluate(const entry& e, time_point now, bool force) const {
    const auto w = window();
    // Strictly after: an eviction exactly W apart still agrees.
    const auto passed = [&](time_point t) { return force || now > t + w; };
    if (confirmed(e)) {
      const time_point t = *e.deleted_at;
      switch (e.ours) {
        case ours_state::would_delete:
          if (seconds_between(t, e.ours_at) <= std::chrono::duration<double>(w).count()) {
            return {true, shadow_outcome::agreed, seconds_between(t, e.ours_at), false,
                    "both evicted it within the window"};
          }
          return {true, e.ours_at < t ? shadow_outcome::only_us : shadow_outcome::only_them, 0,
                  false, "ours would have deleted it more than the window apart"};
        case ours_state::scheduled:
          if (e.due > t + w) {
            return {passed(t), shadow_outcome::only_them, 0, false,
                    "ours was due later than the window after theirs"};
          }
          // Due within the window: ours fires (or finds the pod gone) soon.
          return {passed(std::max(t, e.due)), shadow_outcome::only_them, 0, false,
                  "ours was due within the window but did not fire"};
        case ours_state::cancelled:
          if (e.reason == cancel_reason::pod_gone) {
            if (seconds_between(t, e.due) <= std::chrono::duration<double>(w).count()) {
              return {true, shadow_outcome::agreed, seconds_between(t, e.due), false,
                      "ours was due within the window and found the pod gone"};
            }
            return {passed(t), shadow_outcome::only_them, 0, false,
                    "ours was due later than the window after theirs"};
          }
          return {passed(t), shadow_outcome::only_them, 0, false,
                  "ours was cancelled (" + why(e.reason) + ")"};
        case ours_state::none:
          return {passed(t), shadow_outcome::only_them, 0, false, "ours made no decision on it"};
      }
    }
    // No eviction of theirs (yet): a deletion seen within W may still get its event.
    const bool waiting = e.deleted_at && !force && now < *e.deleted_at + w;
    if (waiting) {
      return {};
    }
    if (std::string why_ambiguous = ambiguity(e); !why_ambiguous.empty()) {
      return {true, shadow_outcome::ambiguous, 0, false, std::move(why_ambiguous)};
    }
    switch (e.ours) {
      case ours_state::would_delete:
        if (e.deleted_at && *e.deleted_at <= e.ours_at + w) {
          // Someone else deleted it before their window ended (no evidence of theirs): whether
          // they would have evicted it is unknown. Not compared.
          return {true, std::nullopt, 0, true};
        }
        return {passed(e.ours_at), shadow_outcome::only_us, 0};
      case ours_state::cancelled:
        if (e.reason == cancel_reason::untainted) {
          return {passed(e.ours_at), shadow_outcome::cancelled_both, 0};
        }
        return {passed(e.ours_at), std::nullopt, 0};
      case ours_state::scheduled:
        if (e.deleted_at && e.due <= *e.deleted_at + w && passed(std::max(e.due, *e.deleted_at))) {
          // Someone else deleted it before ours was due a window past (its attempt, cancelled
          // before it started, may note nothing): as a would-delete deleted by others.
          return {true, std::nullopt, 0, true};
        }
        return {force, std::nullopt, 0};
      case ours_state::none: {
        time_point last = e.deleted_at.value_or(time_point{});
        for (const auto& t : {e.condition_at, e.marked_at, e.their_cancel_at}) {
          if (t) {
            last = std::max(last, *t);
          }
        }
        return {passed(last), std::nullopt, 0};
      }
    }
    return {};
  }

  // Settles `uid` when its verdict at `now` says so, or at once (as its current best guess)
  // when `early`, appending what is reported to `out`.
  void try_settle(const std::string& uid, time_point now, std::vector<shadow_settled>& out,
                  bool early = false) {
    const auto it = entries.find(uid);
    if (it == entries.end()) {
      return;
    }
    claim(it->second, now, early);
    const entry& e = it->second;
    const verdict v = evaluate(e, now, early);
    if (!v.settle) {
      return;
    }
    if (confirmed(e)) {
      remember_done(uid);
      if (v.outcome) {
        history.add(builtin_record(e, v, now, early));
      }
    } else if (v.outcome == shadow_outcome::ambiguous) {
      history.add(builtin_record(e, v, now, early));
    }
    if (early) {
      ++counts.settled_early;
    }
    if (v.others) {
      ++counts.deleted_by_others;
    }
    if (v.outcome) {
      shadow_settled s;
      s.outcome = *v.outcome;
      s.pod = e.pod;
      s.node = e.node;
      s.taints = e.taints;
      s.ours = describe_ours(e);
      s.theirs = *v.outcome == shadow_outcome::ambiguous
                     ? "deleted at " + millis(*e.deleted_at) + " (no evidence: " + v.reason + ")"
                     : describe_theirs(e);
      s.at = now;
      s.delay_seconds = v.delay;
      s.early = early;
      ++(counts.*outcomes.at(static_cast<std::size_t>(s.outcome)).counter);
      if (s.outcome == shadow_outcome::agreed) {
        counts.agreed_delay_sum += v.delay;
        counts.agreed_delay_max = std::max(counts.agreed_delay_max, v.delay);
      }
      if (disagrees(s.outcome)) {
        disagreements.push_back(s);
        while (disagreements.size() > opts.max_disagreements) {
          disagreements.pop_front();
        }
      }
      out.push_back(std::move(s));
    }
    remove(uid);
  }

  // The built-in's history record of `e`, their eviction, settled at `now` as `v` says.
  [[nodiscard]] builtin_eviction builtin_record(const entry& e, const verdict& v, time_point now,
                                                bool early) {
    builtin_eviction r;
    r.namespace_ = e.pod.namespace_;
    r.name = e.pod.name;
    r.uid = e.pod.uid;
    r.node = e.node;
    r.taints = e.taints;
    r.deleted_at = millis(*e.deleted_at);
    r.evidence = confirmed(e) ? evidence(e) : std::string("none");
    const auto ours = ours_deletion(e);
    r.ours_at = ours ? millis(*ours) : std::string("never");
    assert(v.outcome);  // their eviction always settles with one
    r.verdict = std::string(to_string(*v.outcome));
    r.reason = v.reason;
    r.delay_seconds = v.delay;
    r.settled_at = millis(now);
    r.early = early;
    return r;
  }

  // Settles the oldest entry early (the pending bound).
  void settle_early(std::vector<shadow_settled>& out) {
    const std::string oldest = order.begin()->second;
    if (!entries.contains(oldest)) {
      order.erase(order.begin());  // cannot happen (order and entries change together)
      return;
    }
    if (!warned_early) {
      warned_early = true;
      logger()->warn(
          "shadow: more than {} pods wait to be settled: the oldest are settled early, as "
          "their current best guess (counted in settledEarly)",
          opts.max_pending);
    }
    try_settle(oldest, opts.clock->wall(), out, /*early=*/true);
  }

  void publish(std::vector<shadow_settled>& out) const {
    for (const auto& s : out) {
      if (disagrees(s.outcome)) {
        logger()->info("shadow: {} pod={}/{} uid={} node={} ours=\"{}\" theirs=\"{}\"",
                       to_string(s.outcome), s.pod.namespace_, s.pod.name, s.pod.uid, s.node,
                       s.ours, s.theirs);
      } else {
        logger()->debug("shadow: {} pod={}/{} uid={}", to_string(s.outcome), s.pod.namespace_,
                        s.pod.name, s.pod.uid);
      }
      if (opts.on_settled) {
        opts.on_settled(s);
      }
    }
  }
};

shadow_tracker::shadow_tracker(shadow_options options)
    : impl_(std::make_unique<impl>(std::move(options))) {}

shadow_tracker::~shadow_tracker() = default;

void shadow_tracker::note(const shadow_note& n) {
  std::vector<shadow_settled> out;
  {
    const std::lock_guard lock(impl_->mu);
    if (impl_->done.contains(n.pod.uid)) {
      return;  // settled after their eviction: the pod is terminating or gone
    }
    using st = impl::ours_state;
    const bool exists = impl_->entries.contains(n.pod.uid);
    if (!exists && n.kind == decision_kind::cancelled && n.reason != cancel_reason::untainted) {
      return;  // nothing of ours to compare (e.g. a pod deleted before we noted its schedule)
    }
    auto& e = impl_->entry_for(n.pod, out);
    if (!n.node.empty()) {
      e.node = n.node;
      e.taints = n.taints;
    }
    if (e.ours != st::would_delete) {  // ours is final once it would have deleted
      e.ours_at = n.at;
      e.due = n.due;
      switch (n.kind) {
        case decision_kind::scheduled:
          e.ours = st::scheduled;
          e.reason = cancel_reason::none;
          break;
        case decision_kind::would_delete:
          e.ours = st::would_delete;
          break;
        case decision_kind::cancelled:
          e.ours = st::cancelled;
          e.reason = n.reason;
          break;
      }
    }
    if (n.kind == decision_kind::would_delete ||
        (n.kind == decision_kind::cancelled && n.reason == cancel_reason::pod_gone &&
         n.due <= n.at)) {
      impl_->note_due(n.pod, n.kind == decision_kind::would_delete ? n.at : n.due);
    }
    impl_->try_settle(n.pod.uid, impl_->opts.clock->wall(), out);
  }
  impl_->publish(out);
}

void shadow_tracker::pod_changed(const informers::pod_record* old_pod,
                                 const informers::pod_record* new_pod) {
  const informers::pod_record* any = new_pod != nullptr ? new_pod : old_pod;
  if (any == nullptr) {
    return;
  }
  const auto& p = any->pod;
  const bool deleting = new_pod == nullptr || new_pod->pod.terminating;
  const bool same_pod = old_pod != nullptr && old_pod->pod.uid == p.uid;
  const bool was_deleting = same_pod && old_pod->pod.terminating;
  const bool condition = any->disruption == informers::disruption_state::true_ours;
  const bool had_condition =
      same_pod && old_pod->disruption == informers::disruption_state::true_ours;
  const bool new_deletion = deleting && !was_deleting;
  const bool new_condition = condition && !had_condition;
  const bool gone = new_pod == nullptr;
  if (!new_deletion && !new_condition && !gone) {
    return;
  }
  if (!new_deletion && !new_condition) {  // a deleting pod gone: how long it took tells forced
    std::vector<shadow_settled> out;
    {
      const std::lock_guard lock(impl_->mu);
      const auto it = impl_->entries.find(p.uid);
      if (it == impl_->entries.end()) {
        return;
      }
      const auto now = impl_->opts.clock->wall();
      if (!it->second.gone_at) {
        it->second.gone_at = now;
      }
      impl_->try_settle(p.uid, now, out);
    }
    impl_->publish(out);
    return;
  }
  std::vector<std::string> node_taints;
  if (impl_->opts.node_taints && !p.node_name.empty()) {
    node_taints = impl_->opts.node_taints(p.node_name);
  }
  std::vector<shadow_settled> out;
  {
    const std::lock_guard lock(impl_->mu);
    if (impl_->done.contains(p.uid)) {
      return;
    }
    const auto now = impl_->opts.clock->wall();
    const std::string key = impl::name_key(p.namespace_, p.name);
    const bool tracked = impl_->entries.contains(p.uid);
    // A pod that just went away without a deletionTimestamp seen first (a forced delete) is
    // only of interest when something of ours or theirs names it.
    if (!tracked && new_pod == nullptr && !condition && !impl_->marks.contains(key)) {
      return;
    }
    auto& e = impl_->entry_for(controller::pod_ref{p.namespace_, p.name, p.uid}, out);
    if (e.node.empty()) {
      e.node = p.node_name;
    }
    if (e.taints.empty()) {
      e.taints = std::move(node_taints);
    }
    if (new_deletion && !e.deleted_at) {
      e.deleted_at = now;
    }
    if (gone && !e.gone_at) {
      e.gone_at = now;
    }
    if (condition && !e.condition_at) {
      e.condition_at = now;
    }
    impl_->try_settle(p.uid, now, out);
  }
  impl_->publish(out);
}

void shadow_tracker::event_seen(const shadow_event& ev) {
  std::vector<shadow_settled> out;
  {
    const std::lock_guard lock(impl_->mu);
    const auto now = impl_->opts.clock->wall();
    const std::string key = impl::name_key(ev.namespace_, ev.name);
    // Kept by name for the pods of that name that are deleted (or appear) around it: 1.20's
    // Event names the pod by namespace/name only, and their DELETE goes by name, so when a pod
    // is re-created under the same name it is the new pod that it deletes, possibly seen after
    // the Event. Each occurrence proves one deletion at most (see claim()).
    auto& list = impl_->marks[key];
    const std::uint32_t n = std::clamp<std::uint32_t>(ev.occurrences, 1, marks_per_name);
    for (std::uint32_t i = 0; i < n && impl_->mark_count < impl_->opts.max_pending; ++i) {
      list.push_back(mark{now, ev.uid, ev.marking, ev.message});
      ++impl_->mark_count;
      if (list.size() > marks_per_name) {
        list.pop_front();
        --impl_->mark_count;
      }
    }
    if (list.empty()) {
      impl_->marks.erase(key);
    }
    std::vector<std::string> uids;
    if (auto it = impl_->by_name.find(key); it != impl_->by_name.end()) {
      uids.assign(it->second.begin(), it->second.end());
    }
    for (const auto& uid : uids) {
      if (!ev.uid.empty() && ev.uid != uid) {
        continue;
      }
      if (!ev.marking) {
        auto& e = impl_->entries.at(uid);
        e.their_cancel_at = now;
        e.cancel_message = ev.message;
      }
      impl_->try_settle(uid, now, out);  // a deleted pod claims a Marking occurrence
    }
  }
  impl_->publish(out);
}

void shadow_tracker::sweep() {
  std::vector<shadow_settled> out;
  {
    const std::lock_guard lock(impl_->mu);
    const auto now = impl_->opts.clock->wall();
    std::vector<std::string> uids;  // A copy: settling erases entries.
    uids.reserve(impl_->entries.size());
    for (const auto& [uid, e] : impl_->entries) {
      uids.push_back(uid);
    }
    for (const auto& uid : uids) {
      impl_->try_settle(uid, now, out);
    }
    // Occurrences older than twice the window can no longer prove anything (a force-deleted
    // pod deleted up to W after one claims it up to W after its deletion); ours due up to W
    // before a deletion W old at most (ambiguity()).
    const auto limit = now - 2 * impl_->window();
    drop_older(impl_->marks, impl_->mark_count, [&](const mark& m) { return m.at < limit; });
    drop_older(impl_->dues, impl_->due_count, [&](const due_mark& d) { return d.due < limit; });
  }
  impl_->publish(out);
}

shadow_counts shadow_tracker::counts() const {
  const std::lock_guard lock(impl_->mu);
  shadow_counts c = impl_->counts;
  c.pending = impl_->entries.size();
  c.builtin_evictions_dropped = impl_->history.dropped();
  return c;
}

std::vector<shadow_settled> shadow_tracker::disagreements() const {
  const std::lock_guard lock(impl_->mu);
  return {impl_->disagreements.begin(), impl_->disagreements.end()};
}

std::vector<builtin_eviction> shadow_tracker::builtin_evictions() const {
  const std::lock_guard lock(impl_->mu);
  const auto& records = impl_->history.records();
  return {records.begin(), records.end()};
}

std::string shadow_tracker::report_json() const {
  shadow_document doc;
  doc.window_seconds = std::chrono::duration<double>(impl_->window()).count();
  doc.counts = counts();
  for (const auto& s : disagreements()) {
    doc.disagreements.push_back(disagreement{std::string(to_string(s.outcome)), s.pod.namespace_,
                                             s.pod.name, s.pod.uid, s.node, s.taints, s.ours,
                                             s.theirs, millis(s.at)});
  }
  doc.builtin_evictions = builtin_evictions();
  return to_json(doc);
}

}  // namespace tec::shadow
