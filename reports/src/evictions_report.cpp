#include "tec/reports/evictions_report.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "tec/base/rfc3339.hpp"
namespace tec::reports {

std::string evictions_json(const controller::eviction_list& list, bool acting,
                           const base::clock_bridge& clock,
                           base::wall_clock::time_point generated_at) {
  using nlohmann::ordered_json;  // the fields in the documented order
  ordered_json doc;
  doc["generatedAt"] = base::format_rfc3339(generated_at, base::rfc3339_digits::milliseconds);
  doc["acting"] = acting;
  doc["total"] = list.total;
  doc["truncated"] = list.total > list.evictions.size();
  ordered_json items = ordered_json::array();
  for (const controller::eviction_view& v : list.evictions) {
    ordered_json taints = ordered_json::array();
    for (const controller::taint& t : v.taints) {
      taints.push_back(controller::describe_taint(t));
    }
    ordered_json item;
    item["pod"] = v.pod.namespace_ + "/" + v.pod.name;
    item["uid"] = v.pod.uid;
    item["node"] = v.node;
    item["taints"] = std::move(taints);
    item["due"] = base::format_rfc3339(clock.wall(v.due), base::rfc3339_digits::milliseconds);
    item["state"] = v.state;
    item["why"] = v.why;
    item["attempts"] = v.attempts;
    item["lastError"] = v.last_error;
    if (v.blocked_since) {
      item["blockedSince"] =
          base::format_rfc3339(clock.wall(*v.blocked_since), base::rfc3339_digits::milliseconds);
      item["fallbackAt"] =
          v.fallback_at ? ordered_json(base::format_rfc3339(clock.wall(*v.fallback_at),
                                                            base::rfc3339_digits::milliseconds))
                        : ordered_json();
    }
    items.push_back(std::move(item));
  }
  doc["evictions"] = std::move(items);
  return doc.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace tec::reports
