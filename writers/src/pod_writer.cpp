#include "tec/writers/pod_writer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>
#include <utility>

#include "tec/base/rfc3339.hpp"
#include "tec/informers/records.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/paths.hpp"

namespace tec::writers {
namespace {

using nlohmann::json;
namespace http = boost::beast::http;

/// True when a rejected write names metadata.uid as the reason: the object under this name is
/// not the one we meant.
bool names_uid_cause(std::string_view body) {
  const json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json::json_pointer causes_at("/details/causes");
  if (!status.contains(causes_at)) {
    return false;
  }
  const json& causes = status.at(causes_at);
  return causes.is_array() && std::any_of(causes.begin(), causes.end(), [](const json& cause) {
           return cause.is_object() && cause.value("field", json()) == "metadata.uid";
         });
}

std::string pod_path(std::string_view ns, std::string_view name) {
  return "/api/v1/namespaces/" + k8sclient::escape_path_segment(ns) + "/pods/" +
         k8sclient::escape_path_segment(name);
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
  return {http::verb::post, pod_path(ns, name) + "/eviction", body.dump()};
}

std::optional<std::string> eviction_version_in_discovery(std::string_view body) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json::json_pointer resources_at("/resources");
  if (!doc.contains(resources_at) || !doc.at(resources_at).is_array()) {
    return std::nullopt;
  }
  for (const auto& r : doc.at(resources_at)) {
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

namespace {

/// The SAX walk of condition_schema_has_observed_generation(): the member keys from the root
/// to where the parser is, compared with the path of the PodCondition schema's properties.
class condition_schema_scan final : public nlohmann::json_sax<json> {
public:
  std::optional<bool> answer;

  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& /*s*/) override { return true; }
  bool string(string_t& /*val*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override {
    path_.emplace_back();
    if (in_schema() && path_.size() == schema_depth + 1) {
      answer = false;  // the schema is there; its properties decide
    }
    return true;
  }
  bool key(string_t& val) override {
    path_.back() = val;
    if (path_.size() == schema_depth + 2 && in_schema() && path_[schema_depth] == "properties" &&
        val == "observedGeneration") {
      answer = true;
      return false;  // stop at the answer: the rest of a megabyte is not needed
    }
    return true;
  }
  bool end_object() override {
    const bool leaving_schema = in_schema() && path_.size() == schema_depth + 1;
    path_.pop_back();
    return !leaving_schema;  // the schema ended without the property: answer is false
  }
  bool start_array(std::size_t /*elements*/) override {
    path_.emplace_back("[]");
    return true;
  }
  bool end_array() override {
    path_.pop_back();
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) override {
    return false;
  }

private:
  static constexpr std::size_t schema_depth = 3;  // components.schemas.<name>
  [[nodiscard]] bool in_schema() const {
    return path_.size() > schema_depth && path_[0] == "components" && path_[1] == "schemas" &&
           path_[2] == "io.k8s.api.core.v1.PodCondition";
  }

  std::vector<std::string> path_;
};

}  // namespace

std::optional<bool> condition_schema_has_observed_generation(std::string_view body) {
  condition_schema_scan scan;
  json::sax_parse(body.begin(), body.end(), &scan, nlohmann::detail::input_format_t::json,
                  /*strict=*/false);
  return scan.answer;
}

k8sclient::request make_delete_pod_request(std::string_view ns, std::string_view name,
                                           std::string_view uid) {
  const json body = {{"kind", "DeleteOptions"},
                     {"apiVersion", "v1"},
                     {"preconditions", {{"uid", std::string(uid)}}}};
  k8sclient::request req{http::verb::delete_, pod_path(ns, name), body.dump(), "application/json",
                         /*idempotent_=*/true};
  req.accept = delete_accept;
  return req;
}

k8sclient::request make_disruption_condition_request(
    std::string_view ns, std::string_view name, std::string_view uid,
    std::optional<std::chrono::system_clock::time_point> transition_time,
    std::optional<std::int64_t> observed_generation) {
  json condition = {{"type", informers::disruption_target_type},
                    {"status", "True"},
                    {"reason", informers::taint_manager_reason},
                    {"message", informers::taint_manager_message}};
  if (transition_time) {
    condition["lastTransitionTime"] = base::format_rfc3339(*transition_time);
  }
  if (observed_generation) {
    condition["observedGeneration"] = *observed_generation;
  }
  const json body = {{"metadata", {{"uid", std::string(uid)}}},
                     {"status", {{"conditions", json::array({condition})}}}};
  // The same patch applied twice leaves the same pod: safe to resend.
  return {http::verb::patch, pod_path(ns, name) + "/status", body.dump(),
          "application/strategic-merge-patch+json", /*idempotent_=*/true};
}

k8sclient::request make_disruption_withdrawal_request(
    std::string_view ns, std::string_view name, std::string_view uid,
    std::chrono::system_clock::time_point transition_time) {
  const json condition = {{"type", informers::disruption_target_type},
                          {"status", "False"},
                          {"reason", nullptr},
                          {"message", nullptr},
                          {"lastTransitionTime", base::format_rfc3339(transition_time)}};
  const json body = {{"metadata", {{"uid", std::string(uid)}}},
                     {"status", {{"conditions", json::array({condition})}}}};
  return {http::verb::patch, pod_path(ns, name) + "/status", body.dump(),
          "application/strategic-merge-patch+json", /*idempotent_=*/true};
}

namespace {
/// Sends `req`; a transport error comes back with its message prefixed by `what`, the request
/// it failed (no secrets in either).
boost::asio::awaitable<base::result<k8sclient::response>> send(k8sclient::client& c,
                                                               k8sclient::request req,
                                                               std::function<bool()> cancelled,
                                                               std::string what) {
  req.cancelled = std::move(cancelled);
  auto resp = co_await c.send(std::move(req));
  if (!resp) {
    base::error err = resp.error();
    err.message = what + ": " + err.message;
    co_return err;
  }
  co_return resp;
}

/// 2xx as `ok`, 404 as not_found, a conflict naming the UID (`uid_conflict`) as uid_mismatch,
/// any other status as the API's error.
template <class Outcome>
base::result<Outcome> outcome_of(const k8sclient::response& resp, std::string_view what, Outcome ok,
                                 bool uid_conflict) {
  if (is_2xx(resp.status)) {
    return ok;
  }
  if (resp.status == 404) {
    return Outcome::not_found;
  }
  if (uid_conflict) {
    return Outcome::uid_mismatch;
  }
  return k8sclient::api_error(what, resp);
}
}  // namespace

pod_writer::pod_writer(k8sclient::client& c, base::clock& clock) : client_(c), clock_(clock) {}

boost::asio::awaitable<base::result<delete_outcome>> pod_writer::delete_pod(
    std::string ns, std::string name, std::string uid, std::function<bool()> cancelled) {
  const std::string what = "DELETE pod " + ns + "/" + name;
  auto resp =
      co_await send(client_, make_delete_pod_request(ns, name, uid), std::move(cancelled), what);
  if (!resp) {
    co_return resp.error();
  }
  // The only precondition we send is the UID: a conflict means the name is taken by another
  // pod, so the one we meant is gone.
  co_return outcome_of(*resp, what, delete_outcome::deleted, resp->status == 409);
}

boost::asio::awaitable<base::result<evict_answer>> pod_writer::evict_pod(
    std::string ns, std::string name, std::string uid, std::string api_version,
    std::function<bool()> cancelled) {
  const std::string what = "POST pod eviction " + ns + "/" + name;
  auto resp = co_await send(client_, make_evict_pod_request(ns, name, uid, api_version),
                            std::move(cancelled), what);
  if (!resp) {
    co_return resp.error();
  }
  const unsigned status = resp->status;
  if (status == 429) {
    co_return evict_answer{evict_outcome::blocked, k8sclient::status_message(resp->body)};
  }
  // A 409 is also what an eviction answers when its update of the budget keeps conflicting:
  // only one about the UID precondition means the pod we meant is gone.
  auto outcome = outcome_of(
      *resp, what, evict_outcome::evicted,
      status == 409 && (names_uid_cause(resp->body) ||
                        k8sclient::status_message(resp->body).find("UID") != std::string::npos));
  if (!outcome) {
    co_return outcome.error();
  }
  co_return evict_answer{*outcome, {}};
}

boost::asio::awaitable<base::result<std::string>> pod_writer::discover_eviction_version() {
  const std::string what = "GET /api/v1 (discovery of the Eviction API)";
  auto resp =
      co_await send(client_, {http::verb::get, "/api/v1", {}, "application/json", true}, {}, what);
  if (!resp) {
    co_return resp.error();
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

boost::asio::awaitable<base::result<bool>> pod_writer::discover_condition_observed_generation() {
  const std::string what = "GET " + std::string(openapi_v3_core_path) +
                           " (does the DisruptionTarget condition have observedGeneration?)";
  auto resp = co_await send(
      client_, {http::verb::get, std::string(openapi_v3_core_path), {}, "application/json", true},
      {}, what);
  using answer = base::result<bool>;  // (bool: construct errors in place, not by conversion)
  if (!resp) {
    co_return answer(boost::system::in_place_error, resp.error());
  }
  if (resp->status == 404) {
    co_return answer(boost::system::in_place_value, false);
  }
  if (!is_2xx(resp->status)) {
    co_return answer(boost::system::in_place_error, k8sclient::api_error(what, resp.value()));
  }
  if (const auto has = condition_schema_has_observed_generation(resp->body)) {
    co_return answer(boost::system::in_place_value, *has);
  }
  co_return answer(boost::system::in_place_error,
                   base::make_error(base::errc::unexpected_shape,
                                    what + ": no PodCondition schema in the document"));
}

boost::asio::awaitable<base::result<patch_outcome>> pod_writer::add_disruption_condition(
    std::string ns, std::string name, std::string uid, std::function<bool()> cancelled,
    bool keep_transition_time, std::optional<std::int64_t> observed_generation) {
  const std::string what = "PATCH pod status " + ns + "/" + name;
  auto resp =
      co_await send(client_,
                    make_disruption_condition_request(
                        ns, name, uid,
                        keep_transition_time
                            ? std::nullopt
                            : std::optional<std::chrono::system_clock::time_point>(clock_.wall()),
                        observed_generation),
                    std::move(cancelled), what);
  if (!resp) {
    co_return resp.error();
  }
  co_return outcome_of(*resp, what, patch_outcome::patched,
                       (resp->status == 422 || resp->status == 409) && names_uid_cause(resp->body));
}

boost::asio::awaitable<base::result<patch_outcome>> pod_writer::withdraw_disruption_condition(
    std::string ns, std::string name, std::string uid) {
  const std::string what = "PATCH pod status " + ns + "/" + name;
  auto resp = co_await send(
      client_, make_disruption_withdrawal_request(ns, name, uid, clock_.wall()), {}, what);
  if (!resp) {
    co_return resp.error();
  }
  co_return outcome_of(*resp, what, patch_outcome::patched,
                       (resp->status == 422 || resp->status == 409) && names_uid_cause(resp->body));
}

}  // namespace tec::writers
