#include "tec/k8sclient/config.hpp"

#include <openssl/evp.h>
#include <spdlog/logger.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>
#include <boost/algorithm/string/trim.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "read_retrying.hpp"
#include "tec/base/error.hpp"
#include "tec/base/logger.hpp"
#include "tec/k8sclient/exec_authenticator.hpp"

namespace tec::k8sclient {

using base::error;
namespace {

constexpr std::size_t max_config_file_bytes = std::size_t{16} << 20;  // 16 MiB
constexpr std::size_t max_token_file_bytes = std::size_t{1} << 20;    // 1 MiB

std::string in_quotes(std::string_view s) {
  return '"' + std::string(s) + '"';
}

/// Reads a whole (small) file. The message names the file and the OS reason, never content.
/// The path is opened once without blocking and checked through the descriptor: a FIFO (whose
/// open() waits for a writer, forever if none comes) or a device is refused, not waited on
/// (issue 29).
base::result<std::string> read_file(const std::string& path, std::size_t limit) {
  const auto fail = [&](const std::string& why) {
    return base::make_error(base::errc::config_invalid,
                            "cannot read " + base::printable(path, 256) + ": " + why);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return fail(std::generic_category().message(errno));
  }
  struct closer {
    void operator()(const int* fd) const noexcept { ::close(*fd); }
  };
  const std::unique_ptr<const int, closer> closing(&fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return fail(std::generic_category().message(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail("not a regular file");
  }
  std::string data;
  std::array<char, 8192> buffer{};
  for (;;) {
    const ssize_t n = detail::read_retrying(fd, buffer);
    if (n < 0) {
      return fail(std::generic_category().message(errno));
    }
    if (n == 0) {
      break;
    }
    data.append(buffer.data(), static_cast<std::size_t>(n));
    if (data.size() > limit) {
      return fail("larger than " + std::to_string(limit) + " bytes");
    }
  }
  return data;
}

/// What is wrong with a bearer token, if anything. The token goes into an HTTP header as it
/// is: a CR or LF would end the header there (and could smuggle in another one), and no other
/// control character belongs in one either. Never names the token's characters.
std::optional<std::string> token_problem(std::string_view token) {
  for (const char ch : token) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\r' || c == '\n') {
      return "the token contains a line break (CR or LF); a bearer token is a single line";
    }
    if (c < 0x20 || c == 0x7f) {
      return "the token contains a control character; a bearer token is printable text";
    }
  }
  return std::nullopt;
}

/// Reads a token file: trimmed (a trailing newline is usual), must not be empty, must not
/// contain a line break or any other control character.
base::result<std::string> read_token_file(const std::string& path) {
  auto data = read_file(path, max_token_file_bytes);
  if (!data) {
    return data.error();
  }
  std::string token = boost::algorithm::trim_copy(data.value());
  if (token.empty()) {
    return base::make_error(base::errc::config_invalid, "token file " + path + " is empty");
  }
  if (auto problem = token_problem(token)) {
    return base::make_error(base::errc::config_invalid, "token file " + path + ": " + *problem);
  }
  return token;
}

/// Standard base64 with padding (Go's []byte in JSON).
std::string encode_base64(std::string_view in) {
  std::string out((in.size() + 2) / 3 * 4 + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

bool looks_like_pem_certificate(std::string_view pem) {
  return pem.find("-----BEGIN CERTIFICATE-----") != std::string_view::npos;
}

bool looks_like_pem_key(std::string_view pem) {
  return pem.find("-----BEGIN ") != std::string_view::npos &&
         pem.find("PRIVATE KEY-----") != std::string_view::npos;
}

/// One to five digits (no sign, no space) making 1 to 65535.
bool valid_port(std::string_view s) {
  unsigned value = 0;
  const auto* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, value);
  return s.size() <= 5 && ec == std::errc{} && ptr == end && value >= 1 && value <= 65535;
}

/// Reading one kubeconfig: the file name goes into every message.
class kubeconfig_reader {
public:
  explicit kubeconfig_reader(std::string path) : path_(std::move(path)) {
    dir_ = std::filesystem::path(path_).parent_path();
  }

  /// The context `wanted_context` (empty: the current-context) as a rest_config; the reads
  /// below in the order their errors take precedence.
  base::result<rest_config> load(const std::string& wanted_context) {
    YAML::Node root;
    if (auto bad = parse_document(root)) {
      return std::move(*bad);
    }
    auto refs = read_context(root, wanted_context);
    if (!refs) {
      return refs.error();
    }
    rest_config config;
    config.namespace_ = refs->namespace_;
    config.source = "kubeconfig " + path_ + " context " + in_quotes(refs->context);

    auto cluster = find_named(root, "clusters", "cluster", refs->cluster);
    if (!cluster) {
      return cluster.error();
    }
    if (!cluster.value()) {
      return fail("cluster " + in_quotes(refs->cluster) + " not found (context " +
                  in_quotes(refs->context) + ")");
    }
    const auto& [cluster_node, cluster_where] = *cluster.value();
    if (auto bad = read_cluster_tls(cluster_node, cluster_where, config)) {
      return std::move(*bad);
    }
    if (auto bad = read_user(root, refs.value(), config)) {
      return std::move(*bad);
    }
    // The server URL last: whether a scheme-less URL means https depends on the TLS settings.
    if (auto bad = read_server(cluster_node, cluster_where, config)) {
      return std::move(*bad);
    }
    if (exec_) {
      if (auto bad = read_exec_cluster_info(cluster_node, cluster_where, config)) {
        return std::move(*bad);
      }
      config.exec = std::make_shared<exec_authenticator>(std::move(*exec_));
    }
    return config;
  }

private:
  using named_entry = std::pair<YAML::Node, std::string>;

  /// What the chosen context names.
  struct context_refs {
    std::string context;
    std::string cluster;  ///< Never empty.
    std::string user;     ///< Empty: no credentials.
    std::string namespace_;
  };

  /// The file read and parsed into `root`: a map at the top level. (Not a result<YAML::Node>:
  /// Node's converting constructor takes any type, so such a result cannot be built from an
  /// error.)
  std::optional<error> parse_document(YAML::Node& root) const {
    auto text = read_file(path_, max_config_file_bytes);
    if (!text) {
      return base::make_error(base::errc::config_invalid, "kubeconfig " + text.error().message);
    }
    try {
      root = YAML::Load(text.value());
    } catch (const YAML::Exception& e) {
      // yaml-cpp messages carry a position and a generic reason, never the document's text.
      return fail("not valid YAML or JSON: " + e.msg + " at line " +
                  std::to_string(e.mark.line + 1) + ", column " +
                  std::to_string(e.mark.column + 1));
    }
    if (!root || root.IsNull()) {
      return fail("empty file");
    }
    if (!root.IsMap()) {
      return fail("the top level must be a map");
    }
    return std::nullopt;
  }

  /// The context chosen (or current) and the names it refers to.
  [[nodiscard]] base::result<context_refs> read_context(const YAML::Node& root,
                                                        const std::string& wanted_context) const {
    auto current = string_field(root, "current-context", "");
    if (!current) {
      return fail("current-context: must be a string");
    }
    context_refs refs;
    refs.context = wanted_context.empty() ? current.value() : wanted_context;
    if (refs.context.empty()) {
      return fail("no current-context is set and no context was chosen");
    }

    auto context = find_named(root, "contexts", "context", refs.context);
    if (!context) {
      return context.error();
    }
    if (!context.value()) {
      return fail("context " + in_quotes(refs.context) + " not found");
    }
    const auto& [context_node, context_where] = *context.value();
    auto cluster_name = string_field(context_node, "cluster", context_where);
    auto user_name = string_field(context_node, "user", context_where);
    auto ns = string_field(context_node, "namespace", context_where);
    for (const auto* r : {&cluster_name, &user_name, &ns}) {
      if (!*r) {
        return r->error();
      }
    }
    if (cluster_name.value().empty()) {
      return fail(context_where + ".cluster: missing (context " + in_quotes(refs.context) + ")");
    }
    refs.cluster = std::move(cluster_name).value();
    refs.user = std::move(user_name).value();
    refs.namespace_ = std::move(ns).value();
    return refs;
  }

  /// The cluster's TLS settings into `config`: proxy-url refused, insecure-skip-tls-verify,
  /// tls-server-name, the certificate authority (data wins over the file).
  std::optional<error> read_cluster_tls(const YAML::Node& cluster_node,
                                        const std::string& cluster_where,
                                        rest_config& config) const {
    if (const YAML::Node proxy = cluster_node["proxy-url"]; proxy && !proxy.IsNull()) {
      return fail(cluster_where + ".proxy-url: proxies are not supported");
    }
    if (auto bad = bool_field(cluster_node, "insecure-skip-tls-verify", cluster_where,
                              config.insecure_skip_tls_verify)) {
      return bad;
    }
    auto server_name = string_field(cluster_node, "tls-server-name", cluster_where);
    if (!server_name) {
      return server_name.error();
    }
    config.tls_server_name = server_name.value();

    auto ca = pem_field(cluster_node, cluster_where, "certificate-authority",
                        looks_like_pem_certificate, "not a PEM certificate");
    if (!ca) {
      return ca.error();
    }
    config.ca_pem = std::move(ca).value();
    if (config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
      return fail(
          cluster_where +
          ": a certificate authority together with insecure-skip-tls-verify is not allowed");
    }
    return std::nullopt;
  }

  /// The context's user, if any, into `config`: unsupported schemes refused, client
  /// certificate and key, token and tokenFile.
  std::optional<error> read_user(const YAML::Node& root, const context_refs& refs,
                                 rest_config& config) {
    if (refs.user.empty()) {
      return std::nullopt;  // no credentials, as in client-go
    }
    auto user = find_named(root, "users", "user", refs.user);
    if (!user) {
      return user.error();
    }
    if (!user.value()) {
      return fail("user " + in_quotes(refs.user) + " not found (context " +
                  in_quotes(refs.context) + ")");
    }
    const auto& [user_node, user_where] = *user.value();
    static constexpr std::array<std::pair<const char*, const char*>, 7> unsupported{{
        {"auth-provider",
         "auth-provider plugins are not supported (client-go removed them in 1.26; use the "
         "exec plugin that replaces yours)"},
        {"username", "basic authentication is not supported"},
        {"password", "basic authentication is not supported"},
        {"as", "impersonation is not supported"},
        {"as-uid", "impersonation is not supported"},
        {"as-groups", "impersonation is not supported"},
        {"as-user-extra", "impersonation is not supported"},
    }};
    for (const auto& [key, why] : unsupported) {
      if (const YAML::Node n = user_node[key]; n && !n.IsNull()) {
        return fail(user_where + "." + key + ": " + why);
      }
    }
    if (auto bad = read_client_certificate(user_node, user_where, config)) {
      return bad;
    }
    if (auto bad = read_token(user_node, user_where, config)) {
      return bad;
    }
    const YAML::Node exec = user_node["exec"];
    if (!exec || exec.IsNull()) {
      return std::nullopt;
    }
    const std::string exec_where = user_where + ".exec";
    if (!config.bearer_token.empty() || !config.token_file.empty() ||
        !config.client_cert_pem.empty()) {
      return fail(exec_where +
                  ": cannot be combined with token, tokenFile or a client certificate in the "
                  "same user (which one should be sent?)");
    }
    return read_exec(exec, exec_where);
  }

  /// users[].user.exec, checked as client-go checks it, into exec_ (the authenticator is made
  /// once the cluster is known: provideClusterInfo hands the plugin the cluster).
  std::optional<error> read_exec(const YAML::Node& node, const std::string& where) {
    if (!node.IsMap()) {
      return fail(where + ": must be a map");
    }
    exec_config exec;
    exec.source = "kubeconfig " + path_ + ": " + where;
    auto api_version = string_field(node, "apiVersion", where);
    auto command = string_field(node, "command", where);
    auto hint = string_field(node, "installHint", where);
    auto mode = string_field(node, "interactiveMode", where);
    for (const auto* r : {&api_version, &command, &hint, &mode}) {
      if (!*r) {
        return r->error();
      }
    }
    exec.api_version = api_version.value();
    if (exec.api_version != exec_api_v1 && exec.api_version != exec_api_v1beta1) {
      return fail(where + ".apiVersion: " +
                  (exec.api_version.empty()
                       ? std::string("missing")
                       : in_quotes(base::printable(exec.api_version, 128)) + " is not supported") +
                  " (want " + std::string(exec_api_v1) + " or " + std::string(exec_api_v1beta1) +
                  ")");
    }
    if (command.value().empty()) {
      return fail(where + ".command: missing");
    }
    // As client-go: a command with a path separator is relative to the kubeconfig's directory;
    // one without is looked up on PATH.
    exec.command =
        command.value().find('/') == std::string::npos ? command.value() : resolve(command.value());
    exec.install_hint = hint.value();
    if (mode.value().empty()) {
      if (exec.api_version == exec_api_v1) {
        return fail(where + ".interactiveMode: missing (required by " + std::string(exec_api_v1) +
                    "; Never or IfAvailable)");
      }
    } else if (mode.value() == "Never") {
      exec.interactive_mode = exec_interactive_mode::never;
    } else if (mode.value() == "IfAvailable") {
      exec.interactive_mode = exec_interactive_mode::if_available;
    } else if (mode.value() == "Always") {
      return fail(where +
                  ".interactiveMode: Always needs a terminal for the plugin, and this program "
                  "never gives it one (it runs unattended); use IfAvailable or Never, with "
                  "credentials the plugin can get without asking");
    } else {
      return fail(where + ".interactiveMode: " + in_quotes(base::printable(mode.value(), 64)) +
                  " is not one of Never, IfAvailable, Always");
    }
    if (auto bad = bool_field(node, "provideClusterInfo", where, exec.provide_cluster_info)) {
      return bad;
    }
    if (auto bad = read_exec_args(node, where, exec)) {
      return bad;
    }
    exec_ = std::move(exec);
    return std::nullopt;
  }

  /// exec.args (a list of strings) and exec.env (a list of name/value maps).
  std::optional<error> read_exec_args(const YAML::Node& node, const std::string& where,
                                      exec_config& exec) const {
    if (const YAML::Node args = node["args"]; args && !args.IsNull()) {
      if (!args.IsSequence()) {
        return fail(where + ".args: must be a list of strings");
      }
      for (std::size_t i = 0; i < args.size(); ++i) {
        if (!args[i].IsScalar()) {
          return fail(where + ".args[" + std::to_string(i) + "]: must be a string");
        }
        exec.args.push_back(args[i].Scalar());
      }
    }
    if (const YAML::Node env = node["env"]; env && !env.IsNull()) {
      if (!env.IsSequence()) {
        return fail(where + ".env: must be a list of name/value maps");
      }
      for (std::size_t i = 0; i < env.size(); ++i) {
        const std::string at = where + ".env[" + std::to_string(i) + "]";
        if (!env[i].IsMap()) {
          return fail(at + ": must be a map with name and value");
        }
        auto name = string_field(env[i], "name", at);
        auto value = string_field(env[i], "value", at);
        if (!name) {
          return name.error();
        }
        if (!value) {
          return value.error();
        }
        if (name.value().empty() || name.value().find('=') != std::string::npos ||
            name.value().find('\0') != std::string::npos) {
          return fail(at + ".name: must be a variable name (not empty, no '=')");
        }
        exec.env.emplace_back(std::move(name).value(), std::move(value).value());
      }
    }
    return std::nullopt;
  }

  /// KUBERNETES_EXEC_INFO's spec.cluster (client.authentication.k8s.io Cluster) from the
  /// cluster entry, when the exec block asks for it.
  std::optional<error> read_exec_cluster_info(const YAML::Node& cluster_node,
                                              const std::string& cluster_where,
                                              const rest_config& config) {
    if (!exec_->provide_cluster_info) {
      return std::nullopt;
    }
    nlohmann::json cluster = nlohmann::json::object();
    cluster["server"] = cluster_node["server"].Scalar();
    if (!config.tls_server_name.empty()) {
      cluster["tls-server-name"] = config.tls_server_name;
    }
    if (config.insecure_skip_tls_verify) {
      cluster["insecure-skip-tls-verify"] = true;
    }
    if (!config.ca_pem.empty()) {
      cluster["certificate-authority-data"] = encode_base64(config.ca_pem);
    }
    // The extension client-go hands over as spec.cluster.config.
    if (const YAML::Node extensions = cluster_node["extensions"];
        extensions && extensions.IsSequence()) {
      for (std::size_t i = 0; i < extensions.size(); ++i) {
        const YAML::Node entry = extensions[i];
        if (entry.IsMap() && entry["name"] && entry["name"].IsScalar() &&
            entry["name"].Scalar() == "client.authentication.k8s.io/exec") {
          std::size_t budget = 10'000;  // nodes: bound the work a hostile file can ask for
          nlohmann::json converted;
          if (!yaml_to_json(entry["extension"], 0, budget, converted)) {
            return fail(cluster_where + ".extensions[" + std::to_string(i) +
                        "].extension: more than 64 levels or 10000 values, or a key that is "
                        "not a string");
          }
          cluster["config"] = std::move(converted);
        }
      }
    }
    exec_->cluster_json = cluster.dump();
    return std::nullopt;
  }

  /// A YAML node as JSON into `out`: unquoted scalars that read as null, booleans or numbers
  /// become those; every other scalar a string. False when it is deeper than 64 levels, has
  /// more than `budget` nodes or a key that is not a scalar.
  static bool yaml_to_json(const YAML::Node& node, int depth, std::size_t& budget,
                           nlohmann::json& out) {
    if (depth > 64 || budget == 0) {
      return false;
    }
    --budget;
    if (!node || node.IsNull()) {
      out = nullptr;
      return true;
    }
    if (node.IsScalar()) {
      const std::string& text = node.Scalar();
      bool b = false;
      long long i = 0;
      double d = 0;
      if (node.Tag() == "!") {
        out = text;  // quoted: a string
      } else if (YAML::convert<bool>::decode(node, b)) {
        out = b;
      } else if (YAML::convert<long long>::decode(node, i)) {
        out = i;
      } else if (YAML::convert<double>::decode(node, d)) {
        out = d;
      } else {
        out = text;
      }
      return true;
    }
    if (node.IsSequence()) {
      out = nlohmann::json::array();
      for (const auto& item : node) {
        nlohmann::json converted;
        if (!yaml_to_json(item, depth + 1, budget, converted)) {
          return false;
        }
        out.push_back(std::move(converted));
      }
      return true;
    }
    out = nlohmann::json::object();
    for (const auto& kv : node) {
      nlohmann::json converted;
      if (!kv.first.IsScalar() || !yaml_to_json(kv.second, depth + 1, budget, converted)) {
        return false;
      }
      out[kv.first.Scalar()] = std::move(converted);
    }
    return true;
  }

  /// `key`-data (base64) or else (as client-go: data wins) the file `key`, checked with
  /// `looks_right`; empty when neither is set. `not_right` ends the message when the check fails.
  [[nodiscard]] base::result<std::string> pem_field(const YAML::Node& node,
                                                    const std::string& where,
                                                    const std::string& key,
                                                    bool (*looks_right)(std::string_view),
                                                    const char* not_right) const {
    const std::string data_key = key + "-data";
    auto pem = data_field(node, data_key.c_str(), where);
    if (!pem) {
      return pem.error();
    }
    if (pem.value().empty()) {
      pem = file_field(node, key.c_str(), where);
      if (!pem) {
        return pem.error();
      }
      if (!pem.value().empty() && !looks_right(pem.value())) {
        return fail(where + "." + key + ": " + not_right);
      }
    } else if (!looks_right(pem.value())) {
      return fail(where + "." + data_key + ": " + not_right);
    }
    return pem;
  }

  std::optional<error> read_client_certificate(const YAML::Node& user_node,
                                               const std::string& user_where,
                                               rest_config& config) const {
    auto cert = pem_field(user_node, user_where, "client-certificate", looks_like_pem_certificate,
                          "not a PEM certificate");
    if (!cert) {
      return cert.error();
    }
    auto key =
        pem_field(user_node, user_where, "client-key", looks_like_pem_key, "not a PEM private key");
    if (!key) {
      return key.error();
    }
    if (cert.value().empty() != key.value().empty()) {
      return fail(user_where + (cert.value().empty()
                                    ? ": a client key needs a client certificate"
                                    : ": a client certificate needs a client key"));
    }
    config.client_cert_pem = std::move(cert).value();
    config.client_key_pem = std::move(key).value();
    return std::nullopt;
  }

  std::optional<error> read_token(const YAML::Node& user_node, const std::string& user_where,
                                  rest_config& config) const {
    auto token = string_field(user_node, "token", user_where);
    if (!token) {
      return token.error();
    }
    if (auto problem = token_problem(token.value())) {
      return fail(user_where + ".token: " + *problem);
    }
    config.bearer_token = token.value();
    auto token_file = string_field(user_node, "tokenFile", user_where);
    if (!token_file) {
      return token_file.error();
    }
    if (!token_file.value().empty()) {
      config.token_file = resolve(token_file.value());
      auto check = read_token_file(config.token_file);
      if (!check) {
        return fail(user_where + ".tokenFile: " + check.error().message);
      }
    }
    return std::nullopt;
  }

  /// The cluster's server URL, last: a scheme-less URL means https when TLS is configured.
  std::optional<error> read_server(const YAML::Node& cluster_node, const std::string& cluster_where,
                                   rest_config& config) const {
    auto server = string_field(cluster_node, "server", cluster_where);
    if (!server) {
      return server.error();
    }
    if (server.value().empty()) {
      return fail(cluster_where + ".server: missing");
    }
    const bool default_tls = !config.ca_pem.empty() || !config.client_cert_pem.empty() ||
                             config.insecure_skip_tls_verify;
    auto url = parse_server_url(server.value(), default_tls);
    if (!url) {
      return fail(cluster_where + ".server: " + url.error().message);
    }
    config.tls = url->tls;
    config.host = std::move(url->host);
    config.port = std::move(url->port);
    config.base_path = std::move(url->base_path);
    return std::nullopt;
  }

  [[nodiscard]] error fail(const std::string& what) const {
    return base::make_error(base::errc::config_invalid, "kubeconfig " + path_ + ": " + what);
  }

  /// A string field: empty when absent or null; an error when not a scalar.
  base::result<std::string> string_field(const YAML::Node& parent, const char* key,
                                         const std::string& where) const {
    const YAML::Node node = parent[key];
    if (!node || node.IsNull()) {
      return std::string{};
    }
    if (!node.IsScalar()) {
      return fail(where + "." + key + ": must be a string");
    }
    return node.Scalar();
  }

  /// A boolean field: false when absent or null. Not a result<bool>: error converts explicitly
  /// to bool, so boost::system::result<bool, error> cannot be built from an error.
  std::optional<base::error> bool_field(const YAML::Node& parent, const char* key,
                                        const std::string& where, bool& value) const {
    value = false;
    const YAML::Node node = parent[key];
    if (!node || node.IsNull()) {
      return std::nullopt;
    }
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
      return fail(where + "." + key + ": must be true or false");
    }
    return std::nullopt;
  }

  /// A base64 `-data` field, decoded; empty when absent.
  base::result<std::string> data_field(const YAML::Node& parent, const char* key,
                                       const std::string& where) const {
    auto text = string_field(parent, key, where);
    if (!text) {
      return text.error();
    }
    if (text.value().empty()) {
      return std::string{};
    }
    auto decoded = decode_base64(text.value());
    if (!decoded) {
      return fail(where + "." + key + ": invalid base64");
    }
    return std::move(*decoded);
  }

  /// A file field, read relative to the kubeconfig's directory; empty when absent.
  base::result<std::string> file_field(const YAML::Node& parent, const char* key,
                                       const std::string& where) const {
    auto name = string_field(parent, key, where);
    if (!name) {
      return name.error();
    }
    if (name.value().empty()) {
      return std::string{};
    }
    auto content = read_file(resolve(name.value()), max_config_file_bytes);
    if (!content) {
      return fail(where + "." + key + ": " + content.error().message);
    }
    return std::move(content).value();
  }

  [[nodiscard]] std::string resolve(const std::string& name) const {
    const std::filesystem::path p(name);
    if (p.is_absolute() || dir_.empty()) {
      return name;
    }
    return (dir_ / p).string();
  }

  /// Finds the entry `name` in the named list `list_key` (clusters, users, contexts) and
  /// returns its `inner_key` map and its "list[i].inner" path for messages; nullopt when
  /// there is no such entry, an error when the list is malformed.
  base::result<std::optional<named_entry>> find_named(const YAML::Node& root, const char* list_key,
                                                      const char* inner_key,
                                                      const std::string& name) const {
    const YAML::Node list = root[list_key];
    if (list && !list.IsNull() && !list.IsSequence()) {
      return fail(std::string(list_key) + ": must be a list");
    }
    std::optional<named_entry> found;
    std::set<std::string> seen;
    if (list && list.IsSequence()) {
      for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string where = std::string(list_key) + "[" + std::to_string(i) + "]";
        const YAML::Node entry = list[i];
        if (!entry.IsMap()) {
          return fail(where + ": must be a map");
        }
        auto entry_name = string_field(entry, "name", where);
        if (!entry_name) {
          return entry_name.error();
        }
        if (!seen.insert(entry_name.value()).second) {
          return fail(where + ".name: duplicate name " + in_quotes(entry_name.value()));
        }
        if (entry_name.value() != name || found) {
          continue;
        }
        const YAML::Node inner = entry[inner_key];
        const std::string inner_where = where + "." + inner_key;
        if (inner && !inner.IsNull() && !inner.IsMap()) {
          return fail(inner_where + ": must be a map");
        }
        found.emplace(inner && inner.IsMap() ? inner : YAML::Node(YAML::NodeType::Map),
                      inner_where);
      }
    }
    return found;
  }

  std::string path_;
  std::filesystem::path dir_;
  std::optional<exec_config> exec_;  ///< The user's exec block, until the cluster is known.
};

}  // namespace

base::result<server_url> parse_server_url(std::string_view text, bool default_tls) {
  auto bad = [&](const std::string& why) {
    return base::make_error(base::errc::config_invalid,
                            in_quotes(base::printable(text, 256)) + ": " + why);
  };
  // Like client-go's DefaultServerURL: a value without a scheme gets one from the TLS settings.
  std::string with_scheme;
  if (text.find("://") == std::string_view::npos) {
    with_scheme = default_tls ? "https://" : "http://";
  }
  with_scheme += text;
  const auto parsed = boost::urls::parse_uri(with_scheme);
  if (!parsed) {
    if (text.find('@') != std::string_view::npos) {
      // Do not echo the URL: what precedes '@' may be user info with a password.
      return base::make_error(base::errc::config_invalid, "the server URL is not a valid URL");
    }
    return bad("not a valid URL (" + parsed.error().message() + ")");
  }
  const boost::urls::url_view& u = *parsed;
  if (u.has_userinfo()) {
    // Do not echo the URL: user info may hold a password.
    return base::make_error(base::errc::config_invalid,
                            "user info in the server URL is not supported");
  }
  server_url url;
  if (u.scheme_id() == boost::urls::scheme::https) {
    url.tls = true;
  } else if (u.scheme_id() == boost::urls::scheme::http) {
    url.tls = false;
  } else {
    std::string scheme(u.scheme());
    std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](char c) {
      return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    });
    return base::make_error(
        base::errc::config_invalid,
        "unsupported URL scheme " + in_quotes(scheme) + " (want https or http)");
  }
  if (u.has_query() || u.has_fragment()) {
    return bad("a query or fragment is not allowed");
  }
  switch (u.host_type()) {
    case boost::urls::host_type::ipv6:
      url.host = std::string(u.encoded_host_address());
      break;
    case boost::urls::host_type::ipvfuture:
      return bad("brackets around a host that is not an IPv6 address");
    case boost::urls::host_type::name:
      if (u.encoded_host().find('%') != boost::urls::string_view::npos) {
        // Go's url.Parse refuses most escapes in a host too; a resolver would not decode them.
        return bad("a percent-encoded host is not supported");
      }
      url.host = std::string(u.encoded_host());
      break;
    default:
      url.host = std::string(u.encoded_host());
      break;
  }
  if (url.host.empty()) {
    return bad("no host");
  }
  if (!u.encoded_path().empty() && u.encoded_path().front() != '/') {
    // RFC 3986 wants "/" here; Boost.URL 1.81 takes "https://h:12x" as port 12, path "x".
    return bad(
        "text after the host or port that is not a path (a port is digits; an IPv6 "
        "address must be in brackets)");
  }
  const std::string_view port = u.port();
  if (port.empty()) {
    url.port = url.tls ? "443" : "80";
  } else if (!valid_port(port)) {
    return bad("invalid port " + in_quotes(port));
  } else {
    url.port = std::string(port);
  }
  // Kept percent-encoded: it is prepended to request targets as it is.
  std::string_view path = u.encoded_path();
  while (!path.empty() && path.back() == '/') {
    path.remove_suffix(1);
  }
  url.base_path = std::string(path);
  return url;
}

std::optional<std::string> decode_base64(std::string_view text) {
  std::string clean;
  clean.reserve(text.size());
  std::copy_if(text.begin(), text.end(), std::back_inserter(clean),
               [](char c) { return c != '\r' && c != '\n'; });
  // EVP_DecodeBlock checks the alphabet but not where the padding is: at most two '=', last.
  constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const std::size_t data = clean.find_last_not_of('=') + 1;  // 0 when there is none
  const std::size_t pad = clean.size() - data;
  if (clean.size() % 4 != 0 || pad > 2 || clean.find_first_not_of(alphabet) < data ||
      clean.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return std::nullopt;
  }
  std::string out(clean.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(clean.data()),
                                static_cast<int>(clean.size()));
  if (n < 0) {
    return std::nullopt;
  }
  out.resize(static_cast<std::size_t>(n) - pad);  // n counts the padding's bytes too
  return out;
}

base::result<rest_config> load_kubeconfig(const std::string& path, const std::string& context) {
  if (path.empty()) {
    return base::make_error(base::errc::config_invalid, "kubeconfig: no path given");
  }
  return kubeconfig_reader(path).load(context);
}

std::optional<std::string> process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
  if (value == nullptr) {
    return std::nullopt;
  }
  return std::string(value);
}

base::result<rest_config> load_in_cluster(const std::string& root, const env_lookup& env) {
  const std::string where = "in-cluster config (" + root + ")";
  auto host = env("KUBERNETES_SERVICE_HOST");
  auto port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return base::make_error(base::errc::config_invalid,
                            where +
                                ": not running in a cluster: KUBERNETES_SERVICE_HOST and "
                                "KUBERNETES_SERVICE_PORT must both be set");
  }
  if (!valid_port(*port)) {
    return base::make_error(base::errc::config_invalid, where + ": KUBERNETES_SERVICE_PORT " +
                                                            in_quotes(*port) + " is not a port");
  }
  // client-go: "https://" + net.JoinHostPort(host, port); an address already in brackets is
  // taken as it is.
  std::string_view bare = *host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  const std::string authority = bare.find(':') != std::string_view::npos
                                    ? "[" + std::string(bare) + "]:" + *port
                                    : std::string(bare) + ":" + *port;
  auto url = parse_server_url("https://" + authority);
  if (!url || !url->base_path.empty()) {
    return base::make_error(base::errc::config_invalid, where + ": KUBERNETES_SERVICE_HOST " +
                                                            in_quotes(base::printable(*host, 256)) +
                                                            " is not a host name or IP address");
  }
  rest_config config;
  config.tls = true;
  config.host = std::move(url->host);
  config.port = std::move(url->port);
  const std::filesystem::path dir(root);
  config.token_file = (dir / "token").string();
  if (auto token = read_token_file(config.token_file); !token) {
    return base::make_error(base::errc::config_invalid, where + ": " + token.error().message);
  }
  auto ca = read_file((dir / "ca.crt").string(), max_config_file_bytes);
  if (!ca) {
    return base::make_error(base::errc::config_invalid, where + ": " + ca.error().message);
  }
  if (!looks_like_pem_certificate(ca.value())) {
    return base::make_error(base::errc::config_invalid,
                            where + ": " + (dir / "ca.crt").string() + " is not a PEM certificate");
  }
  config.ca_pem = std::move(ca).value();
  if (auto pod_ns = env("POD_NAMESPACE"); pod_ns && !pod_ns->empty()) {
    config.namespace_ = *pod_ns;
  } else if (auto ns = read_file((dir / "namespace").string(), 4096); ns) {
    config.namespace_ = boost::algorithm::trim_copy(ns.value());
  }
  if (config.namespace_.empty()) {
    config.namespace_ = "default";
  }
  config.source = where;
  return config;
}

token_source::token_source(std::string static_token, std::string token_file,
                           std::chrono::seconds period, base::clock& clock)
    : file_(std::move(token_file)),
      period_(period),
      clock_(clock),
      token_(std::move(static_token)) {
  if (auto problem = token_problem(token_)) {
    // Not from a loader (which rejects it with the field's name): never send it.
    token_.clear();
    static_error_ =
        base::make_error(base::errc::config_invalid, "the bearer token is unusable: " + *problem);
  }
  have_token_ = !token_.empty();
  if (have_token_) {
    fetched_ = clock_.now();
  }
}

base::result<std::string> token_source::current() {
  const std::lock_guard lock(mutex_);
  if (file_.empty()) {
    if (static_error_) {
      return static_error_;
    }
    return token_;
  }
  const auto now = clock_.now();
  if (have_token_ && !stale_ && now - fetched_ < period_) {
    return token_;
  }
  auto fresh = read_token_file(file_);
  if (!fresh) {
    // Once per failure streak: while it lasts the file is re-read on every request.
    if (!last_error_) {
      // The client's logger, looked up now: one registered later (by the daemon, a test) wins.
      base::named_logger("client")->warn("{}; {}", fresh.error().message,
                                         have_token_
                                             ? "keeping the cached token until it is readable again"
                                             : "requests fail until it is readable");
    }
    last_error_ = fresh.error();
    if (have_token_) {
      return token_;  // keep the old token until the file is readable again (as client-go)
    }
    return fresh.error();
  }
  if (last_error_) {
    base::named_logger("client")->info("token file {} is readable again", file_);
  }
  token_ = std::move(fresh).value();
  have_token_ = true;
  stale_ = false;
  fetched_ = now;
  last_error_ = {};
  return token_;
}

void token_source::invalidate() {
  const std::lock_guard lock(mutex_);
  stale_ = true;
}

error token_source::last_error() const {
  const std::lock_guard lock(mutex_);
  return last_error_;
}

}  // namespace tec::k8sclient
