#include "tec/admission/webhook.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <utility>

#include "tec/base/error.hpp"
#include "tec/controller/preview.hpp"

namespace tec::admission {
namespace {

/// The node lifecycle controller's taints: never refused (kubernetes #28832 and its kin: a
/// partition taints many nodes at once, and refusing would hide the partition).
bool lifecycle_taint(std::string_view key) {
  return key == "node.kubernetes.io/not-ready" || key == "node.kubernetes.io/unreachable";
}

std::string percent(double share) {
  return std::to_string(std::lround(share)) + "%";
}

/// Why deny mode refuses the taint previewed in `r`, or nullopt.
std::optional<std::string> refusal(const controller::preview_result& r,
                                   const controller::admission_policy& deny) {
  const std::string what = "tainting " +
                           (r.targets.empty() ? std::string("the node") : r.targets.front()) +
                           " with " + controller::taint_string(r.added);
  std::vector<std::string> reasons;
  const std::size_t evicted = r.evicted_now + r.evicted_later;
  if (deny.deny_evicting_more_than && evicted > *deny.deny_evicting_more_than) {
    reasons.push_back("evicts " + std::to_string(evicted) + " pods (" +
                      std::to_string(r.evicted_now) + " now, " + std::to_string(r.evicted_later) +
                      " later), more than admission.denyEvictingMoreThan " +
                      std::to_string(*deny.deny_evicting_more_than));
  }
  const auto& s = r.storm;
  if (deny.deny_if_breaker_opens && s.breaker_enabled && s.breaker_opens && !s.breaker_open_now) {
    const double share =
        s.nodes == 0 ? 0
                     : 100.0 * static_cast<double>(s.tainted_after) / static_cast<double>(s.nodes);
    reasons.push_back("opens the storm breaker (" + std::to_string(s.tainted_after) + " of " +
                      std::to_string(s.nodes) + " nodes, " + percent(share) +
                      ", would carry NoExecute taints it counts; it opens above " +
                      percent(s.threshold_percent) + ")");
  }
  if (reasons.empty()) {
    return std::nullopt;
  }
  std::string out = what;
  for (std::size_t i = 0; i < reasons.size(); ++i) {
    out += (i == 0 ? " " : " and ") + reasons[i];
  }
  return out;
}

std::string clip(std::string_view text, std::size_t max) {
  return base::printable(text, max);
}

}  // namespace

std::vector<controller::taint> added_no_execute_taints(const controller::node_view* before,
                                                       const controller::node_view& now) {
  using key_value = std::pair<std::string_view, std::string_view>;
  std::set<key_value> seen;  // the before's NoExecute taints, then each one listed
  if (before != nullptr) {
    for (const auto& b : before->taints) {
      if (b.effect == controller::taint_effect::no_execute) {
        seen.emplace(b.key, b.value);
      }
    }
  }
  std::vector<controller::taint> out;
  for (const auto& t : now.taints) {
    if (t.effect == controller::taint_effect::no_execute && seen.emplace(t.key, t.value).second) {
      out.push_back(t);
    }
  }
  return out;
}

std::string_view to_string(review_outcome o) noexcept {
  switch (o) {
    case review_outcome::allowed:
      return "allowed";
    case review_outcome::warned:
      return "warned";
    case review_outcome::refused:
      return "refused";
    case review_outcome::not_ready:
      return "not_ready";
    case review_outcome::too_many_taints:
      return "too_many_taints";
    case review_outcome::over_budget:
      return "over_budget";
    case review_outcome::malformed:
      return "malformed";
  }
  return "unknown";
}

namespace {

/// Previews each taint of `added` on `in`: the first max_warnings as warnings, and every one
/// deny mode may refuse (`may_refuse`, not a node lifecycle taint) for its refusals (previews
/// beyond the warnings are made only then). False when `out_of_time` says so between two.
bool preview_each(controller::preview_input& in, const std::vector<controller::taint>& added,
                  bool may_refuse, const review_budget& out_of_time,
                  std::vector<std::string>& warnings, std::vector<std::string>& refusals) {
  const std::size_t previewed = may_refuse ? added.size() : std::min(added.size(), max_warnings);
  for (std::size_t i = 0; i < previewed; ++i) {
    if (out_of_time && out_of_time()) {
      return false;
    }
    in.added = added[i];
    const auto r = controller::preview(in);
    if (i < max_warnings) {
      warnings.push_back(clip(controller::summary(r), max_warning_bytes));
    }
    if (may_refuse && !lifecycle_taint(added[i].key)) {
      if (auto why = refusal(r, in.policy.admission)) {
        refusals.push_back(std::move(*why));
      }
    }
  }
  return true;
}

/// Deny mode's answer: each refusal, then how to go ahead (the acknowledgement annotation).
std::string refusal_message(const std::vector<std::string>& refusals, const std::string& node) {
  std::string message;
  for (const auto& r : refusals) {
    message += (message.empty() ? "" : "; ") + r;
  }
  const std::string ack =
      std::string(acknowledge_annotation) + "=" + std::string(acknowledge_value);
  return message + ". To go ahead, annotate the node " + ack + " first (kubectl annotate node " +
         node + " " + ack + ")";
}

}  // namespace

decision decide(const review_request& request, const cluster_reader& cluster,
                const review_budget& out_of_time) {
  decision d;
  review_response& out = d.response;
  out.api_version = request.api_version;
  out.uid = request.uid;
  if ((request.op != operation::create && request.op != operation::update) || !request.object) {
    return d;
  }
  const controller::node_view& node = request.object->node;
  const auto no_execute = static_cast<std::size_t>(std::count_if(
      node.taints.begin(), node.taints.end(),
      [](const controller::taint& t) { return t.effect == controller::taint_effect::no_execute; }));
  if (no_execute == 0) {
    return d;  // most Node updates: nothing to add
  }
  if (no_execute > max_review_taints) {
    out.warnings.push_back(clip("taint-eviction-controller does not preview a node with " +
                                    std::to_string(no_execute) + " NoExecute taints (at most " +
                                    std::to_string(max_review_taints) + "): no preview made for " +
                                    node.name,
                                max_warning_bytes));
    d.outcome = review_outcome::too_many_taints;
    return d;
  }
  const controller::node_view* old = request.old_object ? &request.old_object->node : nullptr;
  if (const auto why = cluster.not_ready()) {
    if (!added_no_execute_taints(old, node).empty()) {
      out.warnings.push_back(clip(
          "taint-eviction-controller cannot preview this taint yet: " + *why, max_warning_bytes));
      d.outcome = review_outcome::not_ready;
    }
    return d;
  }
  controller::preview_input in;
  in.all_nodes = cluster.nodes();
  // What the node carried before the request: the cached node, else (not cached yet) the
  // request's oldObject. The cache first because kube-apiserver 1.20.2 sends a Node UPDATE's
  // oldObject equal to its object (seen for PATCH and PUT alike: tests/e2e/webhook_test.sh),
  // so the oldObject alone never shows an added taint there. The cache lags the API server by
  // a watch event: a request within that lag of the one that added a taint may warn about it
  // again.
  const auto cached = std::find_if(in.all_nodes.begin(), in.all_nodes.end(),
                                   [&node](const auto& n) { return n.name == node.name; });
  const controller::node_view* before = cached != in.all_nodes.end() ? &*cached : old;
  const auto added = added_no_execute_taints(before, node);
  if (added.empty()) {
    return d;
  }
  // Each added taint is previewed on the node as it was before the request (a new node: no
  // taints), so each warning says what that taint does by itself; its hold-until annotation is
  // the one the request leaves (a hold put on with the taint holds its evictions).
  const controller::node_view target{
      .name = node.name,
      .taints = before != nullptr ? before->taints : std::vector<controller::taint>{},
      .hold = node.hold};
  in.targets = {target};
  if (cached == in.all_nodes.end()) {
    in.all_nodes.push_back(target);
  }
  in.policy = cluster.policy();
  in.pods = cluster.pods_on_node(node.name);
  in.opted_out_namespaces = cluster.opted_out_namespaces();
  in.now_unix = cluster.now_unix();

  const auto& deny = in.policy.admission;
  const bool may_refuse =
      deny.deny_mode() && !request.object->acknowledged && request.user != node_controller_user;
  std::vector<std::string> refusals;
  if (!preview_each(in, added, may_refuse, out_of_time, out.warnings, refusals)) {
    d.response.warnings.clear();
    d.outcome = review_outcome::over_budget;
    return d;
  }
  if (added.size() > max_warnings) {
    out.warnings.push_back("... and " + std::to_string(added.size() - max_warnings) +
                           " more NoExecute taints added to " + clip(node.name, 64));
  }
  if (!refusals.empty()) {
    out.allowed = false;
    out.code = 403;
    out.message = clip(refusal_message(refusals, node.name), max_message_bytes);
    d.outcome = review_outcome::refused;
  } else {
    d.outcome = review_outcome::warned;
  }
  return d;
}

http_answer serve(std::string_view body, const cluster_reader& cluster,
                  const review_budget& out_of_time) {
  auto request = decode_review(body);
  if (!request) {
    return {.status = 400,
            .content_type = "text/plain; charset=utf-8",
            .body = request.error().message + "\n",
            .outcome = review_outcome::malformed};
  }
  auto d = decide(*request, cluster, out_of_time);
  return {.status = 200,
          .content_type = "application/json",
          .body = encode_review(d.response),
          .outcome = d.outcome};
}

}  // namespace tec::admission
