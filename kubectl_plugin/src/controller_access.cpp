#include "tec/kubectl_plugin/controller_access.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <system_error>
#include <utility>
#include <vector>

#include "tec/base/duration.hpp"
#include "tec/base/error.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/k8sclient/exec_authenticator.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace tec::kubectl_plugin {
namespace {

using base::errc;
using base::make_error;

constexpr const char* secure_port = "8443";  // --metrics-bind-address as deploy/ runs it
constexpr std::size_t max_child_output = 4096;

base::error unreachable(std::string why) {
  return make_error(errc::connection_failed, std::move(why));
}

// The kubeconfig user's bearer token (token, tokenFile or the exec plugin's); empty when it
// has none.
base::result<std::string> bearer_token(const k8sclient::rest_config& config) {
  if (config.exec) {
    auto got = config.exec->get();
    if (!got) {
      return got.error();
    }
    return got.value().credential->token;
  }
  k8sclient::token_source tokens(config.bearer_token, config.token_file);
  return tokens.current();
}

struct child_process {
  pid_t pid = -1;
  int out = -1;  // its stdout and stderr
};

base::result<child_process> spawn(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return unreachable("pipe: " + std::generic_category().message(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) {
    argv.push_back(const_cast<char*>(a.c_str()));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  }
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return unreachable("cannot run " + args[0] + ": " + std::generic_category().message(rc));
  }
  return child_process{pid, fds[0]};
}

void stop(pid_t pid) {
  if (pid <= 0) {
    return;
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// Reads the child's output until it names its local port, it exits or `timeout` passes.
base::result<std::string> await_port(const child_process& child,
                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string seen;
  std::string line;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return unreachable("kubectl port-forward did not forward within " +
                         base::format_duration(timeout));
    }
    pollfd p{child.out, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    char buf[512];
    const ssize_t got = n > 0 ? ::read(child.out, buf, sizeof buf) : 0;
    if (n > 0 && got <= 0) {
      std::string why = seen;
      while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) {
        why.pop_back();
      }
      return unreachable("kubectl port-forward failed: " + base::printable(why, 300));
    }
    for (ssize_t i = 0; i < got; ++i) {
      const char c = buf[i];  // NOLINT(cppcoreguidelines-pro-bounds-constant-array-index)
      if (seen.size() < max_child_output) {
        seen.push_back(c);
      }
      if (c != '\n') {
        line.push_back(c);
        continue;
      }
      if (auto port = forwarded_port(line)) {
        return *port;
      }
      line.clear();
    }
  }
}

}  // namespace

std::optional<std::string> holder_pod(std::string_view holder_identity) {
  const auto us = holder_identity.rfind('_');
  if (us == std::string_view::npos || us == 0) {
    return std::nullopt;
  }
  return std::string(holder_identity.substr(0, us));
}

std::optional<std::string> forwarded_port(std::string_view line) {
  constexpr std::string_view prefix = "Forwarding from 127.0.0.1:";
  if (!line.starts_with(prefix)) {
    return std::nullopt;
  }
  line.remove_prefix(prefix.size());
  const auto end = line.find(' ');
  const std::string_view port = line.substr(0, end);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  return std::string(port);
}

base::result<std::unique_ptr<controller_access>> controller_access::open(
    cluster_reader& cluster, const cluster_flags& flags) {
  auto token = bearer_token(cluster.config());
  if (!token) {
    return unreachable("cannot read the kubeconfig user's token: " + token.error().message);
  }
  if (token.value().empty()) {
    return unreachable(
        "the kubeconfig user has no bearer token; the controller's secure port authenticates "
        "bearer tokens only (client certificate users, and exec plugins that give only a "
        "certificate, cannot read it)");
  }
  k8sclient::rest_config port;
  port.insecure_skip_tls_verify = true;  // the port's certificate is self-signed by default
  port.bearer_token = token.value();
  if (!flags.controller_url.empty()) {
    auto url = k8sclient::parse_server_url(flags.controller_url);
    if (!url) {
      return unreachable("--controller-url: " + url.error().message);
    }
    port.host = url.value().host;
    port.port = url.value().port;
    port.tls = url.value().tls;
    port.base_path = url.value().base_path;
    port.source = flags.controller_url;
    return std::unique_ptr<controller_access>(new controller_access(
        std::make_unique<cluster_reader>(std::move(port), flags.request_wait()),
        flags.controller_url, -1, -1));
  }
  const std::string lease = flags.controller_namespace + "/" + flags.lease;
  auto holder = cluster.lease_holder(flags.controller_namespace, flags.lease);
  if (!holder) {
    return unreachable("cannot read Lease " + lease + ": " + holder.error().message);
  }
  if (!holder.value() || holder.value()->empty()) {
    return unreachable(holder.value() ? "Lease " + lease + " has no holder" : "no Lease " + lease);
  }
  const auto pod = holder_pod(*holder.value());
  if (!pod) {
    return unreachable("Lease " + lease + " holder \"" + base::printable(*holder.value(), 128) +
                       "\" names no pod");
  }
  std::vector<std::string> args{"kubectl", "port-forward"};
  if (!flags.kubeconfig.empty()) {
    args.insert(args.end(), {"--kubeconfig", flags.kubeconfig});
  }
  if (!flags.context.empty()) {
    args.insert(args.end(), {"--context", flags.context});
  }
  args.insert(args.end(), {"--address", "127.0.0.1", "-n", flags.controller_namespace,
                           "pod/" + *pod, std::string(":") + secure_port});
  auto child = spawn(args);
  if (!child) {
    return child.error();
  }
  auto local = await_port(child.value(), flags.request_wait());
  if (!local) {
    ::close(child.value().out);
    stop(child.value().pid);
    return local.error();
  }
  port.host = "127.0.0.1";
  port.port = local.value();
  port.tls = true;
  port.source = "port-forward to pod " + flags.controller_namespace + "/" + *pod;
  return std::unique_ptr<controller_access>(new controller_access(
      std::make_unique<cluster_reader>(std::move(port), flags.request_wait()),
      "pod " + flags.controller_namespace + "/" + *pod, child.value().pid, child.value().out));
}

controller_access::controller_access(std::unique_ptr<cluster_reader> port, std::string description,
                                     pid_t child, int child_out)
    : port_(std::move(port)),
      description_(std::move(description)),
      child_(child),
      child_out_(child_out) {}

controller_access::~controller_access() {
  port_.reset();
  stop(child_);
  if (child_out_ >= 0) {
    ::close(child_out_);
  }
}

base::result<std::string> controller_access::get(const std::string& target) {
  auto r = port_->get(target);
  if (!r) {
    return unreachable(r.error().message);
  }
  const unsigned status = r.value().status;
  if (status / 100 == 2) {
    return std::move(r.value().body);
  }
  std::string what = status == 401   ? "401 Unauthorized (the port did not accept the token)"
                     : status == 403 ? "403 Forbidden (the user may not get " + target + ")"
                     : status == 404 ? "404 Not Found (" + target + ")"
                                     : std::to_string(status) + " on " + target;
  return make_error(status == 404 ? errc::not_found : errc::http_status, what,
                    static_cast<int>(status));
}

}  // namespace tec::kubectl_plugin
