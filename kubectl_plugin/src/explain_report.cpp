#include "tec/kubectl_plugin/explain_report.hpp"

#include "tec/base/error.hpp"

namespace tec::kubectl_plugin {
namespace {

std::string str(const document& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

std::string join(const document& arr, std::string_view sep) {
  std::string out;
  if (!arr.is_array()) {
    return out;
  }
  for (const auto& x : arr) {
    if (x.is_string()) {
      out += (out.empty() ? "" : std::string(sep)) + x.get<std::string>();
    }
  }
  return out;
}

std::string taints_text(const std::vector<controller::taint>& taints) {
  std::string out;
  for (const auto& t : taints) {
    if (t.effect == controller::taint_effect::no_execute) {
      out += (out.empty() ? "" : ", ") + controller::taint_string(t);
    }
  }
  return out.empty() ? std::string("no NoExecute taints") : "NoExecute taints " + out;
}

// A toleration object of a history record, as toleration_text() writes one.
std::string record_toleration(const document& t) {
  if (!t.is_object()) {
    return "none";
  }
  controller::toleration tol;
  tol.key = str(t, "key");
  tol.value = str(t, "value");
  const std::string op = str(t, "operator");
  tol.op = op == "Exists" ? controller::toleration_operator::exists
                          : controller::toleration_operator::equal;
  const std::string effect = str(t, "effect");
  if (effect == "NoExecute") {
    tol.effect = controller::taint_effect::no_execute;
  }
  if (const auto s = t.find("tolerationSeconds"); s != t.end() && s->is_number_integer()) {
    tol.seconds = s->get<std::int64_t>();
  }
  return toleration_text(tol);
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

base::result<std::vector<document>> decode_history(std::string_view body) {
  document doc = document::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("records") ||
      !doc["records"].is_array()) {
    return base::make_error(base::errc::unexpected_shape,
                            "/debug/history: not the history document");
  }
  std::vector<document> out;
  for (auto& r : doc["records"]) {
    if (r.is_object()) {
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string history_line(const document& record) {
  std::string line = str(record, "done") + " " + str(record, "result") + ": scheduled " +
                     str(record, "scheduledAt") + ", due " + str(record, "due");
  if (const auto a = record.find("attempts"); a != record.end() && a->is_number_integer()) {
    const auto n = a->get<std::int64_t>();
    line += ", " + std::to_string(n) + (n == 1 ? " attempt" : " attempts");
  }
  line += "; node " + str(record, "node");
  if (const auto t = record.find("taints"); t != record.end()) {
    line += ", taints " + join(*t, ", ");
  }
  if (const auto t = record.find("toleration"); t != record.end()) {
    line += "; toleration " + record_toleration(*t);
  }
  if (const auto p = record.find("policy"); p != record.end() && p->is_array() && !p->empty()) {
    line += "; policy: " + join(*p, "; ");
  }
  const std::string err = str(record, "lastError");
  if (!err.empty()) {
    line += "; last error: " + err;
  }
  return base::printable(line, 1024);
}

namespace {

/// `explain -o json|yaml`: the report as one document.
document explain_document(const explain_report& r, const std::string& pod) {
  document history = document::array();
  for (const auto& h : r.history) {
    history.push_back(h);
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
