#pragma once

// The daemon: owns every long-lived object of the process and wires them together.
//
//   informers (pods, nodes) --(old,new) records--> controller --> timed queue (asio_driver)
//        |  caches: pod_store, node_store              |             |
//        '-- always running (a follower stays warm)    '--> k8s_eviction_sink --> client
//                                                       '--> event_recorder    --> client
//
// Threads: one I/O thread runs the io_context (client, informers, eviction sink, event
// recorder, leader elector, HTTP endpoints, the timed queue's timer and its work); the
// controller runs its own worker threads; the thread that calls run() waits for a stop
// reason and then drives the shutdown. Only the leader acts: the controller receives updates
// only after leadership was acquired and both informers have synced; at that moment (on the
// I/O thread, so no informer event interleaves) every cached node, then every cached pod, is
// replayed into it as an add.

#include <memory>

#include "options.hpp"

namespace tec::cmd {

class daemon {
public:
  explicit daemon(options opts);
  ~daemon();
  daemon(const daemon&) = delete;
  daemon& operator=(const daemon&) = delete;

  /// Runs until SIGTERM/SIGINT (returns 0 after a clean shutdown, within about 10 s), until
  /// leadership is lost (returns 1, as kube-controller-manager exits), or until a fatal error
  /// such as an unreadable kubeconfig or a port already in use (returns 1, error logged).
  /// Call once, from the main thread.
  int run();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tec::cmd
