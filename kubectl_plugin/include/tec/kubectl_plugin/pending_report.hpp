#pragma once

// `pending`'s rows: the entries of the acting replica's /debug/evictions document (its one
// type, reports::eviction_entry), or, when it cannot be reached, the TaintEvictionScheduled
// Events (their message names the pod, the due time and the taint). Printed as a table (POD
// NODE TAINT DUE STATE WHY, NAMESPACE first with -A) or a JSON/YAML document. Pure; any
// thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tec/kubectl_plugin/arguments.hpp"
#include "tec/kubectl_plugin/cluster.hpp"
#include "tec/kubectl_plugin/render.hpp"
#include "tec/reports/evictions_report.hpp"

namespace tec::kubectl_plugin {

/// The entry a TaintEvictionScheduled Event describes ("Pod ns/name will be evicted at T:
/// taint K=V:NoExecute, tolerationSeconds N"); nullopt for any other message. The node is
/// left empty (the Event does not name it).
[[nodiscard]] std::optional<reports::eviction_entry> entry_from_event(const event_view& e);

/// The output of `pending`. `source` says where the rows came from (the document's "source");
/// `all_namespaces` adds the NAMESPACE column; `now_unix` gives the DUE column's "in Ns".
[[nodiscard]] std::string render_pending(const std::vector<reports::eviction_entry>& entries,
                                         const std::string& source, bool all_namespaces,
                                         output_format format, std::int64_t now_unix);

/// "2026-11-28T03:12:00.120Z (in 280s)" / "(12s ago)"; `due` alone when it does not parse.
[[nodiscard]] std::string due_text(const std::string& due, std::int64_t now_unix);

/// One entry as JSON (the fields of /debug/evictions).
[[nodiscard]] document entry_document(const reports::eviction_entry& e);

}  // namespace tec::kubectl_plugin
