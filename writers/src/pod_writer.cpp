#include "tec/writers/pod_writer.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/status.hpp>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "tec/informers/records.hpp"
#include "tec/k8sclient/paths.hpp"

namespace tec::writers {
namespace {

using nlohmann::json;
namespace http = boost::beast::http;

/// True when a rejected write names metadata.uid as the reason: the object under this name is
/// not the one we meant.
bool names_uid_cause(std::string_view body) {
  const json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!status.is_object()) {
    return false;
  }
  const auto details = status.find("details");
  if (details == status.end() || !details->is_object()) {
    return false;
  }
  const auto causes = details->find("causes");
  if (causes == details->end() || !causes->is_array()) {
    return false;
  }
  for (const auto& cause : *causes) {
    if (!cause.is_object()) {
      continue;
    }
    const auto field = cause.find("field");
    if (field != cause.end() && field->is_string() && field->get<std::string>() == "metadata.uid") {
      return true;
    }
  }
  return false;
}

std::string pod_path(std::string_view ns, std::string_view name) {
  std::string path = "/api/v1/namespaces/";
  path += k8sclient::escape_path_segment(ns);
  path += "/pods/";
  path += k8sclient::escape_path_segment(name);
  return path;
}

bool is_2xx(unsigned status) noexcept {
  return status >= 200 && status < 300;
}

}  // namespace

k8sclient::request make_evict_pod_request(std::string_view ns, std::string_view name,
                                          std::string_view uid, std::string_view api_version) {
  const json body = {{"apiVersion", std::string(api_version)},
                     {"kind", "Eviction"},
                     {"metadata", {{"name", std::string(name)}, {"namespace", std::string(ns)}}},
                     {"deleteOptions", {{"preconditions", {{"uid", std::string(uid)}}}}}};
  k8sclient::request req;
  req.method = http::verb::post;
  req.target = pod_path(ns, name) + "/eviction";
  req.body = body.dump();
  req.content_type = "application/json";
  return req;
}

std::optional<std::string> eviction_version_in_discovery(std::string_view body) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return std::nullopt;
  }
  const auto resources = doc.find("resources");
  if (resources == doc.end() || !resources->is_array()) {
    return std::nullopt;
  }
  for (const auto& r : *resources) {
    if (!r.is_object() || r.value("name", json()) != "pods/eviction") {
      continue;
    }
    const json group = r.value("group", json());
    const json version = r.value("version", json());
    if (group.is_string() && version.is_string() &&
        !version.get_ref<const std::string&>().empty()) {
      return group.get<std::string>() + "/" + version.get<std::string>();
    }
    // Listed without a group/version: the subresource of the core group's own version
    // (never served so; the Eviction kind has always lived in policy).
    return std::nullopt;
  }
  return std::nullopt;
}

k8sclient::request make_delete_pod_request(std::string_view ns, std::string_view name,
                                           std::string_view uid) {
  const json body = {{"kind", "DeleteOptions"},
                     {"apiVersion", "v1"},
                     {"preconditions", {{"uid", std::string(uid)}}}};
  k8sclient::request req;
  req.method = http::verb::delete_;
  req.target = pod_path(ns, name);
  req.body = body.dump();
  req.content_type = "application/json";
  req.idempotent = true;
  return req;
}

k8sclient::request make_disruption_condition_request(
    std::string_view ns, std::string_view name, std::string_view uid,
    std::optional<std::chrono::system_clock::time_point> transition_time) {
  json condition = {{"type", informers::disruption_target_type},
                    {"status", "True"},
                    {"reason", informers::taint_manager_reason},
                    {"message", informers::taint_manager_message}};
  if (transition_time) {
    condition["lastTransitionTime"] = base::format_rfc3339(*transition_time);
  }
  const json body = {{"metadata", {{"uid", std::string(uid)}}},
                     {"status", {{"conditions", json::array({condition})}}}};
  k8sclient::request req;
  req.method = http::verb::patch;
  req.target = pod_path(ns, name) + "/status";
  req.body = body.dump();
  req.content_type = "application/strategic-merge-patch+json";
  // The same patch applied twice leaves the same pod: safe to resend.
  req.idempotent = true;
  return req;
}

namespace {
/// A transport error, its message prefixed with the request it failed (no secrets in either).
base::error with_context(const std::string& what, base::error err) {
  err.message = what + ": " + err.message;
  return err;
}
}  // namespace

pod_writer::pod_writer(k8sclient::client& c, base::clock& clock) : client_(c), clock_(clock) {}

boost::asio::awaitable<base::result<delete_outcome>> pod_writer::delete_pod(
    std::string ns, std::string name, std::string uid, std::function<bool()> cancelled) {
  k8sclient::request req = make_delete_pod_request(ns, name, uid);
  req.cancelled = std::move(cancelled);
  auto resp = co_await client_.send(std::move(req));
  const std::string what = "DELETE pod " + ns + "/" + name;
  if (!resp) {
    co_return with_context(what, resp.error());
  }
  const unsigned status = resp->status;
  if (is_2xx(status)) {
    co_return delete_outcome::deleted;
  }
  if (status == 404) {
    co_return delete_outcome::not_found;
  }
  if (status == 409) {
    // The only precondition we send is the UID: a conflict means the name is taken by another
    // pod, so the one we meant is gone.
    co_return delete_outcome::uid_mismatch;
  }
  co_return k8sclient::api_error(what, resp.value());
}

boost::asio::awaitable<base::result<evict_answer>> pod_writer::evict_pod(
    std::string ns, std::string name, std::string uid, std::string api_version,
    std::function<bool()> cancelled) {
  k8sclient::request req = make_evict_pod_request(ns, name, uid, api_version);
  req.cancelled = std::move(cancelled);
  auto resp = co_await client_.send(std::move(req));
  const std::string what = "POST pod eviction " + ns + "/" + name;
  if (!resp) {
    co_return with_context(what, resp.error());
  }
  const unsigned status = resp->status;
  if (is_2xx(status)) {
    co_return evict_answer{evict_outcome::evicted, {}};
  }
  if (status == 429) {
    co_return evict_answer{evict_outcome::blocked, k8sclient::status_message(resp->body)};
  }
  if (status == 404) {
    co_return evict_answer{evict_outcome::not_found, {}};
  }
  // A 409 is also what an eviction answers when its update of the budget keeps conflicting:
  // only one about the UID precondition means the pod we meant is gone.
  if (status == 409 && (names_uid_cause(resp->body) ||
                        k8sclient::status_message(resp->body).find("UID") != std::string::npos)) {
    co_return evict_answer{evict_outcome::uid_mismatch, {}};
  }
  co_return k8sclient::api_error(what, resp.value());
}

boost::asio::awaitable<base::result<std::string>> pod_writer::discover_eviction_version() {
  k8sclient::request req;
  req.method = http::verb::get;
  req.target = "/api/v1";
  req.idempotent = true;
  auto resp = co_await client_.send(std::move(req));
  const std::string what = "GET /api/v1 (discovery of the Eviction API)";
  if (!resp) {
    co_return with_context(what, resp.error());
  }
  if (!is_2xx(resp->status)) {
    co_return k8sclient::api_error(what, resp.value());
  }
  if (auto version = eviction_version_in_discovery(resp->body)) {
    co_return std::move(*version);
  }
  co_return base::make_error(base::errc::http_status,
                             what + ": the API server does not list pods/eviction");
}

boost::asio::awaitable<base::result<patch_outcome>> pod_writer::add_disruption_condition(
    std::string ns, std::string name, std::string uid, std::function<bool()> cancelled,
    bool keep_transition_time) {
  k8sclient::request req = make_disruption_condition_request(
      ns, name, uid,
      keep_transition_time ? std::nullopt
                           : std::optional<std::chrono::system_clock::time_point>(clock_.wall()));
  req.cancelled = std::move(cancelled);
  auto resp = co_await client_.send(std::move(req));
  const std::string what = "PATCH pod status " + ns + "/" + name;
  if (!resp) {
    co_return with_context(what, resp.error());
  }
  const unsigned status = resp->status;
  if (is_2xx(status)) {
    co_return patch_outcome::patched;
  }
  if (status == 404) {
    co_return patch_outcome::not_found;
  }
  if ((status == 422 || status == 409) && names_uid_cause(resp->body)) {
    co_return patch_outcome::uid_mismatch;
  }
  co_return k8sclient::api_error(what, resp.value());
}

}  // namespace tec::writers
