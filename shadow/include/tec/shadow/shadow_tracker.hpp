#pragma once

// Shadow mode (--shadow): compares our would-be evictions (dry-run decisions, from the
// controller's decision observer) with what the built-in taint manager of
// kube-controller-manager does to the same pods, so that an operator running both can see
// whether switching over would change anything.
//
// Their eviction of pod P (uid u) at time t: P was first seen with a deletionTimestamp at t
// (or gone at t), and either P carries the DisruptionTarget condition with reason
// DeletionByTaintManager (which we do not write in shadow mode, so it is theirs), or P claimed
// an occurrence of a TaintManagerEviction "Marking for deletion Pod ns/name" event (from any
// source: we write none) seen within the window W around t, before or after (their event is
// written before their DELETE, and a DELETE throttled by their client can come many seconds
// later). Before 1.29 the event's involvedObject carries no uid: it is matched by
// namespace/name. Each occurrence (a new Event, or one step of its count: client-go's recorder
// counts identical messages about one object on one Event) stands for one DELETE of theirs, so
// it proves one deletion only, the nearest to it that claims it. Their DELETE sends no grace
// period, so their deletion stays terminating for the pod's grace period; a pod gone within
// forced_within of its deletionTimestamp (or without one) was deleted with grace period 0, a
// force delete (as the driver's in the same-name race, issue 33 item 7), which is theirs only
// for a pod whose own grace period is 0: it claims only once the window after it has passed,
// so every graceful deletion of the name claims first, and leaves it to a nearer deletion not
// yet proven; a deletion younger than forced_within waits before it claims. A deletion
// without such evidence is someone else's, not theirs.
//
// Settling, per pod UID:
// - ours would-delete at a, theirs at t, |t - a| <= W: agreed (delay |t - a|); ours scheduled
//   for d and cancelled because the pod went away (pod_gone) with |t - d| <= W: agreed too.
// - theirs at t and ours none, scheduled for later than t + W, or cancelled for another
//   reason: only_them, settled at t + W (ours may still come within the window).
// - ours would-delete at a and no theirs by a + W: only_us; but when someone else deleted the
//   pod (a deletion without evidence of theirs) by a + W, not compared: whether theirs would
//   have followed is unknown (counted, deleted_by_others).
// - ours cancelled (untainted or tolerated) and no theirs within W: cancelled_both.
// - ours cancelled because the pod went away or was replaced, with no theirs: not reported
//   (someone else deleted it).
// - ours none (or cancelled because the pod went away or was replaced), deleted gracefully by
//   someone with no evidence of theirs, and ours would have evicted another pod of the same
//   name (a predecessor, another uid) at most W before that deletion: ambiguous, settled at the
//   deletion + W. The built-in one deciding as ours does was evicting that name then, and
//   before 1.29 its DELETE goes by name, so it may be its wrong deletion of the re-created pod
//   whose Event client-go's spam filter dropped (25 per name, then one per 5 minutes); or
//   someone else's. Listed with the reason, in the built-in's history too (verdict ambiguous),
//   so that every wrong deletion of theirs is accounted for, as theirs or as ambiguous.
// At most max_pending pods wait; beyond that the oldest is settled early, as its current best
// guess, and counted (settled_early). A pod settled after their eviction ignores our later
// notes (a terminating pod may be decided again; both would delete it again, a no-op).
// Every pod settled as their eviction (agreed, only_them, or only_us when theirs came more than
// W after ours) is also recorded in the built-in's history (report_records.hpp), the latest
// max_builtin_evictions of them.
//
// Pure logic: no I/O, time from the injected clock (wall clock, as reported). Thread-safe:
// every member may be called from any thread (one mutex; each call is short). on_settled is
// called without the lock held, on the thread that settled (note(), observations or sweep()).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/clock.hpp"
#include "tec/controller/controller.hpp"
#include "tec/informers/records.hpp"
#include "tec/shadow/report_records.hpp"

namespace tec::shadow {

enum class shadow_outcome : std::uint8_t { agreed, only_them, only_us, cancelled_both, ambiguous };

/// "agreed", "only_them", "only_us", "cancelled_both", "ambiguous" (the metric's outcome label).
[[nodiscard]] std::string_view to_string(shadow_outcome outcome) noexcept;

/// A NoExecute taint as "key=value:NoExecute" ("key:NoExecute" without a value).
using controller::describe_taint;

/// One of our decisions on the wall clock (see controller::decision_note).
struct shadow_note {
  controller::decision_kind kind = controller::decision_kind::scheduled;
  controller::pod_ref pod;
  std::string node;
  std::vector<std::string> taints;  ///< describe_taint() of each NoExecute taint.
  base::wall_clock::time_point at{};
  base::wall_clock::time_point due{};
  controller::cancel_reason reason = controller::cancel_reason::none;
};

/// `note` with its times mapped through `clock`.
[[nodiscard]] shadow_note to_shadow_note(const controller::decision_note& note,
                                         const base::clock_bridge& clock);

/// A TaintManagerEviction event of the built-in taint manager, as seen (a new one, or one
/// whose count went up).
struct shadow_event {
  std::string namespace_;  ///< involvedObject.namespace
  std::string name;        ///< involvedObject.name
  std::string uid;         ///< involvedObject.uid; empty before 1.29 (match by name)
  bool marking = true;     ///< "Marking for deletion ..." (false: "Cancelling deletion ...")
  std::string message;
  /// How many times it happened since last seen: the rise of the Event's count (client-go's
  /// recorder counts identical messages about one object on one Event), at least 1.
  std::uint32_t occurrences = 1;
};

/// A settled pod.
struct shadow_settled {
  shadow_outcome outcome = shadow_outcome::agreed;
  controller::pod_ref pod;
  std::string node;
  std::vector<std::string> taints;
  std::string ours;  ///< "none", "would delete at T", "scheduled for T", "cancelled at T (why)"
  /// "deleted at T (event: MESSAGE)", "deleted at T (condition ...)", "none", or for ambiguous
  /// "deleted at T (no evidence: WHY)".
  std::string theirs;
  base::wall_clock::time_point at{};  ///< When it was settled.
  double delay_seconds = 0;           ///< agreed: |their time - ours|.
  bool early = false;                 ///< Settled early, as a best guess (the pending bound).
};

struct shadow_options {
  /// W: how far apart two evictions of a pod may be and agree, and how long an unmatched one
  /// waits before it is reported.
  std::chrono::milliseconds window{30'000};
  /// A pod gone within this long of its deletionTimestamp (or without one) was deleted with
  /// grace period 0, a force delete: the API server sets the deletionTimestamp and deletes at
  /// once. Their DELETE sends no grace period, so such a deletion is theirs only for a pod whose
  /// own grace period is 0 (see the file comment). A deletion claims evidence only once this
  /// long has shown it is not forced (settling waits as long).
  std::chrono::milliseconds forced_within{1'000};
  /// Pods waiting to be settled, at most.
  std::size_t max_pending = 100'000;
  /// Disagreements kept for report_json() (the latest ones).
  std::size_t max_disagreements = 1'000;
  /// The built-in's evictions kept for report_json() (the latest ones).
  std::size_t max_builtin_evictions = 1'000;
  /// The clock whose wall() the tracker reads. Empty: base::real_clock().
  std::shared_ptr<base::clock> clock;
  /// The NoExecute taints of a node now (describe_taint() of each), for a pod of theirs we
  /// made no decision on; empty: none. Called without the tracker's lock, from pod_changed().
  std::function<std::vector<std::string>(std::string_view node)> node_taints;
  /// Every settled pod (each outcome). Called without the tracker's lock; must be quick.
  std::function<void(const shadow_settled&)> on_settled;
};

/// See the file comment.
class shadow_tracker {
public:
  explicit shadow_tracker(shadow_options options = {});
  ~shadow_tracker();
  shadow_tracker(const shadow_tracker&) = delete;
  shadow_tracker& operator=(const shadow_tracker&) = delete;

  /// One of our decisions (the controller's observer, converted).
  void note(const shadow_note& note);
  /// The pod informer's (old, new) change: a deletionTimestamp or the taint manager's
  /// DisruptionTarget condition appearing, or the pod going away.
  void pod_changed(const informers::pod_record* old_pod, const informers::pod_record* new_pod);
  /// A TaintManagerEviction event seen now.
  void event_seen(const shadow_event& event);
  /// Settles what is due (call it every second or so).
  void sweep();

  [[nodiscard]] shadow_counts counts() const;
  /// The disagreements kept (oldest first).
  [[nodiscard]] std::vector<shadow_settled> disagreements() const;
  /// The built-in's evictions kept, agreed ones included (oldest first).
  [[nodiscard]] std::vector<builtin_eviction> builtin_evictions() const;
  /// The /debug/shadow document (see README "Shadow mode").
  [[nodiscard]] std::string report_json() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tec::shadow
