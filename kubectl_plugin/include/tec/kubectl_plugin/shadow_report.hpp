#pragma once

// `shadow`'s report: the acting replica's /debug/shadow document (its one type,
// shadow::shadow_document, shadow/report_records.hpp; docs/operations.md, "Shadow mode"), how
// its decisions compared with the built-in taint manager's, read as the advisor mode's verdict.
// Printed as a summary line and a table of the disagreements (OUTCOME POD NODE OURS THEIRS AT,
// NAMESPACE first: the report is cluster-wide) or a JSON/YAML document; with --history, the
// built-in's evictions instead, newest first (DELETED NAMESPACE POD NODE TAINT OURS VERDICT
// REASON). Pure; any thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/kubectl_plugin/arguments.hpp"
#include "tec/kubectl_plugin/render.hpp"
#include "tec/shadow/report_records.hpp"

namespace tec::kubectl_plugin {

/// The output of `shadow`: `source` says which replica answered; `namespace_` (non-empty) keeps
/// only that namespace's disagreements (the counts stay cluster-wide).
[[nodiscard]] std::string render_shadow(const shadow::shadow_document& doc,
                                        const std::string& source, const std::string& namespace_,
                                        output_format format);

/// The output of `shadow --history`: the built-in's evictions, newest first, with a line saying
/// how many there are and how many older ones were dropped; `namespace_` as for render_shadow().
[[nodiscard]] std::string render_shadow_history(const shadow::shadow_document& doc,
                                                const std::string& source,
                                                const std::string& namespace_,
                                                output_format format);

}  // namespace tec::kubectl_plugin
