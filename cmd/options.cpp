#include "options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <boost/algorithm/string/trim.hpp>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "tec/base/error.hpp"
#include "tec/policy/policy_file.hpp"
#include "tec/serving/http_endpoints.hpp"
#include "tec/serving/sha256.hpp"

namespace tec::cmd {
namespace {

constexpr std::array<std::string_view, 8> log_levels{"trace",   "debug", "info",     "warn",
                                                     "warning", "error", "critical", "off"};

// Lowercase DNS-1123 subdomain characters: what a namespace or Lease name may contain.
bool valid_object_name(std::string_view s) {
  if (s.empty() || s.size() > 253) {
    return false;
  }
  if (!std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
      })) {
    return false;
  }
  return s.front() != '-' && s.back() != '-' && s.front() != '.' && s.back() != '.';
}

// A duration flag: parsed, and positive.
std::optional<std::string> parse_duration_flag(const std::string& flag, const std::string& text,
                                               std::chrono::milliseconds& out) {
  const auto d = parse_go_duration(text);
  if (!d) {
    return flag + ": invalid duration \"" + text +
           "\" (expected a Go duration such as 15s, 500ms or 1m)";
  }
  if (d->count() <= 0) {
    return flag + ": must be positive, got \"" + text + "\"";
  }
  out = *d;
  return std::nullopt;
}

// --check-policy FILE: the file read and validated as --policy reads it at start.
parse_result check_policy_file(const std::string& path, const read_policy_fn& read_policy) {
  parse_result result;
  result.exit_code = 1;
  const std::string prefix = "taint-eviction-controller: --check-policy: ";
  auto text = read_policy ? read_policy(path) : policy::read_policy_text(path);
  if (!text) {
    result.err = prefix + text.error().message + "\n";
    return result;
  }
  const auto parsed = policy::parse_policy(*text, path);
  if (!parsed) {
    for (const auto& e : parsed.errors) {  // each escaped and clipped, at most 21
      result.err += prefix + e + "\n";
    }
    return result;
  }
  result.exit_code = 0;
  result.out = base::printable(path, 256) +
               ": a valid EvictionPolicy: " + policy::describe(*parsed.policy) + "\n";
  return result;
}

}  // namespace

std::string_view level_for_verbosity(int verbosity) {
  if (verbosity >= 6) {
    return "trace";
  }
  return verbosity >= 4 ? "debug" : "info";
}

std::optional<std::string> real_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): before threads
  if (v == nullptr) {
    return std::nullopt;
  }
  return std::string(v);
}

std::optional<std::string> real_read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    return std::nullopt;
  }
  return content;
}

namespace {

// What the flags hold before validation turns it into `options`: the text of the durations,
// the names and the modes that have no field of their own.
struct flag_text {
  std::string lease_duration = "15s";
  std::string renew_deadline = "10s";
  std::string retry_period = "2s";
  std::string lease_namespace;
  std::string format = "text";          // --log-format
  std::string logging_format = "text";  // --logging-format
  int verbosity = 0;                    // -v/--v
  // Whether each logging flag was given (on the command line or through its variable): the
  // names and their aliases must agree when both are.
  const CLI::Option* log_level_flag = nullptr;
  const CLI::Option* log_format_flag = nullptr;
  const CLI::Option* logging_format_flag = nullptr;
  const CLI::Option* verbosity_flag = nullptr;
  std::string content_type = "application/vnd.kubernetes.protobuf";
  std::string shadow_window = "30s";
  std::string check_policy;
  std::string policy_configmap;
  std::string webhook_cert_secret;
  std::string webhook_service = "taint-eviction-controller-metrics";
  std::string webhook_cert_check_interval = "1h";
  bool show_version = false;
};

// The add_*_flags functions are called in the order --help lists the flags; each adds a run of
// flags that are next to each other there.

// Where the API server is and how hard to use it.
void add_connection_flags(CLI::App& app, options& o, flag_text& t) {
  app.add_option("--kubeconfig", o.kubeconfig,
                 "Path to a kubeconfig file; empty means the in-cluster configuration");
  app.add_option("--context", o.context, "The kubeconfig context to use (default: current)");
  app.add_option("--kube-api-qps", o.kube_api_qps,
                 "Client-side rate limit of API requests per second (0 disables it)");
  app.add_option("--kube-api-burst", o.kube_api_burst, "Burst of the client-side rate limit");
  app.add_option("--kube-api-content-type", t.content_type,
                 "How pods and nodes are listed and watched: application/vnd.kubernetes.protobuf "
                 "(smaller and faster for the API server to encode) or application/json")
      ->check(CLI::IsMember({"application/vnd.kubernetes.protobuf", "application/json"}));
  app.add_option("--kube-api-connections", o.kube_api_connections,
                 "Most HTTP/1.1 connections to the API server at once (two hold the watches)");
}

// How many workers decide, and when this replica may act (the Lease).
void add_controller_flags(CLI::App& app, options& o, flag_text& t) {
  app.add_option("--workers", o.workers, "Workers deciding evictions (sharded by node)");
  app.add_flag("--leader-elect", o.leader_elect,
               "Take a coordination.k8s.io Lease before acting (--leader-elect=false: act "
               "at once; run one replica only)");
  app.add_option("--leader-elect-lease-duration", t.lease_duration,
                 "How long a follower waits after the last renewal before taking over");
  app.add_option("--leader-elect-renew-deadline", t.renew_deadline,
                 "How long the leader retries renewing before it gives up and exits");
  app.add_option("--leader-elect-retry-period", t.retry_period,
                 "Wait between acquire and renew attempts");
  app.add_option("--leader-elect-resource-namespace", t.lease_namespace,
                 "Namespace of the Lease (default: POD_NAMESPACE, else the service-account "
                 "namespace, else kube-system)");
  app.add_option("--leader-elect-resource-name", o.lease_name, "Name of the Lease");
}

// The ops servers, then how pods are deleted.
void add_server_flags(CLI::App& app, options& o) {
  app.add_option("--metrics-bind-address", o.metrics_bind_address,
                 "Address of /metrics and /debug/* (\"0\" disables them)");
  app.add_flag("--metrics-secure", o.metrics_secure,
               "Serve /metrics and /debug/* over HTTPS to the requests whose bearer token the "
               "API server authenticates (TokenReview) and authorizes for get on the path "
               "(SubjectAccessReview); --metrics-secure=false: plain HTTP, no authentication");
  app.add_option("--tls-cert-file", o.tls_cert_file,
                 "PEM certificate (chain) of the secure metrics server, re-read when it changes; "
                 "empty: a self-signed certificate generated at start");
  app.add_option("--tls-private-key-file", o.tls_private_key_file,
                 "PEM private key matching --tls-cert-file");
  app.add_option("--health-probe-bind-address", o.health_probe_bind_address,
                 "Address of /healthz and /readyz (\"0\" disables them)");
  app.add_flag("--disruption-condition", o.disruption_condition,
               "Add the DisruptionTarget pod condition before each delete");
  app.add_flag("--fresh-node-check", o.fresh_node_check,
               "Before evicting, GET the node (one read per node per second) and write nothing "
               "when the taint is gone from it (a stale cache; retried shortly)");
}

// Kubernetes components' names (component-base: -v/--v, --logging-format) and the names this
// daemon had first, kept as aliases.
void add_logging_flags(CLI::App& app, options& o, flag_text& t) {
  t.verbosity_flag = app.add_option(
      "-v,--v", t.verbosity,
      "Log verbosity, as Kubernetes components take it: 0 to 3 info, 4 and 5 debug, 6 and more "
      "trace (each API request's stages)");
  t.logging_format_flag = app.add_option("--logging-format", t.logging_format,
                                         "text or json (one JSON object per line)");
  t.log_level_flag = app.add_option(
      "--log-level", o.log_level,
      "trace, debug, info, warn, error, critical or off (an alias of -v that also has the "
      "quieter levels; given with -v, both must say the same)");
  t.log_format_flag =
      app.add_option("--log-format", t.format, "An alias of --logging-format: text or json");
}

// What is evicted and when: the policy file, dry-run, shadow mode, deadlines and events.
void add_policy_flags(CLI::App& app, options& o, flag_text& t) {
  app.add_option("--policy", o.policy_file,
                 "EvictionPolicy file (YAML; rate limits, storm breaker, dry-run), re-read when "
                 "it changes; empty: none (upstream's behaviour)");
  app.add_option("--policy-configmap", t.policy_configmap,
                 "[NAMESPACE/]NAME of the ConfigMap --policy's file comes from (the namespace "
                 "defaults to the Lease's): each load or reload records a PolicyApplied or "
                 "PolicyRejected Event on it (kubectl describe configmap); empty: none");
  app.add_flag("--dry-run", o.dry_run,
               "Decide everything, write nothing: no pod is patched or deleted and no event is "
               "written; the log says \"would delete\"");
  app.add_flag("--shadow", o.shadow,
               "Dry-run, and compare our would-be evictions with what kube-controller-manager's "
               "taint manager does to the same pods (metrics, /debug/shadow on the metrics "
               "port)");
  app.add_option("--shadow-window", t.shadow_window,
                 "Shadow mode: how far apart two evictions of a pod may be and still agree, "
                 "and how long an unmatched one waits before it is reported (1s to 1h)");
  app.add_flag("--deadlines-from-taint-time", o.deadlines_from_taint_time,
               "When this process starts acting (start, leader failover), count the toleration "
               "of a pod already on a tainted node from the taint's timeAdded (or the pod's "
               "bind time, if later) instead of from now (--deadlines-from-taint-time=false: "
               "from now, as kube-controller-manager does)");
  app.add_flag("--scheduled-events", o.scheduled_events,
               "Record a Normal TaintEvictionScheduled event on a pod when its eviction is "
               "scheduled for a later time, naming the taint, the tolerationSeconds and the due "
               "time (--scheduled-events=false: none, as kube-controller-manager)");
  app.add_option("--history-size", o.history_size,
                 "Eviction outcomes kept for /debug/history (each also logged on the "
                 "\"history\" logger); 0: none (0 to 100000)");
}

// The admission webhook's certificates (README "Certificates").
void add_webhook_cert_flags(CLI::App& app, options& o, flag_text& t) {
  app.add_option("--webhook-cert-secret", t.webhook_cert_secret,
                 "[NAMESPACE/]NAME of the kubernetes.io/tls Secret (the namespace defaults to the "
                 "Lease's) that keeps the admission webhook's CA and serving certificate: filled "
                 "and renewed by the controller, served on the secure port, its CA kept in "
                 "--webhook-configuration's caBundle; empty: off (also with --tls-cert-file)");
  app.add_option("--webhook-configuration", o.webhook_configuration,
                 "The ValidatingWebhookConfiguration whose caBundle is kept equal to the Secret's "
                 "CA (a missing one is a warning)");
  app.add_option("--webhook-service", t.webhook_service,
                 "[NAMESPACE/]NAME of the webhook's Service (the namespace defaults to the "
                 "Secret's): the serving certificate names NAME.NAMESPACE.svc and "
                 "NAME.NAMESPACE.svc.cluster.local");
  app.add_option("--webhook-cert-check-interval", t.webhook_cert_check_interval,
                 "How often the Secret and the caBundle are checked, 10s to 24h (also at start, "
                 "and after a failed check again within a minute)");
}

// The modes that exit at once.
void add_mode_flags(CLI::App& app, flag_text& t) {
  app.add_option("--check-policy", t.check_policy,
                 "Validate this EvictionPolicy file as --policy would, print what it does (or "
                 "each problem on a line of its own) and exit: 0 valid, 1 not; other flags are "
                 "not checked");
  app.add_flag("--version", t.show_version, "Print the version and exit");
}

// Every setting flag from the environment too: --foo-bar from TEC_FOO_BAR (CLI11's envname, so
// --help shows it and the command line wins; an empty variable is unset). Not --help and the
// modes (--version, --check-policy): a stray variable must not turn the daemon into a tool
// that prints and exits. Called after every flag is declared, so a new flag gets it too.
void add_env_names(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const auto& names = opt->get_lnames();
    if (names.empty() || names.front() == "help" || names.front() == "version" ||
        names.front() == "check-policy") {
      continue;
    }
    std::string var = "TEC_";
    for (const char c : names.front()) {
      var.push_back(c == '-' ? '_'
                             : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    opt->envname(var);
  }
}

// "--flag" -> "TEC_FLAG" for the flags whose value came from the environment (set there and
// not on the command line), so that an error about the flag names the variable too.
std::vector<std::pair<std::string, std::string>> flags_from_env(
    const CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_envname().empty() || opt->get_lnames().empty()) {
      continue;
    }
    const char* value = std::getenv(opt->get_envname().c_str());  // NOLINT(concurrency-mt-unsafe)
    if (value == nullptr || *value == '\0') {
      continue;
    }
    const std::string flag = "--" + opt->get_lnames().front();
    if (std::none_of(args.begin(), args.end(), [&](const std::string& a) {
          return a == flag || a.starts_with(flag + "=");
        })) {
      out.emplace_back(flag, opt->get_envname());
    }
  }
  return out;
}

// `message` with " (from TEC_FLAG)" after the first mention of each flag in `sources`.
std::string name_env_sources(std::string message,
                             const std::vector<std::pair<std::string, std::string>>& sources) {
  for (const auto& [flag, var] : sources) {
    for (std::size_t at = message.find(flag); at != std::string::npos;
         at = message.find(flag, at + 1)) {
      const std::size_t end = at + flag.size();
      const bool whole =
          end == message.size() ||
          !(std::isalnum(static_cast<unsigned char>(message[end])) != 0 || message[end] == '-');
      if (whole) {
        message.insert(end, " (from " + var + ")");
        break;
      }
    }
  }
  return message;
}

// The check_* functions append what is wrong, in the order the messages are printed.
using problem_list = std::vector<std::string>;

// The Lease's timing, with client-go's leaderelection.NewLeaderElector checks in its words.
void check_lease_timing(options& o, const flag_text& t, problem_list& problems) {
  const auto check = [&](std::optional<std::string> problem) {
    if (problem) {
      problems.push_back(std::move(*problem));
    }
  };
  check(parse_duration_flag("--leader-elect-lease-duration", t.lease_duration, o.lease_duration));
  check(parse_duration_flag("--leader-elect-renew-deadline", t.renew_deadline, o.renew_deadline));
  check(parse_duration_flag("--leader-elect-retry-period", t.retry_period, o.retry_period));
  if (problems.empty() && o.leader_elect) {
    if (o.lease_duration <= o.renew_deadline) {
      problems.emplace_back(
          "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline");
    }
    if (static_cast<double>(o.renew_deadline.count()) <=
        1.2 * static_cast<double>(o.retry_period.count())) {
      problems.emplace_back(
          "--leader-elect-renew-deadline must be greater than 1.2 x "
          "--leader-elect-retry-period");
    }
  }
}

void check_shadow_window(options& o, const flag_text& t, problem_list& problems) {
  if (auto w = parse_go_duration(t.shadow_window); !w) {
    problems.push_back("--shadow-window: invalid duration \"" + t.shadow_window +
                       "\" (expected a Go duration such as 30s or 2m)");
  } else if (*w < std::chrono::seconds(1) || *w > std::chrono::hours(1)) {
    problems.push_back("--shadow-window: must be between 1s and 1h, got \"" + t.shadow_window +
                       "\"");
  } else {
    o.shadow_window = *w;
  }
}

// The client's settings and the workers.
void check_connection(const options& o, problem_list& problems) {
  if (!o.context.empty() && o.kubeconfig.empty()) {
    problems.emplace_back(
        "--context needs --kubeconfig (the in-cluster configuration has no "
        "contexts)");
  }
  // 0 turns the limit off; below 1 request a second the Lease renewal alone (one every 2 s)
  // and the LISTs starve, so a tiny value (0.0000001 was accepted) is a typo, not a setting.
  if (!std::isfinite(o.kube_api_qps) || o.kube_api_qps < 0 ||
      (o.kube_api_qps > 0 && o.kube_api_qps < 1) || o.kube_api_qps > 100000) {
    problems.emplace_back("--kube-api-qps must be 0 (no limit) or between 1 and 100000");
  }
  if (o.kube_api_qps > 0 && (o.kube_api_burst < 1 || o.kube_api_burst > 100000)) {
    problems.emplace_back(
        "--kube-api-burst must be between 1 and 100000 when --kube-api-qps is set");
  }
  if (o.kube_api_connections < 3 || o.kube_api_connections > 1024) {
    problems.emplace_back("--kube-api-connections must be between 3 and 1024");
  }
  if (o.workers < 1 || o.workers > 1024) {
    problems.emplace_back("--workers must be between 1 and 1024");
  }
  if (o.history_size < 0 || o.history_size > 100'000) {
    problems.emplace_back("--history-size must be between 0 and 100000");
  }
}

// The Lease's namespace (the flag, else POD_NAMESPACE, else the service-account namespace,
// else kube-system) and name.
void check_lease_object(options& o, const flag_text& t, const env_fn& env,
                        const read_file_fn& read_file, problem_list& problems) {
  o.lease_namespace = t.lease_namespace;
  if (o.lease_namespace.empty()) {
    if (auto ns = env("POD_NAMESPACE"); ns && !boost::trim_copy(*ns).empty()) {
      o.lease_namespace = boost::trim_copy(*ns);
    } else if (auto file = read_file(service_account_namespace_file);
               file && !boost::trim_copy(*file).empty()) {
      o.lease_namespace = boost::trim_copy(*file);
    } else {
      o.lease_namespace = "kube-system";
    }
  }
  if (!valid_object_name(o.lease_namespace)) {
    problems.push_back("--leader-elect-resource-namespace: \"" + o.lease_namespace +
                       "\" is not a valid namespace name");
  }
  if (!valid_object_name(o.lease_name)) {
    problems.push_back("--leader-elect-resource-name: \"" + o.lease_name +
                       "\" is not a valid object name");
  }
}

void check_servers(const options& o, problem_list& problems) {
  const std::array<std::pair<const char*, const std::string*>, 2> addresses{
      std::pair{"--metrics-bind-address", &o.metrics_bind_address},
      std::pair{"--health-probe-bind-address", &o.health_probe_bind_address}};
  for (const auto& [flag, address] : addresses) {
    if (auto parsed = serving::parse_bind_address(*address); !parsed) {
      problems.push_back(std::string(flag) + ": \"" + *address +
                         "\" is not a valid address (expected :PORT, IP:PORT, [IPv6]:PORT or "
                         "0): " +
                         parsed.error().message);
    }
  }
  if (o.tls_cert_file.empty() != o.tls_private_key_file.empty()) {
    problems.push_back(
        "--tls-cert-file and --tls-private-key-file go together: give both or "
        "neither");
  }
  if (!o.tls_cert_file.empty() && !o.metrics_secure) {
    problems.push_back(
        "--tls-cert-file: the metrics server is plain HTTP (--metrics-secure=false)");
  }
  if (o.metrics_secure && o.metrics_bind_address != "0" &&
      o.metrics_bind_address == o.health_probe_bind_address &&
      !o.metrics_bind_address.ends_with(":0")) {
    problems.push_back("--metrics-bind-address: \"" + o.metrics_bind_address +
                       "\" is also --health-probe-bind-address; the probes are plain HTTP, the "
                       "secure metrics server needs a port of its own (or --metrics-secure=false)");
  }
}

bool given(const CLI::Option* flag) {
  return flag != nullptr && flag->count() > 0;
}

// The log level (--log-level, or -v/--v) and format (--logging-format, or --log-format), and the
// content type, which CLI11 already checked.
void check_logging(options& o, const flag_text& t, problem_list& problems) {
  o.protobuf = t.content_type == "application/vnd.kubernetes.protobuf";
  const bool level_valid =
      std::find(log_levels.begin(), log_levels.end(), o.log_level) != log_levels.end();
  if (!level_valid) {
    problems.push_back("--log-level: \"" + base::printable(o.log_level, 64) +
                       "\" is not one of trace, debug, info, warn, error, critical, off");
  }
  if (given(t.verbosity_flag)) {
    if (t.verbosity < 0) {
      problems.push_back("-v/--v: must be 0 or more, got " + std::to_string(t.verbosity));
    } else {
      const std::string from_v(level_for_verbosity(t.verbosity));
      const std::string level = o.log_level == "warning" ? "warn" : o.log_level;
      if (given(t.log_level_flag) && level_valid && level != from_v) {
        problems.push_back("-v/--v " + std::to_string(t.verbosity) + " means the " + from_v +
                           " level, --log-level says " + o.log_level +
                           ": give one of them (--log-level is an alias)");
      } else {
        o.log_level = from_v;
      }
    }
  }
  std::string format = t.format;
  const char* format_flag = "--log-format";
  if (given(t.logging_format_flag)) {
    if (given(t.log_format_flag) && t.format != t.logging_format) {
      problems.push_back("--logging-format \"" + base::printable(t.logging_format, 64) +
                         "\" and --log-format \"" + base::printable(t.format, 64) +
                         "\" disagree: give one of them (--log-format is an alias)");
      return;
    }
    format = t.logging_format;
    format_flag = "--logging-format";
  }
  if (format == "text") {
    o.format = log_format::text;
  } else if (format == "json") {
    o.format = log_format::json;
  } else {
    problems.push_back(std::string(format_flag) + ": \"" + base::printable(format, 64) +
                       "\" is not one of text, json");
  }
}

// A [NAMESPACE/]NAME flag's text into `ns` (`default_ns` without one) and `name`; false (a
// problem added) when either is not a valid name.
bool split_object_ref(const char* flag, const std::string& text, const std::string& default_ns,
                      std::string& ns, std::string& name, problem_list& problems) {
  const auto slash = text.find('/');
  ns = slash == std::string::npos ? default_ns : text.substr(0, slash);
  name = slash == std::string::npos ? text : text.substr(slash + 1);
  if (!valid_object_name(ns) || !valid_object_name(name)) {
    problems.push_back(std::string(flag) + ": \"" + base::printable(text, 256) +
                       "\" is not [NAMESPACE/]NAME");
    return false;
  }
  return true;
}

void check_policy_flag(options& o, const flag_text& t, const read_policy_fn& read_policy,
                       problem_list& problems) {
  if (!t.policy_configmap.empty() &&
      split_object_ref("--policy-configmap", t.policy_configmap, o.lease_namespace,
                       o.policy_configmap_namespace, o.policy_configmap_name, problems) &&
      o.policy_file.empty()) {
    problems.emplace_back("--policy-configmap needs --policy (the file the ConfigMap holds)");
  }
  if (o.policy_file.empty()) {
    return;
  }
  auto text = read_policy ? read_policy(o.policy_file) : policy::read_policy_text(o.policy_file);
  if (!text) {
    problems.push_back("--policy: " + text.error().message);
  } else if (auto parsed = policy::parse_policy(*text, o.policy_file); !parsed) {
    problems.push_back("--policy: " + parsed.summary());
  } else {
    o.policy = *parsed.policy;
    o.policy_sha256 = serving::sha256_hex(*text);
  }
}

// The webhook certificate flags: the Secret, the Service (in the Secret's namespace unless
// named), the configuration's name and the interval.
void check_webhook_certs(options& o, const flag_text& t, problem_list& problems) {
  if (!t.webhook_cert_secret.empty()) {
    split_object_ref("--webhook-cert-secret", t.webhook_cert_secret, o.lease_namespace,
                     o.webhook_cert_secret_namespace, o.webhook_cert_secret_name, problems);
  }
  split_object_ref(
      "--webhook-service", t.webhook_service,
      o.webhook_cert_secret_namespace.empty() ? o.lease_namespace : o.webhook_cert_secret_namespace,
      o.webhook_service_namespace, o.webhook_service_name, problems);
  if (!valid_object_name(o.webhook_configuration)) {
    problems.push_back("--webhook-configuration: \"" +
                       base::printable(o.webhook_configuration, 256) +
                       "\" is not a valid object name");
  }
  if (auto d = parse_go_duration(t.webhook_cert_check_interval);
      !d || *d < std::chrono::seconds(10) || *d > std::chrono::hours(24)) {
    problems.push_back("--webhook-cert-check-interval: \"" +
                       base::printable(t.webhook_cert_check_interval, 64) +
                       "\" is not a Go duration between 10s and 24h");
  } else {
    o.webhook_cert_check_interval = *d;
  }
}

}  // namespace

parse_result parse_options(const std::vector<std::string>& args, std::string_view version,
                           const env_fn& env, const read_file_fn& read_file,
                           const read_policy_fn& read_policy) {
  parse_result result;
  options o;
  flag_text t;
  CLI::App app{
      "taint-eviction-controller: the Kubernetes NoExecute taint manager as a standalone "
      "daemon.\nDeletes pods that do not tolerate a NoExecute taint of their node (at once, or "
      "after the\nsmallest tolerationSeconds), with kube-controller-manager's flag names.",
      "taint-eviction-controller"};
  app.option_defaults()->always_capture_default();
  add_connection_flags(app, o, t);
  add_controller_flags(app, o, t);
  add_server_flags(app, o);
  add_logging_flags(app, o, t);
  add_policy_flags(app, o, t);
  add_webhook_cert_flags(app, o, t);
  add_mode_flags(app, t);
  add_env_names(app);

  std::vector<const char*> argv;
  argv.reserve(args.size() + 1);
  argv.push_back("taint-eviction-controller");
  // "-v=4", as pflag (every Kubernetes component) takes a short flag with '=', is "--v=4" to
  // CLI11, which would read "=4" as the value.
  std::vector<std::string> spelled;
  spelled.reserve(args.size());
  for (const auto& a : args) {
    spelled.push_back(a.starts_with("-v=") ? "-" + a : a);
  }
  for (const auto& a : spelled) {
    argv.push_back(a.c_str());
  }
  std::ostringstream out;
  std::ostringstream err;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e, out, err);
    result.out = out.str();
    result.err = err.str();
    if (rc != 0) {  // CLI11's message, escaped and clipped (it quotes the value, maybe hostile)
      result.err = base::printable(name_env_sources(e.what(), flags_from_env(app, spelled)), 512) +
                   "\nRun with --help for more information.\n";
    }
    result.exit_code = rc == 0 ? 0 : 2;
    return result;
  }
  if (t.show_version) {
    result.out = "taint-eviction-controller " + std::string(version) + "\n";
    return result;
  }
  if (!t.check_policy.empty()) {
    return check_policy_file(t.check_policy, read_policy);
  }

  problem_list problems;
  check_lease_timing(o, t, problems);
  check_shadow_window(o, t, problems);
  check_connection(o, problems);
  check_lease_object(o, t, env, read_file, problems);
  check_servers(o, problems);
  check_logging(o, t, problems);
  check_policy_flag(o, t, read_policy, problems);
  check_webhook_certs(o, t, problems);
  if (!problems.empty()) {
    const auto sources = flags_from_env(app, spelled);
    for (const auto& p : problems) {
      result.err += "taint-eviction-controller: " + name_env_sources(p, sources) + "\n";
    }
    result.err += "Run with --help for the flags.\n";
    result.exit_code = 2;
    return result;
  }
  result.opts = std::move(o);
  return result;
}

}  // namespace tec::cmd
