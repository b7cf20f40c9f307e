// taint-eviction-controller: evicts pods from nodes with NoExecute taints they do not
// tolerate. This file only parses flags, wires the libraries together and runs the loop.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "tec/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"taint-eviction-controller: the Kubernetes NoExecute taint manager, standalone",
               "taint-eviction-controller"};
  bool show_version = false;
  app.add_flag("--version", show_version, "Print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (show_version) {
    std::printf("taint-eviction-controller %s\n", tec::version);
    return 0;
  }
  std::fprintf(stderr, "taint-eviction-controller: the daemon is not wired yet (see issue 6)\n");
  return 1;
}
