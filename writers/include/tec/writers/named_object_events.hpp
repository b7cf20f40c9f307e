#pragma once

// Events about one object the controller knows by namespace and name only (the policy's
// ConfigMap, --policy-configmap): its UID is read once, by a GET, so that `kubectl describe`
// finds the Events (it matches involvedObject.uid).

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tec/k8sclient/client.hpp"
#include "tec/writers/event_recorder.hpp"

namespace spdlog {
class logger;
}

namespace tec::writers {

/// Thread/ownership: record() runs on `api`'s executor, one call at a time. Borrows `api` and
/// `recorder`, which must outlive it.
class named_object_events {
public:
  /// `object`: the object's apiVersion ("v1", "group/version"), kind, namespace and name (its
  /// ref.uid is what the GET finds); `resource`: its plural ("configmaps").
  named_object_events(k8sclient::client& api, event_recorder& recorder, involved_object object,
                      std::string_view resource, std::shared_ptr<spdlog::logger> log);

  /// Records an Event about the object. The first call reads its UID; when that fails (no
  /// RBAC, no such object: one warning) every Event goes without one.
  boost::asio::awaitable<void> record(event_content content);

  /// The GET of the object: /api/v1/namespaces/<ns>/<resource>/<name> for the core group,
  /// /apis/<group>/<version>/... for others, each segment escaped. Pure; for tests.
  [[nodiscard]] static std::string path_of(const involved_object& object,
                                           std::string_view resource);

private:
  boost::asio::awaitable<void> read_uid();

  k8sclient::client& api_;
  event_recorder& recorder_;
  involved_object object_;
  std::string path_;
  std::shared_ptr<spdlog::logger> log_;
  bool read_ = false;  // the UID was looked up (found or not)
};

}  // namespace tec::writers
