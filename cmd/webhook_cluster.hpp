#pragma once

// The admission webhook's view of the daemon (admission::cluster_reader): the informers'
// caches and the controller's policy in force. Borrows them all; they outlive it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/admission/webhook.hpp"
#include "tec/controller/controller.hpp"
#include "tec/informers/namespaces.hpp"
#include "tec/informers/store.hpp"

namespace tec::cmd {

/// Thread: any (the secure port's strand); every read is a copy under the store's own lock.
class webhook_cluster final : public admission::cluster_reader {
public:
  /// `not_ready`: why the caches cannot be read yet (their first LIST), or nullopt.
  webhook_cluster(const informers::pod_store& pods, const informers::node_store& nodes,
                  const informers::namespace_store& namespaces, const controller::controller& ctrl,
                  std::function<std::optional<std::string>()> not_ready)
      : pods_(pods),
        nodes_(nodes),
        namespaces_(namespaces),
        ctrl_(ctrl),
        not_ready_(std::move(not_ready)) {}

  [[nodiscard]] std::optional<std::string> not_ready() const override { return not_ready_(); }
  [[nodiscard]] std::vector<controller::pod_view> pods_on_node(
      std::string_view node) const override {
    return pods_.pods_on_node(node);
  }
  [[nodiscard]] std::vector<controller::node_view> nodes() const override {
    std::vector<controller::node_view> out;
    for (auto& record : nodes_.list()) {
      out.push_back(std::move(record.node));
    }
    return out;
  }
  [[nodiscard]] std::vector<std::string> opted_out_namespaces() const override {
    return namespaces_.opted_out_namespaces();
  }
  [[nodiscard]] controller::eviction_policy policy() const override { return ctrl_.policy(); }
  [[nodiscard]] std::int64_t now_unix() const override {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

private:
  const informers::pod_store& pods_;
  const informers::node_store& nodes_;
  const informers::namespace_store& namespaces_;
  const controller::controller& ctrl_;
  std::function<std::optional<std::string>()> not_ready_;
};

}  // namespace tec::cmd
