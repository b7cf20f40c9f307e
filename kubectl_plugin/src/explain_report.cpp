#include "tec/kubectl_plugin/explain_report.hpp"

#include <chrono>
#include <utility>

#include "tec/base/error.hpp"
#include "tec/base/rfc3339.hpp"

namespace tec::kubectl_plugin {
namespace {

std::string taints_text(const std::vector<controller::taint>& taints) {
  std::string out;
  for (const auto& t : taints) {
    if (t.effect == controller::taint_effect::no_execute) {
      out += (out.empty() ? "" : ", ") + controller::taint_string(t);
    }
  }
  return out.empty() ? std::string("no NoExecute taints") : "NoExecute taints " + out;
}

// A history record's toleration, as toleration_text() writes one.
std::string record_toleration(const std::optional<reports::history_toleration>& t) {
  if (!t) {
    return "none";
  }
  controller::toleration tol;
  tol.key = t->key;
  tol.value = t->value;
  tol.op = t->op == "Exists" ? controller::toleration_operator::exists
                             : controller::toleration_operator::equal;
  if (t->effect == "NoExecute") {
    tol.effect = controller::taint_effect::no_execute;
  }
  tol.seconds = t->seconds;
  return toleration_text(tol);
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : std::string(sep)) + p;
  }
  return out;
}

std::string when(std::chrono::system_clock::time_point t) {
  return base::format_rfc3339(t, base::rfc3339_digits::milliseconds);
}

document decision_document(const explain_report& r) {
  const auto& d = r.decision;
  const bool after = d.what == controller::pod_preview::outcome::after;
  return document{
      {"outcome", d.what == controller::pod_preview::outcome::now ? "now"
                  : after                                         ? "after"
                                                                  : "never"},
      {"seconds", after ? document(d.seconds) : document(nullptr)},
      {"skip", d.skip ? document(controller::to_string(*d.skip)) : document(nullptr)},
      {"taint", d.by_taint ? document(controller::taint_string(*d.by_taint)) : document(nullptr)},
      {"toleration", d.used ? toleration_json(*d.used) : document(nullptr)},
      {"rule", d.rule ? document(*d.rule) : document(nullptr)},
      {"why", d.why}};
}

}  // namespace

base::result<std::vector<reports::history_record>> decode_history(std::string_view body) {
  auto doc = reports::parse_history_document(body);
  if (!doc) {
    return doc.error();
  }
  return std::move(doc->records);
}

std::string history_line(const reports::history_record& record) {
  std::string line = when(record.done) + " " + record.result + ": scheduled " +
                     when(record.scheduled_at) + ", due " + when(record.due);
  line +=
      ", " + std::to_string(record.attempts) + (record.attempts == 1 ? " attempt" : " attempts");
  line += "; node " + record.node + ", taints " + join(record.taints, ", ");
  line += "; toleration " + record_toleration(record.toleration);
  if (!record.policy.empty()) {
    line += "; policy: " + join(record.policy, "; ");
  }
  if (!record.last_error.empty()) {
    line += "; last error: " + record.last_error;
  }
  return base::printable(line, 1024);
}

namespace {

/// `explain -o json|yaml`: the report as one document.
document explain_document(const explain_report& r, const std::string& pod) {
  document history = document::array();
  for (const auto& h : r.history) {
    history.push_back(document::parse(reports::to_json(h)));
  }
  if (!r.pod_found) {
    return document{{"pod", pod},
                    {"found", false},
                    {"generatedAt", utc_time(r.now_unix)},
                    {"controller", r.reached},
                    {"pending", r.pending ? entry_document(*r.pending) : document(nullptr)},
                    {"history", std::move(history)}};
  }
  std::vector<std::string> taints;
  for (const auto& x : r.node_taints) {
    taints.push_back(controller::taint_string(x));
  }
  return document{
      {"pod", pod},
      {"found", true},
      {"uid", r.pod.uid},
      {"terminating", r.pod.terminating},
      {"node", r.pod.node_name},
      {"nodeTaints", std::move(taints)},
      {"generatedAt", utc_time(r.now_unix)},
      {"policy", r.policy},
      {"decision", decision_document(r)},
      {"controller", r.unreachable.empty() ? document(r.reached) : document(nullptr)},
      {"unreachable", r.unreachable.empty() ? document(nullptr) : document(r.unreachable)},
      {"pending", r.pending ? entry_document(*r.pending) : document(nullptr)},
      {"history", std::move(history)},
      {"historyUnknown",
       r.history_missing.empty() ? document(nullptr) : document(r.history_missing)}};
}

/// The history's lines, oldest first, under `title`.
std::string history_text(const explain_report& r, std::string_view title) {
  std::string out = std::string(title) + " (oldest first):\n";
  for (const auto& h : r.history) {
    out += "  " + history_line(h) + "\n";
  }
  return out;
}

/// The text's first lines: the pod, its node and taints, the decision now and the policy.
std::string pod_and_decision_text(const explain_report& r, const std::string& pod) {
  std::string out =
      "Pod " + pod + " (uid " + r.pod.uid + (r.pod.terminating ? ", terminating" : "") + ")";
  if (r.pod.node_name.empty()) {
    out += " is not bound to a node.\n";
  } else if (!r.node_found) {
    out += " on node " + r.pod.node_name + ", which does not exist.\n";
  } else {
    out += " on node " + r.pod.node_name + " (" + taints_text(r.node_taints) + ").\n";
  }
  const auto& d = r.decision;
  out += "Decision now: ";
  switch (d.what) {
    case controller::pod_preview::outcome::now:
      out += "evicted at once";
      break;
    case controller::pod_preview::outcome::after:
      out += "evicted " + std::to_string(d.seconds) + "s after the taint";
      break;
    case controller::pod_preview::outcome::never:
      out += "not evicted";
      break;
  }
  return out + ": " + d.why + "\n" + "Policy: " + r.policy + "\n";
}

/// What the acting replica says: its pending eviction and the history, or why unknown.
std::string replica_text(const explain_report& r) {
  if (!r.unreachable.empty()) {
    return "Pending and history: unknown (could not reach the acting replica: " + r.unreachable +
           ")\n";
  }
  std::string out;
  if (r.pending) {
    const auto& p = *r.pending;
    out += "Pending on the acting replica (" + r.reached + "): " + p.state +
           (p.why.empty() ? "" : " (" + p.why + ")") + ", due " + due_text(p.due, r.now_unix) +
           ", attempts " + std::to_string(p.attempts) +
           (p.last_error.empty() ? "" : ", last error: " + p.last_error) + "\n";
  } else {
    out += "Pending on the acting replica (" + r.reached + "): no eviction\n";
  }
  if (!r.history_missing.empty()) {
    return out + "History: unknown (" + r.history_missing + ")\n";
  }
  if (r.history.empty()) {
    return out + "History: no record (the replica keeps the last outcomes since it started)\n";
  }
  return out + history_text(r, "History");
}

}  // namespace

std::string render_explain(const explain_report& r, output_format format) {
  const std::string pod = r.pod.namespace_ + "/" + r.pod.name;
  if (format == output_format::json || format == output_format::yaml) {
    const document doc = explain_document(r, pod);
    return format == output_format::json ? render_json(doc) : render_yaml(doc);
  }
  if (!r.pod_found) {
    std::string out =
        "Pod " + pod + " no longer exists; the acting replica (" + r.reached + ") remembers it.\n";
    if (r.pending) {
      out +=
          "Pending: " + r.pending->state + ", due " + due_text(r.pending->due, r.now_unix) + "\n";
    }
    return out + history_text(r, "History");
  }
  return pod_and_decision_text(r, pod) + replica_text(r);
}

}  // namespace tec::kubectl_plugin
