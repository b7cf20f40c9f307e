#include "activation.hpp"

#include <utility>

namespace tec::cmd {

activation_gate::activation_gate(std::function<void()> on_caches_synced,
                                 std::function<void()> activate)
    : on_caches_synced_(std::move(on_caches_synced)), activate_(std::move(activate)) {}

void activation_gate::pods_synced() {
  pods_ = true;
  check();
}

void activation_gate::nodes_synced() {
  nodes_ = true;
  check();
}

void activation_gate::namespaces_synced() {
  namespaces_ = true;
  check();
}

void activation_gate::may_lead() {
  may_lead_ = true;
  check();
}

void activation_gate::close() {
  closed_ = true;
}

void activation_gate::check() {
  if (caches_synced() && !reported_sync_) {
    reported_sync_ = true;
    if (on_caches_synced_) {
      on_caches_synced_();
    }
  }
  if (caches_synced() && may_lead_ && !closed_ && !activated_) {
    activated_ = true;
    activate_();
  }
}

}  // namespace tec::cmd
