#include "tec/kubectl_plugin/pending_report.hpp"

#include <utility>

#include "tec/base/error.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/reports/evictions_report.hpp"

namespace tec::kubectl_plugin {
namespace {

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : ",") + p;
  }
  return out;
}

}  // namespace

base::result<evictions_doc> decode_evictions(std::string_view body) {
  auto doc = reports::parse_evictions_document(body);
  if (!doc) {
    return doc.error();
  }
  evictions_doc out;
  out.acting = doc->acting;
  for (reports::eviction_entry& e : doc->evictions) {
    pending_entry p;
    const auto slash = e.pod.find('/');
    p.namespace_ = slash == std::string::npos ? std::string{} : e.pod.substr(0, slash);
    p.pod = slash == std::string::npos ? e.pod : e.pod.substr(slash + 1);
    p.uid = std::move(e.uid);
    p.node = std::move(e.node);
    p.taints = std::move(e.taints);
    p.due = std::move(e.due);
    p.state = std::move(e.state);
    p.why = std::move(e.why);
    p.attempts = e.attempts;
    p.last_error = std::move(e.last_error);
    out.entries.push_back(std::move(p));
  }
  return out;
}

std::optional<pending_entry> entry_from_event(const event_view& e) {
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
  pending_entry p;
  p.due = std::string(m.substr(0, tl));
  m.remove_prefix(tl + taint_lead.size());
  const auto sl = m.rfind(seconds_lead);
  p.taints.emplace_back(m.substr(0, sl));
  const auto slash = pod.find('/');
  p.namespace_ = slash == std::string_view::npos ? e.namespace_ : std::string(pod.substr(0, slash));
  p.pod = slash == std::string_view::npos ? std::string(pod) : std::string(pod.substr(slash + 1));
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

document entry_document(const pending_entry& e) {
  return document{{"pod", e.namespace_ + "/" + e.pod},
                  {"uid", e.uid},
                  {"node", e.node},
                  {"taints", e.taints},
                  {"due", e.due},
                  {"state", e.state},
                  {"why", e.why},
                  {"attempts", e.attempts},
                  {"lastError", e.last_error}};
}

std::string render_pending(const std::vector<pending_entry>& entries, const std::string& source,
                           bool all_namespaces, output_format format, std::int64_t now_unix) {
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
    table_row row{e.pod, e.node, join(e.taints), due_text(e.due, now_unix), e.state, why};
    if (all_namespaces) {
      row.insert(row.begin(), e.namespace_);
    }
    rows.push_back(std::move(row));
  }
  return render_table(header, rows);
}

}  // namespace tec::kubectl_plugin
