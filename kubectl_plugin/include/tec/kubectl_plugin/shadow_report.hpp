#pragma once

// `shadow`'s report: the acting replica's /debug/shadow document (format in docs/operations.md,
// "Shadow mode"), how its decisions compared with the built-in taint manager's, read as the
// advisor mode's verdict. Printed as a summary line and a table of the disagreements (OUTCOME
// POD NODE OURS THEIRS AT, NAMESPACE first: the report is cluster-wide) or a JSON/YAML
// document. Pure; any thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/kubectl_plugin/arguments.hpp"
#include "tec/kubectl_plugin/render.hpp"

namespace tec::kubectl_plugin {

/// One pod on which ours and the built-in disagreed.
struct shadow_entry {
  std::string outcome;  ///< only_them or only_us.
  std::string namespace_;
  std::string pod;
  std::string uid;
  std::string node;
  std::vector<std::string> taints;
  std::string ours;    ///< "none", "would delete at T", "scheduled for T", "cancelled at T (why)".
  std::string theirs;  ///< "deleted at T (event: ...)", "deleted at T (condition: ...)", "none".
  std::string at;      ///< When it was settled, RFC 3339.
};

/// The /debug/shadow document.
struct shadow_doc {
  double window_seconds = 0;
  std::int64_t agreed = 0;
  std::int64_t only_them = 0;
  std::int64_t only_us = 0;
  std::int64_t cancelled_both = 0;
  std::int64_t deleted_by_others = 0;
  std::int64_t pending = 0;
  std::int64_t settled_early = 0;
  double agreed_delay_max = 0;
  double agreed_delay_mean = 0;
  std::vector<shadow_entry> disagreements;
};

/// Decodes a /debug/shadow body; an error when it is not that document.
[[nodiscard]] base::result<shadow_doc> decode_shadow(std::string_view body);

/// The output of `shadow`: `source` says which replica answered; `namespace_` (non-empty) keeps
/// only that namespace's disagreements (the counts stay cluster-wide).
[[nodiscard]] std::string render_shadow(const shadow_doc& doc, const std::string& source,
                                        const std::string& namespace_, output_format format);

}  // namespace tec::kubectl_plugin
