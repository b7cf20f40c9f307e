#include "tec/kubectl_plugin/arguments.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <sstream>
#include <utility>

#include "tec/base/duration.hpp"
#include "tec/base/error.hpp"

namespace tec::kubectl_plugin {
namespace {

constexpr std::size_t max_name_part = 63;
constexpr std::size_t max_prefix = 253;

bool alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// A label name or value part: [A-Za-z0-9] at both ends, [-_.A-Za-z0-9] inside, <= 63 bytes.
bool valid_name_part(std::string_view s) {
  if (s.empty() || s.size() > max_name_part || !alnum(s.front()) || !alnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A DNS-1123 subdomain (a label key's prefix, a node or namespace name).
bool valid_subdomain(std::string_view s) {
  if (s.empty() || s.size() > max_prefix) {
    return false;
  }
  const bool chars = std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
  return chars && s.front() != '-' && s.front() != '.' && s.back() != '-' && s.back() != '.';
}

bool valid_key(std::string_view key) {
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) {
    return valid_name_part(key);
  }
  return valid_subdomain(key.substr(0, slash)) && valid_name_part(key.substr(slash + 1));
}

std::string quote_text(std::string_view text) {
  return "\"" + base::printable(text, 256) + "\"";
}

base::error usage_error(std::string message) {
  return base::make_error(base::errc::config_invalid, std::move(message));
}

parse_outcome usage(std::string message) {
  parse_outcome o;
  o.exit_code = exit_usage;
  o.err = "error: " + std::move(message) + "\n";
  return o;
}

struct raw_flags {
  std::string output = "table";
  std::string taint;
  std::string timeout = "30s";
};

void add_global_flags(CLI::App& app, invocation& inv, raw_flags& raw) {
  app.add_option("--kubeconfig", inv.cluster.kubeconfig,
                 "Path to the kubeconfig file (default: the first file of $KUBECONFIG, else "
                 "~/.kube/config)");
  app.add_option("--context", inv.cluster.context, "The kubeconfig context to use");
  app.add_option("-o,--output", raw.output, "Output format: table (default), wide, json or yaml");
  app.add_option("--controller-namespace", inv.cluster.controller_namespace,
                 "Namespace of the controller: its Lease and its policy ConfigMap");
  app.add_option("--policy-configmap", inv.cluster.policy_configmap,
                 "ConfigMap (in --controller-namespace) holding the policy, key policy.yaml; "
                 "absent: no policy (upstream's behaviour)");
  app.add_option("--lease", inv.cluster.lease,
                 "Lease (in --controller-namespace) naming the acting replica");
  app.add_option("--controller-url", inv.cluster.controller_url,
                 "https://HOST:PORT of the acting replica's secure port when you reach it "
                 "yourself (e.g. your own port-forward): no Lease lookup, no port-forward");
  app.add_option("--request-timeout", raw.timeout,
                 "How long to wait for each request to the cluster or the controller, as "
                 "kubectl takes it: a duration (30s, 1m, 500ms) or a number of seconds; 0: no "
                 "timeout");
}

std::optional<output_format> parse_output(std::string_view text) {
  if (text == "table" || text.empty()) {
    return output_format::table;
  }
  if (text == "wide") {
    return output_format::wide;
  }
  if (text == "json") {
    return output_format::json;
  }
  if (text == "yaml") {
    return output_format::yaml;
  }
  return std::nullopt;
}

// The checks CLI11 cannot make; an error message, or nothing.
std::optional<std::string> check(invocation& inv, const raw_flags& raw) {
  const auto out = parse_output(raw.output);
  if (!out) {
    return "unable to match a printer suitable for the output format " + quote_text(raw.output) +
           ", allowed formats are: json,table,wide,yaml";
  }
  inv.output = *out;
  const auto timeout = parse_request_timeout(raw.timeout);
  if (!timeout) {
    // kubectl's words (clientcmd.ParseTimeout), and our bound.
    return "invalid --request-timeout " + quote_text(raw.timeout) +
           ": it must be a single integer in seconds, or an integer followed by a corresponding "
           "time unit (e.g. 1s | 2m | 3h), at most 24h; 0 means no timeout";
  }
  inv.cluster.request_timeout = *timeout;
  if (!valid_subdomain(inv.cluster.controller_namespace) ||
      !valid_subdomain(inv.cluster.policy_configmap) || !valid_subdomain(inv.cluster.lease)) {
    return "--controller-namespace, --policy-configmap and --lease must be object names";
  }
  if (!inv.cluster.controller_url.empty() && !inv.cluster.controller_url.starts_with("https://") &&
      !inv.cluster.controller_url.starts_with("http://")) {
    return "--controller-url must be an http:// or https:// URL, got " +
           quote_text(inv.cluster.controller_url);
  }
  if (!inv.namespace_.empty() && !valid_subdomain(inv.namespace_)) {
    return "invalid namespace " + quote_text(inv.namespace_);
  }
  switch (inv.what) {
    case verb::preview: {
      if (raw.taint.empty()) {
        return "preview needs --taint KEY[=VALUE]:NoExecute";
      }
      auto t = parse_taint(raw.taint);
      if (!t) {
        return t.error().message;
      }
      inv.taint = std::move(t).value();
      if (inv.nodes.empty() == inv.node_selector.empty()) {
        return "preview needs either NODE names or -l/--selector, not both and not neither";
      }
      for (const auto& n : inv.nodes) {
        if (!valid_subdomain(n)) {
          return "invalid node name " + quote_text(n);
        }
      }
      std::vector<std::string> unique;
      for (auto& n : inv.nodes) {
        if (std::find(unique.begin(), unique.end(), n) == unique.end()) {
          unique.push_back(std::move(n));
        }
      }
      inv.nodes = std::move(unique);
      break;
    }
    case verb::pending:
      if (inv.all_namespaces && !inv.namespace_.empty()) {
        return "-A and -n cannot be used together";
      }
      if (!inv.node.empty() && !valid_subdomain(inv.node)) {
        return "invalid node name " + quote_text(inv.node);
      }
      if (inv.output == output_format::wide) {
        inv.output = output_format::table;  // the table has every column already
      }
      break;
    case verb::shadow:
      if (inv.output == output_format::wide) {
        inv.output = output_format::table;
      }
      break;
    case verb::explain:
      if (!valid_subdomain(inv.pod)) {
        return "invalid pod name " + quote_text(inv.pod);
      }
      if (inv.output == output_format::wide) {
        inv.output = output_format::table;
      }
      break;
  }
  return std::nullopt;
}

// The first argument that is neither a flag nor a global flag's value: what was meant as the verb.
std::optional<std::string> verb_argument(const std::vector<std::string>& args) {
  static constexpr std::array<std::string_view, 9> with_value{
      "--kubeconfig",           "--context",          "-o",      "--output",
      "--controller-namespace", "--policy-configmap", "--lease", "--controller-url",
      "--request-timeout"};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (std::find(with_value.begin(), with_value.end(), a) != with_value.end()) {
      ++i;
    } else if (!a.starts_with("-")) {
      return a;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_request_timeout(std::string_view text) {
  constexpr std::chrono::milliseconds most{std::chrono::hours{24}};
  std::optional<std::chrono::milliseconds> d;
  if (!text.empty() && text.size() <= 9 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    d = std::chrono::seconds{std::stoll(std::string(text))};
  } else {
    d = base::parse_go_duration(text);
  }
  if (!d || d->count() < 0 || *d > most) {
    return std::nullopt;
  }
  return d;
}

base::result<controller::taint> parse_taint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return usage_error("invalid taint spec " + quote_text(text) +
                       ": expected KEY[=VALUE]:NoExecute (the effect is missing)");
  }
  const std::string_view effect = text.substr(colon + 1);
  const std::string_view kv = text.substr(0, colon);
  if (effect != "NoExecute") {
    return usage_error("invalid taint spec " + quote_text(text) +
                       ": only a NoExecute taint evicts pods; the effect must be NoExecute");
  }
  const auto eq = kv.find('=');
  const std::string_view key = kv.substr(0, eq);
  const std::string_view value = eq == std::string_view::npos ? "" : kv.substr(eq + 1);
  if (!valid_key(key)) {
    return usage_error("invalid taint spec " + quote_text(text) + ": invalid key " +
                       quote_text(key) + " (a qualified name: [prefix/]name)");
  }
  if (!value.empty() && !valid_name_part(value)) {
    return usage_error("invalid taint spec " + quote_text(text) + ": invalid value " +
                       quote_text(value) + " (at most 63 characters of [A-Za-z0-9-_.])");
  }
  controller::taint t;
  t.key = std::string(key);
  t.value = std::string(value);
  t.effect = controller::taint_effect::no_execute;
  return t;
}

parse_outcome parse_arguments(const std::vector<std::string>& args) {
  invocation inv;
  raw_flags raw;
  CLI::App app{
      "kubectl taint-eviction: what a NoExecute taint would do, which evictions are "
      "pending, and why a pod was evicted (taint-eviction-controller)",
      "kubectl taint-eviction"};
  app.require_subcommand(1);
  app.fallthrough();
  add_global_flags(app, inv, raw);

  auto* preview = app.add_subcommand(
      "preview",
      "What adding a NoExecute taint to nodes would do to their pods: evicted now, at a time, "
      "or never, and why; the storm breaker and the rate limit. Read-only: writes nothing");
  preview->add_option("NODE", inv.nodes, "Nodes the taint would go on");
  preview->add_option("--taint", raw.taint, "The taint, KEY[=VALUE]:NoExecute");
  preview->add_option("-l,--selector", inv.node_selector,
                      "Label selector of the nodes (instead of NODE names)");
  preview->add_option("--policy", inv.policy_file,
                      "An EvictionPolicy file to try instead of the ConfigMap's");

  auto* pending =
      app.add_subcommand("pending",
                         "The acting replica's pending evictions (its /debug/evictions), else the "
                         "TaintEvictionScheduled Events");
  pending->add_option("-n,--namespace", inv.namespace_, "Only pods of this namespace");
  pending->add_flag("-A,--all-namespaces", inv.all_namespaces, "Pods of every namespace");
  pending->add_option("--node", inv.node, "Only pods on this node");

  auto* explain =
      app.add_subcommand("explain",
                         "What the controller decided for a pod and why: its history, its pending "
                         "eviction and a fresh decision");
  explain->add_option("POD", inv.pod, "The pod")->required();
  explain->add_option("-n,--namespace", inv.namespace_, "The pod's namespace");

  auto* shadow = app.add_subcommand(
      "shadow",
      "Shadow mode's verdict (the acting replica's /debug/shadow): where its decisions and the "
      "built-in taint manager's differed, pod by pod; with --history, every eviction of the "
      "built-in it saw");
  shadow->add_option("-n,--namespace", inv.namespace_,
                     "Only this namespace's pods (default: every namespace)");
  shadow->add_flag("--history", inv.history,
                   "The built-in taint manager's evictions it saw, agreed ones too, newest first, "
                   "each with when ours would have evicted and the verdict (instead of the "
                   "disagreements)");

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  std::ostringstream out;
  std::ostringstream err;
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e, out, err);
    parse_outcome o;
    o.out = out.str();
    return o;
  } catch (const CLI::CallForAllHelp& e) {
    app.exit(e, out, err);
    parse_outcome o;
    o.out = out.str();
    return o;
  } catch (const CLI::ParseError& e) {
    const auto meant = verb_argument(args);
    if (!preview->parsed() && !pending->parsed() && !explain->parsed() && !shadow->parsed() &&
        meant) {
      return usage("unknown command " + quote_text(*meant) +
                   " for \"kubectl taint-eviction\" (preview, pending, explain or shadow)");
    }
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    return usage(base::printable(what, 512) + " (see --help)");
  }
  inv.what = preview->parsed()   ? verb::preview
             : pending->parsed() ? verb::pending
             : shadow->parsed()  ? verb::shadow
                                 : verb::explain;
  if (auto problem = check(inv, raw)) {
    return usage(std::move(*problem));
  }
  parse_outcome o;
  o.inv = std::move(inv);
  return o;
}

}  // namespace tec::kubectl_plugin
