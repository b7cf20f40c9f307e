#pragma once

// `preview`'s output: controller::preview()'s result, the PodDisruptionBudgets of the pods it
// evicts (Evict mode), as a table (NAMESPACE POD NODE OUTCOME WHY; wide adds TOLERATION and
// RULE) followed by the summary, storm breaker and rate limit lines, or as one JSON or YAML
// document holding all of it. Pure; any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "tec/controller/preview.hpp"
#include "tec/kubectl_plugin/arguments.hpp"
#include "tec/kubectl_plugin/render.hpp"

namespace tec::kubectl_plugin {

/// A PodDisruptionBudget covering a pod the taint evicts.
struct pdb_note {
  std::string name;  ///< "namespace/name".
  std::int64_t disruptions_allowed = 0;
};

struct preview_report {
  controller::preview_result result;
  /// Per pod of result.pods (same order), the budgets covering it: filled in Evict mode only
  /// (Delete mode ignores budgets), and only for pods it evicts.
  std::vector<std::vector<pdb_note>> pdbs;
  std::string policy;         ///< Where the policy came from and what it does, one line.
  std::int64_t now_unix = 0;  ///< "now", for the "at" times.
};

/// "now", "in 300s (at 03:12:00Z)" or "never".
[[nodiscard]] std::string outcome_text(const controller::pod_preview& p, std::int64_t now_unix);

/// The storm breaker line: "storm breaker: off (...)" or what it would do.
[[nodiscard]] std::string breaker_line(const controller::storm_preview& s);
/// The rate limit line.
[[nodiscard]] std::string rate_line(const controller::preview_result& r);

/// The whole output of `preview` for `format`.
[[nodiscard]] std::string render_preview(const preview_report& report, output_format format);

/// The document `-o json|yaml` prints.
[[nodiscard]] document preview_document(const preview_report& report);

}  // namespace tec::kubectl_plugin
