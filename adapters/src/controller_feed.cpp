#include "tec/adapters/controller_feed.hpp"

namespace tec::adapters {

pod_informer::handler controller_feed::pod_handler() {
  return [this](const pod_record* old_pod, const pod_record* new_pod) {
    if (active_.load()) {
      ctrl_.pod_updated(old_pod != nullptr ? &old_pod->pod : nullptr,
                        new_pod != nullptr ? &new_pod->pod : nullptr);
    }
  };
}

node_informer::handler controller_feed::node_handler() {
  return [this](const node_record* old_node, const node_record* new_node) {
    if (active_.load()) {
      ctrl_.node_updated(old_node != nullptr ? &old_node->node : nullptr,
                         new_node != nullptr ? &new_node->node : nullptr);
    }
  };
}

controller_feed::replayed controller_feed::activate(const node_store& nodes,
                                                    const pod_store& pods) {
  active_ = true;
  replayed out;
  const auto node_snapshot = nodes.list();
  for (const auto& n : node_snapshot) {
    ctrl_.node_updated(nullptr, &n.node, controller::update_origin::replay);
    if (!controller::no_execute_taints(n.node.taints).empty()) {
      ++out.tainted_nodes;
    }
  }
  // One pod at a time, not a snapshot of the whole cache (issue 16: the peak RSS). The store's
  // writers are the informer handlers on this thread, so nothing changes under the shared lock,
  // and the controller only queues the pod here (its workers read the store under shared locks
  // of their own).
  pods.for_each([&](const pod_record& p) {
    ctrl_.pod_updated(nullptr, &p.pod);
    ++out.pods;
  });
  out.nodes = node_snapshot.size();
  return out;
}

}  // namespace tec::adapters
