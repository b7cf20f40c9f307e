#include "tec/kubectl_plugin/plugin.hpp"

#include <algorithm>
#include <boost/system/result.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <utility>

#include "tec/base/error.hpp"
#include "tec/controller/preview.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/k8sclient/exec_authenticator.hpp"
#include "tec/k8sclient/paths.hpp"
#include "tec/kubectl_plugin/arguments.hpp"
#include "tec/kubectl_plugin/cluster.hpp"
#include "tec/kubectl_plugin/controller_access.hpp"
#include "tec/kubectl_plugin/explain_report.hpp"
#include "tec/kubectl_plugin/pending_report.hpp"
#include "tec/kubectl_plugin/preview_report.hpp"
#include "tec/kubectl_plugin/shadow_report.hpp"
#include "tec/policy/policy_file.hpp"
#include "tec/reports/evictions_report.hpp"

namespace tec::kubectl_plugin {
namespace {

constexpr std::string_view policy_key = "policy.yaml";  // deploy/policy.yaml's key
constexpr std::string_view scheduled_reason = "TaintEvictionScheduled";

// A failed command: its exit code and its one line.
struct failure {
  int code = exit_cluster_error;
  std::string message;
};

// What boost::system::result<T, failure>::value() throws on a failure (never reached: every
// caller checks first).
[[noreturn]] void throw_exception_from_error(const failure& f, const boost::source_location&) {
  throw std::runtime_error(f.message);
}

template <class T>
using outcome = boost::system::result<T, failure>;

failure cluster_failure(const base::error& e) {
  return failure{exit_cluster_error, base::printable(e.message, 1024)};
}

std::int64_t now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct session {
  cluster_flags flags;
  std::unique_ptr<cluster_reader> cluster;
  std::string default_namespace;  ///< The context's namespace, else "default".
};

outcome<session> connect(const invocation& inv, const env_lookup& env) {
  const std::string path = kubeconfig_path(inv.cluster.kubeconfig, env("KUBECONFIG"), env("HOME"));
  auto config = k8sclient::load_kubeconfig(path, inv.cluster.context);
  if (!config) {
    return failure{exit_cluster_error, base::printable(config.error().message, 1024)};
  }
  if (const auto& exec = config.value().exec) {
    // The exec plugin runs here, once: its failure is this command's one line, and the API
    // reader and the controller's port (its bearer token) share what it gave.
    if (auto got = exec->get(); !got) {
      return failure{exit_cluster_error, base::printable(got.error().message, 1024)};
    }
  }
  session s;
  s.flags = inv.cluster;
  s.default_namespace = config.value().namespace_.empty() ? "default" : config.value().namespace_;
  s.cluster =
      std::make_unique<cluster_reader>(std::move(config).value(), inv.cluster.request_wait());
  return s;
}

struct loaded_policy {
  controller::eviction_policy policy;
  std::string description;
};

// --policy FILE (a bad file is bad usage: exit 2), else the ConfigMap (absent: no policy).
outcome<loaded_policy> load_policy(session& s, const std::string& file) {
  loaded_policy out;
  std::string text;
  std::string source;
  if (!file.empty()) {
    auto read = policy::read_policy_text(file);
    if (!read) {
      return failure{exit_usage, "--policy: " + base::printable(read.error().message, 512)};
    }
    text = std::move(read).value();
    source = file;
  } else {
    const std::string name = s.flags.controller_namespace + "/" + s.flags.policy_configmap;
    auto value = s.cluster->configmap_value(s.flags.controller_namespace, s.flags.policy_configmap,
                                            policy_key);
    if (!value) {
      return failure{exit_cluster_error,
                     "reading ConfigMap " + name + ": " + base::printable(value.error().message)};
    }
    if (!value.value()) {
      out.description = "none (no ConfigMap " + name + " with " + std::string(policy_key) +
                        "): upstream's behaviour";
      return out;
    }
    text = std::move(*value.value());
    source = "ConfigMap " + name;
  }
  auto parsed = policy::parse_policy(text, source);
  if (!parsed) {
    return failure{file.empty() ? exit_cluster_error : exit_usage,
                   "the policy is invalid: " + parsed.summary()};
  }
  out.policy = std::move(*parsed.policy);
  out.description = source + ": " + policy::describe(out.policy);
  return out;
}

outcome<std::string> run_preview(const invocation& inv, const env_lookup& env) {
  auto s = connect(inv, env);
  if (!s) {
    return s.error();
  }
  auto& cluster = *s.value().cluster;
  auto all = cluster.nodes();
  if (!all) {
    return cluster_failure(all.error());
  }
  controller::preview_input in;
  in.added = inv.taint;
  in.all_nodes = std::move(all).value();
  if (!inv.node_selector.empty()) {
    auto selected = cluster.nodes(inv.node_selector);
    if (!selected) {
      return cluster_failure(selected.error());
    }
    if (selected.value().empty()) {
      return failure{exit_cluster_error, "no nodes match the selector \"" +
                                             base::printable(inv.node_selector, 256) + "\""};
    }
    in.targets = std::move(selected).value();
  } else {
    for (const auto& name : inv.nodes) {
      const auto it = std::find_if(in.all_nodes.begin(), in.all_nodes.end(),
                                   [&](const controller::node_view& n) { return n.name == name; });
      if (it == in.all_nodes.end()) {
        return failure{exit_cluster_error, "nodes \"" + name + "\" not found"};
      }
      in.targets.push_back(*it);
    }
  }
  for (const auto& n : in.targets) {
    auto pods = cluster.pods({}, "spec.nodeName=" + n.name);
    if (!pods) {
      return cluster_failure(pods.error());
    }
    for (auto& p : pods.value()) {
      in.pods.push_back(std::move(p));
    }
  }
  auto opted_out = cluster.opted_out_namespaces();
  if (!opted_out) {
    return cluster_failure(opted_out.error());
  }
  in.opted_out_namespaces = std::move(opted_out).value();
  auto policy = load_policy(s.value(), inv.policy_file);
  if (!policy) {
    return policy.error();
  }
  in.policy = policy.value().policy;
  preview_report report;
  report.policy = policy.value().description;
  report.now_unix = now_unix();
  in.now_unix = report.now_unix;
  report.result = controller::preview(in);
  if (in.policy.mode == controller::eviction_mode::evict) {
    auto pdbs = cluster.pdbs();
    if (!pdbs) {
      return cluster_failure(pdbs.error());
    }
    report.pdbs.resize(report.result.pods.size());
    for (std::size_t i = 0; i < report.result.pods.size(); ++i) {
      const auto& p = report.result.pods[i];
      if (p.what == controller::pod_preview::outcome::never) {
        continue;
      }
      const auto pod = std::find_if(in.pods.begin(), in.pods.end(), [&](const auto& v) {
        return v.namespace_ == p.namespace_ && v.name == p.name;
      });
      for (const auto& b : pdbs.value()) {
        if (pod != in.pods.end() && covers(b, p.namespace_, pod->labels)) {
          report.pdbs[i].push_back(pdb_note{b.namespace_ + "/" + b.name, b.disruptions_allowed});
        }
      }
    }
  }
  return render_preview(report, inv.output);
}

// The acting replica's document at `target`, or why it cannot be had.
struct reached {
  std::unique_ptr<controller_access> access;
  std::string unreachable;  ///< Empty when `access` is set.
};

reached reach(session& s) {
  reached r;
  auto access = controller_access::open(*s.cluster, s.flags);
  if (!access) {
    r.unreachable = access.error().message;
  } else {
    r.access = std::move(access).value();
  }
  return r;
}

outcome<std::string> run_pending(const invocation& inv, const env_lookup& env, std::ostream& err) {
  auto s = connect(inv, env);
  if (!s) {
    return s.error();
  }
  const std::string ns =
      inv.all_namespaces ? std::string{}
                         : (inv.namespace_.empty() ? s.value().default_namespace : inv.namespace_);
  const auto keep = [&](const reports::eviction_entry& e) {
    return (ns.empty() || reports::namespace_of(e) == ns) &&
           (inv.node.empty() || e.node == inv.node);
  };
  std::vector<reports::eviction_entry> rows;
  auto r = reach(s.value());
  std::string why = r.unreachable;
  if (r.access) {
    auto body = r.access->get("/debug/evictions");
    auto doc = body ? reports::parse_evictions_document(body.value())
                    : base::result<reports::evictions_document>(body.error());
    if (!doc) {
      why = doc.error().message;
    } else if (!doc.value().acting) {
      why = r.access->description() + " does not act (a standby, or its caches are not synced)";
    } else {
      for (auto& e : doc.value().evictions) {
        if (keep(e)) {
          rows.push_back(std::move(e));
        }
      }
      return render_pending(rows, r.access->description(), inv.all_namespaces, inv.output,
                            now_unix());
    }
  }
  err << "could not reach the acting replica (" << base::printable(why, 512)
      << "): showing TaintEvictionScheduled events instead\n";
  auto events = s.value().cluster->events(ns, scheduled_reason);
  if (!events) {
    return cluster_failure(events.error());
  }
  // The Events do not name the node: the pods do (those gone since are left out with --node).
  auto pods =
      s.value().cluster->pods(ns, inv.node.empty() ? std::string{} : "spec.nodeName=" + inv.node);
  if (!pods) {
    return cluster_failure(pods.error());
  }
  for (const auto& ev : events.value()) {
    auto e = entry_from_event(ev);
    if (!e) {
      continue;
    }
    const auto pod = std::find_if(pods.value().begin(), pods.value().end(), [&](const auto& p) {
      return p.namespace_ == reports::namespace_of(*e) && p.name == reports::name_of(*e) &&
             (e->uid.empty() || p.uid == e->uid);
    });
    if (pod != pods.value().end()) {
      e->node = pod->node_name;
    } else if (!inv.node.empty()) {
      continue;
    }
    if (keep(*e)) {
      rows.push_back(std::move(*e));
    }
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.due < b.due; });
  return render_pending(rows, "events", inv.all_namespaces, inv.output, now_unix());
}

// Shadow mode's report from the acting replica. No fallback: only a replica in shadow mode has
// one (404 otherwise).
outcome<std::string> run_shadow(const invocation& inv, const env_lookup& env) {
  auto s = connect(inv, env);
  if (!s) {
    return s.error();
  }
  auto r = reach(s.value());
  if (!r.access) {
    return failure{exit_cluster_error, "could not reach the acting replica (" +
                                           base::printable(r.unreachable, 512) + ")"};
  }
  auto body = r.access->get("/debug/shadow");
  if (!body) {
    std::string why = base::printable(body.error().message, 512);
    if (body.error().code == base::make_error_code(base::errc::not_found)) {
      why = r.access->description() +
            " does not run in shadow mode (--shadow, the chart's shadow: true): " + why;
    }
    return failure{exit_cluster_error, why};
  }
  auto doc = shadow::parse_shadow_document(body.value());
  if (!doc) {
    return failure{exit_cluster_error, doc.error().message};
  }
  if (inv.history && !doc.value().history_served) {
    return failure{exit_cluster_error, r.access->description() +
                                           " keeps no history of the built-in's evictions (a "
                                           "controller older than this plugin)"};
  }
  const auto& render = inv.history ? render_shadow_history : render_shadow;
  return render(doc.value(), r.access->description(), inv.namespace_, inv.output);
}

// The pod's entry in the acting replica's /debug/evictions and its /debug/history records, into
// `report` (report.unreachable: the evictions document could not be read; history_missing: the
// history could not).
void read_pending_and_history(controller_access& access, const std::string& ns,
                              const std::string& name, explain_report& report) {
  auto body = access.get("/debug/evictions");
  auto doc = body ? reports::parse_evictions_document(body.value())
                  : base::result<reports::evictions_document>(body.error());
  if (!doc) {
    report.unreachable = doc.error().message;
    return;
  }
  for (auto& e : doc.value().evictions) {
    if (reports::namespace_of(e) == ns && reports::name_of(e) == name) {
      report.pending = std::move(e);
      break;
    }
  }
  auto history =
      access.get("/debug/history?pod=" + k8sclient::escape_path_segment(ns + "/" + name));
  auto records = history ? decode_history(history.value())
                         : base::result<std::vector<reports::history_record>>(history.error());
  if (!records) {
    report.history_missing = records.error().message;
  } else {
    report.history = std::move(records).value();
  }
}

outcome<std::string> run_explain(const invocation& inv, const env_lookup& env) {
  auto s = connect(inv, env);
  if (!s) {
    return s.error();
  }
  auto& cluster = *s.value().cluster;
  const std::string ns = inv.namespace_.empty() ? s.value().default_namespace : inv.namespace_;
  auto pod = cluster.pod(ns, inv.pod);
  if (!pod) {
    return cluster_failure(pod.error());
  }
  explain_report report;
  report.now_unix = now_unix();
  if (!pod.value()) {
    // Gone (the usual case the morning after an eviction): the history alone can tell.
    report.pod_found = false;
    report.pod.namespace_ = ns;
    report.pod.name = inv.pod;
    auto r = reach(s.value());
    std::string why = r.unreachable;
    if (r.access) {
      report.reached = r.access->description();
      read_pending_and_history(*r.access, ns, inv.pod, report);
      if (!report.history.empty()) {
        return render_explain(report, inv.output);
      }
      why = report.history_missing.empty() ? report.reached + " has no history record of it"
                                           : report.history_missing;
    }
    return failure{exit_cluster_error, "pods \"" + inv.pod + "\" not found (history: " +
                                           base::printable(why, 300) + ")"};
  }
  report.pod = std::move(*pod.value());
  if (!report.pod.node_name.empty()) {
    auto node = cluster.node(report.pod.node_name);
    if (!node) {
      return cluster_failure(node.error());
    }
    report.node_found = node.value().has_value();
    if (node.value()) {
      report.node_taints = node.value()->taints;
    }
  }
  auto opted_out = cluster.opted_out_namespaces();
  if (!opted_out) {
    return cluster_failure(opted_out.error());
  }
  const bool ns_out =
      std::find(opted_out.value().begin(), opted_out.value().end(), ns) != opted_out.value().end();
  auto policy = load_policy(s.value(), {});
  if (!policy) {
    return policy.error();
  }
  report.policy = policy.value().description;
  report.decision =
      controller::decide_pod(report.pod, report.node_taints, policy.value().policy, ns_out);
  auto r = reach(s.value());
  report.unreachable = r.unreachable;
  if (r.access) {
    report.reached = r.access->description();
    read_pending_and_history(*r.access, ns, inv.pod, report);
  }
  return render_explain(report, inv.output);
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        const env_lookup& env) {
  auto parsed = parse_arguments(args);
  out << parsed.out;
  err << parsed.err;
  if (!parsed.inv) {
    return parsed.exit_code;
  }
  const invocation& inv = *parsed.inv;
  outcome<std::string> result = failure{};
  try {
    switch (inv.what) {
      case verb::preview:
        result = run_preview(inv, env);
        break;
      case verb::pending:
        result = run_pending(inv, env, err);
        break;
      case verb::explain:
        result = run_explain(inv, env);
        break;
      case verb::shadow:
        result = run_shadow(inv, env);
        break;
    }
  } catch (const std::exception& e) {
    result = failure{exit_cluster_error, base::printable(e.what(), 512)};
  }
  if (!result) {
    err << "error: " << result.error().message << "\n";
    return result.error().code;
  }
  out << result.value();
  return exit_ok;
}

}  // namespace tec::kubectl_plugin
