#pragma once

// The records of the /debug/shadow document (docs/operations.md, "Shadow mode"), one type and
// one JSON each for the daemon that writes them and the kubectl plugin that reads them back:
//
// - "disagreements": a pod on which ours and the built-in taint manager differed,
//   {"outcome", "pod": "ns/name", "uid", "node", "taints", "ours", "theirs", "at"};
// - "builtinEvictions": the history of the built-in's evictions, every pod the tracker settled
//   as evicted by kube-controller-manager (agreed with ours or not), field order as written:
//
//   {"pod": "ns/name", "uid": "...", "node": "node-2", "taints": ["k=v:NoExecute"],
//    "deletedAt": "...", "evidence": "event: Marking for deletion Pod ns/name",
//    "oursAt": "..." | "never", "verdict": "agreed", "reason": "both evicted it within the window",
//    "settledAt": "...", "delaySeconds": 0.04, "early": false}
//
// Times are UTC RFC 3339 with milliseconds, when our watches saw things. Reading back is
// lenient: a missing field, or one of another type, stays empty (or 0, false); never throws.
// Pure; builtin_eviction_log is not thread-safe (the tracker holds its lock around it).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tec::shadow {

/// One pod on which ours and the built-in differed.
struct disagreement {
  std::string outcome;  ///< to_string(shadow_outcome): only_them or only_us.
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string node;
  std::vector<std::string> taints;  ///< describe_taint() of each NoExecute taint.
  std::string ours;    ///< "none", "would delete at T", "scheduled for T", "cancelled at T (why)".
  std::string theirs;  ///< "deleted at T (event: ...)", "deleted at T (condition: ...)", "none".
  std::string at;      ///< When it was settled.

  friend bool operator==(const disagreement&, const disagreement&) = default;
};

/// One eviction of the built-in taint manager, as the tracker settled it.
struct builtin_eviction {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string node;
  std::vector<std::string> taints;  ///< describe_taint() of each NoExecute taint.
  /// Their deletion: when its deletionTimestamp was first seen (or the pod gone without one).
  std::string deleted_at;
  /// What proves it theirs: "event: MESSAGE" or "condition: DisruptionTarget
  /// DeletionByTaintManager".
  std::string evidence;
  std::string ours_at;       ///< When ours would have deleted it, or "never".
  std::string verdict;       ///< to_string(shadow_outcome): agreed, only_them or only_us.
  std::string reason;        ///< Why that verdict, a few words.
  double delay_seconds = 0;  ///< agreed: |their time - ours|; else 0.
  std::string settled_at;
  bool early = false;  ///< Settled early, as a best guess (the pending bound).

  friend bool operator==(const builtin_eviction&, const builtin_eviction&) = default;
};

/// The record as its JSON object (see the file comment).
[[nodiscard]] nlohmann::ordered_json to_json(const disagreement& d);
[[nodiscard]] nlohmann::ordered_json to_json(const builtin_eviction& e);

/// The record back from its JSON object (lenient, see the file comment).
[[nodiscard]] disagreement disagreement_from_json(const nlohmann::json& j);
[[nodiscard]] builtin_eviction builtin_eviction_from_json(const nlohmann::json& j);

/// The latest `capacity` built-in evictions: beyond it the oldest is dropped and counted.
class builtin_eviction_log {
public:
  explicit builtin_eviction_log(std::size_t capacity) : capacity_(capacity) {}

  /// Keeps `e`, dropping the oldest record when full (capacity 0 keeps nothing).
  void add(builtin_eviction e);
  /// The records kept, oldest first.
  [[nodiscard]] const std::deque<builtin_eviction>& records() const { return records_; }
  /// Records dropped so far to keep the bound.
  [[nodiscard]] std::uint64_t dropped() const { return dropped_; }

private:
  std::size_t capacity_;
  std::deque<builtin_eviction> records_;
  std::uint64_t dropped_ = 0;
};

}  // namespace tec::shadow
