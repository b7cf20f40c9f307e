#include "tec/kubectl_plugin/pending_report.hpp"

#include <utility>

#include "tec/base/error.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/reports/evictions_report.hpp"

namespace tec::kubectl_plugin {
std::optional<reports::eviction_entry> entry_from_event(const event_view& e) {
  // "Pod ns/name will be evicted at 2026-11-23T15:40:00Z: taint k=v:NoExecute, tolerationSeconds
  // 300"
  constexpr std::string_view lead = "Pod ";
  constexpr std::string_view middle = " will be evicted at ";
  constexpr std::string_view taint_lead = ": taint ";
  constexpr std::string_view seconds_lead = ", tolerationSeconds ";
  std::string_view m = e.message;
  if (!m.starts_with(lead)) {
    return std::nullopt;
  }
  m.remove_prefix(lead.size());
  const auto mid = m.find(middle);
  if (mid == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view pod = m.substr(0, mid);
  m.remove_prefix(mid + middle.size());
  const auto tl = m.find(taint_lead);
  if (tl == std::string_view::npos) {
    return std::nullopt;
  }
  reports::eviction_entry p;
  p.due = std::string(m.substr(0, tl));
  m.remove_prefix(tl + taint_lead.size());
  const auto sl = m.rfind(seconds_lead);
  p.taints.emplace_back(m.substr(0, sl));
  p.pod = pod.find('/') == std::string_view::npos ? e.namespace_ + "/" + std::string(pod)
                                                  : std::string(pod);
  p.uid = e.pod_uid;
  p.state = "scheduled";
  p.why = sl == std::string_view::npos
              ? std::string("Event")
              : "Event: tolerationSeconds " + std::string(m.substr(sl + seconds_lead.size()));
  return p;
}

std::string due_text(const std::string& due, std::int64_t now_unix) {
  const auto at = base::parse_rfc3339(due);
  if (!at) {
    return due;
  }
  const std::int64_t d = *at - now_unix;
  return due + (d >= 0 ? " (in " + std::to_string(d) + "s)" : " (" + std::to_string(-d) + "s ago)");
}

document entry_document(const reports::eviction_entry& e) {
  return document::parse(reports::to_json(e));
}

std::string render_pending(const std::vector<reports::eviction_entry>& entries,
                           const std::string& source, bool all_namespaces, output_format format,
                           std::int64_t now_unix) {
  if (format == output_format::json || format == output_format::yaml) {
    document list = document::array();
    for (const auto& e : entries) {
      list.push_back(entry_document(e));
    }
    const document doc{{"source", source}, {"evictions", std::move(list)}};
    return format == output_format::json ? render_json(doc) : render_yaml(doc);
  }
  if (entries.empty()) {
    return "No pending evictions.\n";
  }
  table_row header{"POD", "NODE", "TAINT", "DUE", "STATE", "WHY"};
  if (all_namespaces) {
    header.insert(header.begin(), "NAMESPACE");
  }
  std::vector<table_row> rows;
  rows.reserve(entries.size());
  for (const auto& e : entries) {
    std::string why = e.why;
    if (!e.last_error.empty()) {
      why += (why.empty() ? "" : ": ") + e.last_error;
    }
    table_row row{std::string(reports::name_of(e)), e.node,  join_cell(e.taints),
                  due_text(e.due, now_unix),        e.state, why};
    if (all_namespaces) {
      row.insert(row.begin(), std::string(reports::namespace_of(e)));
    }
    rows.push_back(std::move(row));
  }
  return render_table(header, rows);
}

}  // namespace tec::kubectl_plugin
