#pragma once

// `shadow`'s report: the acting replica's /debug/shadow document (format in docs/operations.md,
// "Shadow mode"), how its decisions compared with the built-in taint manager's, read as the
// advisor mode's verdict. Printed as a summary line and a table of the disagreements (OUTCOME
// POD NODE OURS THEIRS AT, NAMESPACE first: the report is cluster-wide) or a JSON/YAML
// document; with --history, the built-in's evictions instead, newest first (DELETED NAMESPACE
// POD NODE TAINT OURS VERDICT REASON). Pure; any thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/kubectl_plugin/arguments.hpp"
#include "tec/kubectl_plugin/render.hpp"
#include "tec/shadow/report_records.hpp"

namespace tec::kubectl_plugin {

/// The /debug/shadow document (its records are shadow/'s, report_records.hpp: one type for the
/// daemon that writes them and the plugin).
struct shadow_doc {
  double window_seconds = 0;
  std::int64_t agreed = 0;
  std::int64_t only_them = 0;
  std::int64_t only_us = 0;
  std::int64_t cancelled_both = 0;
  std::int64_t ambiguous = 0;
  std::int64_t deleted_by_others = 0;
  std::int64_t pending = 0;
  std::int64_t settled_early = 0;
  double agreed_delay_max = 0;
  double agreed_delay_mean = 0;
  std::vector<shadow::disagreement> disagreements;
  /// The built-in's evictions (builtinEvictions), in the order the controller settled them.
  std::vector<shadow::builtin_eviction> builtin_evictions;
  std::int64_t builtin_evictions_dropped = 0;
  /// False for a controller too old to serve builtinEvictions.
  bool history_served = false;
};

/// Decodes a /debug/shadow body; an error when it is not that document.
[[nodiscard]] base::result<shadow_doc> decode_shadow(std::string_view body);

/// The output of `shadow`: `source` says which replica answered; `namespace_` (non-empty) keeps
/// only that namespace's disagreements (the counts stay cluster-wide).
[[nodiscard]] std::string render_shadow(const shadow_doc& doc, const std::string& source,
                                        const std::string& namespace_, output_format format);

/// The output of `shadow --history`: the built-in's evictions, newest first, with a line saying
/// how many there are and how many older ones were dropped; `namespace_` as for render_shadow().
[[nodiscard]] std::string render_shadow_history(const shadow_doc& doc, const std::string& source,
                                                const std::string& namespace_,
                                                output_format format);

}  // namespace tec::kubectl_plugin
