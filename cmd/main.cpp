// taint-eviction-controller: evicts pods from nodes with NoExecute taints they do not
// tolerate. This file only parses flags, wires the daemon and runs it (see daemon.hpp).
#include <cstdio>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "logging.hpp"
#include "options.hpp"
#include "tec/version.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto parsed = tec::cmd::parse_options(
      args, std::string(tec::version) + " (commit " + tec::commit + ", " + tec::compiler + ")");
  std::fputs(parsed.out.c_str(), stdout);
  std::fputs(parsed.err.c_str(), stderr);
  if (!parsed.opts) {
    return parsed.exit_code;
  }
  tec::cmd::setup_logging(*parsed.opts);
  tec::cmd::daemon d(*parsed.opts);
  return d.run();
}
