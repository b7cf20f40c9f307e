// Exec credential plugins: the ExecCredential parser and one bounded run. See exec_plugin.hpp.

#include "tec/k8sclient/exec_plugin.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <thread>

#include "read_retrying.hpp"
#include "tec/base/duration.hpp"
#include "tec/base/error.hpp"
#include "tec/base/rfc3339.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace tec::k8sclient {
namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

constexpr std::size_t message_budget = 512;  // of one piece of text a plugin chose

base::error invalid(const std::string& message) {
  return base::make_error(base::errc::config_invalid, message);
}

/// `text` (a plugin's standard error, an install hint) as one short line: its lines joined
/// with " / ", surrounding space trimmed, escaped and clipped.
std::string one_line(std::string_view text) {
  std::string out;
  bool pending_break = false;
  for (const char c : text) {
    if (c == '\n' || c == '\r') {
      pending_break = !out.empty();
      continue;
    }
    if (pending_break) {
      if (c == ' ' || c == '\t') {
        continue;  // the next line's indentation
      }
      out += " / ";
      pending_break = false;
    }
    out.push_back(c);
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) {
    out.pop_back();
  }
  const auto first = out.find_first_not_of(" \t");
  return base::printable(
      first == std::string::npos ? std::string_view{} : std::string_view(out).substr(first),
      message_budget);
}

/// What is wrong with a token for an Authorization header, if anything (never its characters).
std::optional<std::string> token_problem(std::string_view token) {
  for (const char ch : token) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      return "status.token contains a line break or another control character";
    }
  }
  return std::nullopt;
}

/// A string member of `obj`: empty when absent or null; an error text when not a string.
std::optional<std::string> string_member(const json& obj, const char* key, std::string& out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    out.clear();
    return std::nullopt;
  }
  if (!it->is_string()) {
    return std::string(key) + " is not a string";
  }
  out = it->get<std::string>();
  return std::nullopt;
}

/// The descriptors and the child of one run; closes and reaps whatever is left.
class plugin_process {
public:
  plugin_process() = default;
  plugin_process(const plugin_process&) = delete;
  plugin_process& operator=(const plugin_process&) = delete;
  ~plugin_process() {
    close_fd(out_);
    close_fd(err_);
    if (pid_ > 0) {
      kill_group();
      reap(true);
    }
  }

  /// Starts the plugin; an errno value (0 on success). The child is the leader of a process
  /// group of its own, so that a kill reaches what it started too.
  int start(const exec_config& config) {
    std::array<int, 2> out{-1, -1};
    std::array<int, 2> err{-1, -1};
    if (::pipe2(out.data(), O_CLOEXEC) != 0) {
      return errno;
    }
    if (::pipe2(err.data(), O_CLOEXEC) != 0) {
      const int e = errno;
      close_fd(out[0]);
      close_fd(out[1]);
      return e;
    }
    out_ = out[0];
    err_ = err[0];

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    // Sockets of the API connections and the servers must not leak into the plugin.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (const int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
      sigaddset(&defaults, s);
    }
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr,
        static_cast<short>(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP));

    std::vector<std::string> args{config.command};
    args.insert(args.end(), config.args.begin(), config.args.end());
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    std::vector<std::string> env = environment(config);
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (auto& e : env) {
      envp.push_back(e.data());
    }
    envp.push_back(nullptr);

    const bool path = config.command.find('/') != std::string::npos;
    pid_t pid = -1;
    const int rc = path ? ::posix_spawn(&pid, config.command.c_str(), &actions, &attr, argv.data(),
                                        envp.data())
                        : ::posix_spawnp(&pid, config.command.c_str(), &actions, &attr, argv.data(),
                                         envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close_fd(out[1]);
    close_fd(err[1]);
    if (rc != 0) {
      return rc;
    }
    pid_ = pid;
    for (const int fd : {out_, err_}) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    return 0;
  }

  /// Reads what is there on both pipes, waiting at most `wait` for something. `out` takes up
  /// to `out_limit` bytes (`out_over` set beyond), `err` keeps `err_keep`.
  void pump(std::chrono::milliseconds wait, std::string& out, std::size_t out_limit, bool& out_over,
            std::string& err, std::size_t err_keep) {
    std::array<pollfd, 2> fds{pollfd{out_, POLLIN, 0}, pollfd{err_, POLLIN, 0}};
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (n <= 0) {
      return;
    }
    drain(out_, out, out_limit + 1, &out_over);
    drain(err_, err, err_keep, nullptr);
  }

  [[nodiscard]] bool pipes_open() const { return out_ >= 0 || err_ >= 0; }

  /// Reaps the child if it has exited (waits when `block`); true once it has been.
  bool reap(bool block) {
    if (pid_ <= 0) {
      return true;
    }
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
      if (r < 0 && errno == EINTR) {
        continue;
      }
      if (r == 0) {
        return false;
      }
      status_ = r == pid_ ? status : 0;
      pid_ = -1;
      return true;
    }
  }

  void kill_group() const {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
    }
  }

  /// Stops reading: what a grandchild still holding the pipes writes is not waited for.
  void close_pipes() {
    close_fd(out_);
    close_fd(err_);
  }

  [[nodiscard]] int status() const { return status_; }

private:
  static void close_fd(int& fd) {
    if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
  }

  /// Reads everything `fd` has now: appended to `into` up to `keep` bytes (the rest dropped,
  /// `*over` set when given); closes it at EOF.
  static void drain(int& fd, std::string& into, std::size_t keep, bool* over) {
    if (fd < 0) {
      return;
    }
    std::array<char, 8192> buffer{};
    for (;;) {
      const ssize_t n = detail::read_retrying(fd, buffer);
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          close_fd(fd);
        }
        return;
      }
      if (n == 0) {
        close_fd(fd);
        return;
      }
      const auto got = static_cast<std::size_t>(n);
      const std::size_t room = into.size() < keep ? keep - into.size() : 0;
      into.append(buffer.data(), std::min(room, got));
      if (got > room && over != nullptr) {
        *over = true;
        return;
      }
    }
  }

  /// Our environment with config.env and KUBERNETES_EXEC_INFO set (replacing ours).
  static std::vector<std::string> environment(const exec_config& config) {
    std::vector<std::pair<std::string, std::string>> set = config.env;
    set.emplace_back("KUBERNETES_EXEC_INFO", exec_info_json(config));
    std::set<std::string> names;
    for (const auto& [name, value] : set) {
      names.insert(name);
    }
    std::vector<std::string> out;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string_view entry(*e);
      const std::string name(entry.substr(0, entry.find('=')));
      if (names.count(name) == 0) {
        out.emplace_back(entry);
      }
    }
    // The last of two entries with one name wins, as in client-go (appended to os.Environ()).
    std::set<std::string> done;
    for (auto it = set.rbegin(); it != set.rend(); ++it) {
      if (done.insert(it->first).second) {
        out.push_back(it->first + "=" + it->second);
      }
    }
    return out;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int err_ = -1;
  int status_ = 0;
};

}  // namespace

base::result<exec_credential> parse_exec_credential(std::string_view output,
                                                    std::string_view api_version) {
  const auto bad = [](const std::string& why) {
    return invalid("the plugin printed an invalid ExecCredential: " + why);
  };
  if (output.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return bad("nothing on standard output");
  }
  const json doc = json::parse(output, nullptr, false);
  if (doc.is_discarded()) {
    return bad("not JSON");
  }
  if (!doc.is_object()) {
    return bad("not a JSON object");
  }
  std::string version;
  std::string kind;
  if (auto problem = string_member(doc, "apiVersion", version)) {
    return bad(*problem);
  }
  if (auto problem = string_member(doc, "kind", kind)) {
    return bad(*problem);
  }
  if (version != api_version) {
    return bad("apiVersion \"" + base::printable(version, 128) + "\", the kubeconfig wants \"" +
               std::string(api_version) + "\"");
  }
  if (kind != "ExecCredential") {
    return bad("kind \"" + base::printable(kind, 128) + "\", not \"ExecCredential\"");
  }
  const auto status = doc.find("status");
  if (status == doc.end() || status->is_null()) {
    return bad("no status");
  }
  if (!status->is_object()) {
    return bad("status is not an object");
  }
  exec_credential out;
  std::string expiry;
  for (const auto& [key, into] :
       {std::pair{"token", &out.token}, std::pair{"clientCertificateData", &out.client_cert_pem},
        std::pair{"clientKeyData", &out.client_key_pem},
        std::pair{"expirationTimestamp", &expiry}}) {
    if (auto problem = string_member(*status, key, *into)) {
      return bad("status." + *problem);
    }
  }
  if (out.client_cert_pem.empty() != out.client_key_pem.empty()) {
    return bad("status has only one of clientCertificateData and clientKeyData (both or neither)");
  }
  if (out.token.empty() && out.client_cert_pem.empty()) {
    return bad("status has neither a token nor clientCertificateData and clientKeyData");
  }
  if (auto problem = token_problem(out.token)) {
    return bad(*problem);
  }
  if (!out.client_cert_pem.empty() &&
      out.client_cert_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return bad("status.clientCertificateData is not a PEM certificate");
  }
  if (!out.client_key_pem.empty() &&
      (out.client_key_pem.find("-----BEGIN ") == std::string::npos ||
       out.client_key_pem.find("PRIVATE KEY-----") == std::string::npos)) {
    return bad("status.clientKeyData is not a PEM private key");
  }
  if (!expiry.empty()) {
    const auto seconds = base::parse_rfc3339(expiry);
    if (!seconds) {
      return bad("status.expirationTimestamp \"" + base::printable(expiry, 64) +
                 "\" is not an RFC 3339 time");
    }
    out.expiry = base::wall_clock::time_point{std::chrono::seconds{*seconds}};
  }
  return out;
}

std::string exec_info_json(const exec_config& config) {
  json info = {{"apiVersion", config.api_version},
               {"kind", "ExecCredential"},
               {"spec", {{"interactive", false}}}};
  if (config.provide_cluster_info) {
    json cluster = json::parse(config.cluster_json, nullptr, false);
    info["spec"]["cluster"] = cluster.is_object() ? std::move(cluster) : json::object();
  }
  return info.dump();
}

base::result<exec_run> run_exec_plugin(const exec_config& config, const exec_limits& limits,
                                       const std::atomic<bool>* stop) {
  const std::string who =
      config.source + ": the exec plugin \"" + base::printable(config.command, 256) + "\"";
  plugin_process child;
  if (const int rc = child.start(config); rc != 0) {
    std::string message = who + " cannot be run: " + std::generic_category().message(rc);
    if (rc == ENOENT) {
      message = who + " was not found" +
                (config.command.find('/') == std::string::npos ? " on PATH" : "");
      if (!config.install_hint.empty()) {
        message += "; install hint: " + one_line(config.install_hint);
      }
    }
    return invalid(message);
  }
  const auto deadline = steady::now() + limits.timeout;
  std::string out;
  std::string err;
  bool out_over = false;
  bool exited = false;
  for (;;) {
    if (stop != nullptr && stop->load()) {
      child.kill_group();
      return base::make_error(base::errc::shutting_down, who + " was stopped: shutting down");
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    if (left.count() <= 0) {
      child.kill_group();
      return invalid(who + " did not finish within " + base::format_duration(limits.timeout) +
                     " and was killed" + (err.empty() ? "" : ": " + one_line(err)));
    }
    // Short waits: the stop flag and the child's exit are looked at between them.
    child.pump(std::min(left, std::chrono::milliseconds{50}), out, limits.max_output, out_over, err,
               limits.max_stderr_kept);
    if (out_over) {
      child.kill_group();
      return invalid(who + " printed more than " + std::to_string(limits.max_output) +
                     " bytes on standard output and was killed");
    }
    if (exited) {
      break;  // what the pipes held when it exited has been read
    }
    exited = child.reap(false);
    if (exited && !child.pipes_open()) {
      break;
    }
    if (!exited && !child.pipes_open()) {
      // Both pipes closed, the child still running: wait for its exit without spinning.
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds{10}));
    }
  }
  child.close_pipes();
  const int status = child.status();
  if (WIFSIGNALED(status)) {
    return invalid(who + " was killed by signal " + std::to_string(WTERMSIG(status)) +
                   (err.empty() ? "" : ": " + one_line(err)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    return invalid(who + " exited with status " + std::to_string(WEXITSTATUS(status)) + ": " +
                   (err.empty() ? std::string("nothing on standard error") : one_line(err)));
  }
  auto credential = parse_exec_credential(out, config.api_version);
  if (!credential) {
    return invalid(who + ": " + credential.error().message);
  }
  return exec_run{std::move(credential).value(), std::move(err)};
}

}  // namespace tec::k8sclient
