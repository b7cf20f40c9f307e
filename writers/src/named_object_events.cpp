#include "tec/writers/named_object_events.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "tec/k8sclient/paths.hpp"

namespace tec::writers {

named_object_events::named_object_events(k8sclient::client& api, event_recorder& recorder,
                                         involved_object object, std::string_view resource,
                                         std::shared_ptr<spdlog::logger> log)
    : api_(api),
      recorder_(recorder),
      object_(std::move(object)),
      path_(path_of(object_, resource)),
      log_(std::move(log)) {
  object_.ref.uid.clear();
}

std::string named_object_events::path_of(const involved_object& object, std::string_view resource) {
  const std::string& v = object.api_version;
  std::string path = v.find('/') == std::string::npos ? "/api/" + v : "/apis/" + v;
  return path + "/namespaces/" + k8sclient::escape_path_segment(object.ref.namespace_) + "/" +
         std::string(resource) + "/" + k8sclient::escape_path_segment(object.ref.name);
}

boost::asio::awaitable<void> named_object_events::record(event_content content) {
  if (!read_) {
    co_await read_uid();
  }
  recorder_.record(object_, std::move(content));
}

boost::asio::awaitable<void> named_object_events::read_uid() {
  k8sclient::request get;
  get.target = path_;
  get.idempotent = true;
  auto got = co_await api_.send(std::move(get));
  read_ = true;
  if (got && got->status == 200) {
    const auto body = nlohmann::json::parse(got->body, nullptr, false);
    if (body.is_object() && body.contains("metadata") && body["metadata"].is_object() &&
        body["metadata"].contains("uid") && body["metadata"]["uid"].is_string()) {
      object_.ref.uid = body["metadata"]["uid"].get<std::string>();
    }
  }
  if (object_.ref.uid.empty()) {
    log_->warn("cannot read the UID of {} {}/{} ({}): its Events will not show in kubectl describe",
               object_.kind, object_.ref.namespace_, object_.ref.name,
               got ? "HTTP " + std::to_string(got->status) : got.error().message);
  }
}

}  // namespace tec::writers
