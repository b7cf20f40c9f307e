#pragma once

// `explain POD`'s story: the pod and its node's taints, a fresh decision
// (controller::decide_pod under the policy in force), its pending eviction on the acting
// replica, and its records in the replica's /debug/history (format: the history record of
// issue 32; oldest first). As text, or as one JSON/YAML document. Pure; any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/controller/preview.hpp"
#include "tec/kubectl_plugin/arguments.hpp"
#include "tec/kubectl_plugin/pending_report.hpp"
#include "tec/kubectl_plugin/render.hpp"
#include "tec/reports/eviction_history.hpp"
#include "tec/reports/evictions_report.hpp"

namespace tec::kubectl_plugin {

/// The `records` of a /debug/history body (reports::parse_history_document); an error when it
/// is not that document.
[[nodiscard]] base::result<std::vector<reports::history_record>> decode_history(
    std::string_view body);

/// One history record as one line: "2026-11-28T03:12:12Z deleted: scheduled 03:07:12Z, due
/// 03:12:12Z, 1 attempt; taints dedicated=x:NoExecute; toleration dedicated=x:NoExecute for
/// 300s; policy: ...".
[[nodiscard]] std::string history_line(const reports::history_record& record);

struct explain_report {
  /// False: the pod no longer exists; `pod` then holds only its namespace and name, and the
  /// report is its history (no node, no decision).
  bool pod_found = true;
  controller::pod_view pod;
  bool node_found = false;  ///< The pod's node exists (and is bound).
  std::vector<controller::taint> node_taints;
  controller::pod_preview decision;  ///< decide_pod(), now.
  std::int64_t now_unix = 0;
  std::string policy;  ///< As preview_report::policy.
  /// Empty when the acting replica was reached; else why not (pending and history unknown).
  std::string unreachable;
  std::string reached;                             ///< What was reached (controller_access).
  std::optional<reports::eviction_entry> pending;  ///< Its entry in /debug/evictions.
  /// Why the history is not shown though the replica was reached (e.g. it serves none).
  std::string history_missing;
  std::vector<reports::history_record> history;  ///< Its records, oldest first.
};

/// The output of `explain` for `format` (table: the text story).
[[nodiscard]] std::string render_explain(const explain_report& r, output_format format);

}  // namespace tec::kubectl_plugin
