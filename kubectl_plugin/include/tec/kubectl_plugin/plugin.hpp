#pragma once

// kubectl-taint_eviction, the kubectl plugin (`kubectl taint-eviction ...`): its verbs run
// against the cluster the kubeconfig names. README "kubectl plugin" documents them.
//
// run() is the whole program but for main(): parse, read, decide, print. Blocking I/O on the
// caller's thread (the API server; for pending and explain a child `kubectl port-forward`).
// Writes no object: preview sends GETs only; pending and explain also open a port-forward
// (which RBAC counts as `create` on pods/portforward).

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace tec::kubectl_plugin {

/// Looks up an environment variable (KUBECONFIG, HOME); nullopt when unset.
using env_lookup = std::function<std::optional<std::string>(const std::string&)>;

/// Runs the command line `args` (after the program name); returns the exit code (arguments.hpp:
/// 0, 1 cluster error or not found, 2 usage). Results go to `out`, errors and notes to `err`
/// (each "error: ..." one line).
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        const env_lookup& env);

}  // namespace tec::kubectl_plugin
