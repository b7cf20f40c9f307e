#include "tec/k8s/pod_writer.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/status.hpp>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "tec/k8s/records.hpp"

namespace tec::k8s {
namespace {

using nlohmann::json;
namespace http = boost::beast::http;

constexpr std::size_t max_body_in_message = 200;

/// The Status object of an error response, or a discarded json when the body is not one.
json parse_status(std::string_view body) {
  json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!status.is_object()) {
    return json(json::value_t::discarded);
  }
  return status;
}

/// The server's explanation, clipped and escaped for logs (printable()): a hostile or broken
/// server must not write huge or forged log lines through it.
std::string status_message(std::string_view body) {
  const json status = parse_status(body);
  if (!status.is_discarded()) {
    const auto it = status.find("message");
    if (it != status.end() && it->is_string()) {
      return printable(it->get_ref<const std::string&>());
    }
  }
  return printable(body, max_body_in_message);
}

/// True when a rejected write names metadata.uid as the reason: the object under this name is
/// not the one we meant.
bool names_uid_cause(std::string_view body) {
  const json status = parse_status(body);
  if (status.is_discarded()) {
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
  path += escape_path_segment(ns);
  path += "/pods/";
  path += escape_path_segment(name);
  return path;
}

bool is_2xx(unsigned status) noexcept {
  return status >= 200 && status < 300;
}

}  // namespace

errc errc_for_status(unsigned status) noexcept {
  switch (status) {
    case 401:
      return errc::unauthorized;
    case 403:
      return errc::forbidden;
    case 404:
      return errc::not_found;
    case 409:
      return errc::conflict;
    case 410:
      return errc::gone;
    case 429:
      return errc::too_many_requests;
    default:
      return status >= 500 && status < 600 ? errc::server_error : errc::http_status;
  }
}

error api_error(std::string_view what, const response& resp) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(resp.status));
  std::string message(what);
  message += ": ";
  message += std::to_string(resp.status);
  if (!reason.empty()) {
    message += ' ';
    message.append(reason.data(), reason.size());
  }
  const std::string server_says = status_message(resp.body);
  if (!server_says.empty()) {
    message += ": ";
    message += server_says;
  }
  return make_error(errc_for_status(resp.status), std::move(message),
                    static_cast<int>(resp.status));
}

std::string error_reason(const error& err) {
  if (err.code == make_error_code(errc::http_status)) {
    return "http_" + std::to_string(err.http_status);
  }
  if (err.code.category() != error_category()) {
    return "other";
  }
  switch (static_cast<errc>(err.code.value())) {
    case errc::ok:
      return "ok";
    case errc::config_invalid:
      return "config_invalid";
    case errc::malformed_json:
      return "malformed_json";
    case errc::unexpected_shape:
      return "unexpected_shape";
    case errc::line_too_long:
      return "line_too_long";
    case errc::http_status:
      return "http_status";
    case errc::gone:
      return "gone";
    case errc::unauthorized:
      return "unauthorized";
    case errc::forbidden:
      return "forbidden";
    case errc::not_found:
      return "not_found";
    case errc::conflict:
      return "conflict";
    case errc::too_many_requests:
      return "too_many_requests";
    case errc::server_error:
      return "server_error";
    case errc::timeout:
      return "timeout";
    case errc::connection_failed:
      return "connection_failed";
    case errc::shutting_down:
      return "shutting_down";
    case errc::cancelled:
      return "cancelled";
    case errc::response_too_large:
      return "response_too_large";
  }
  return "other";
}

std::string format_rfc3339(std::chrono::system_clock::time_point t, bool microseconds) {
  using namespace std::chrono;
  const auto since_epoch = t.time_since_epoch();
  auto secs = duration_cast<seconds>(since_epoch);
  auto micros = duration_cast<std::chrono::microseconds>(since_epoch - secs).count();
  if (micros < 0) {  // Before 1970: floor, not truncate.
    secs -= seconds{1};
    micros += 1'000'000;
  }
  const auto tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::array<char, 40> buf{};
  std::size_t n = std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf.data(), n);
  if (microseconds) {
    n = static_cast<std::size_t>(
        std::snprintf(buf.data(), buf.size(), ".%06lld", static_cast<long long>(micros)));
    out.append(buf.data(), n);
  }
  out += 'Z';
  return out;
}

std::string escape_path_segment(std::string_view segment) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(segment.size());
  for (const char ch : segment) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4U];
      out += hex[c & 0x0FU];
    }
  }
  return out;
}

request make_delete_pod_request(std::string_view ns, std::string_view name, std::string_view uid) {
  const json body = {{"kind", "DeleteOptions"},
                     {"apiVersion", "v1"},
                     {"preconditions", {{"uid", std::string(uid)}}}};
  request req;
  req.method = http::verb::delete_;
  req.target = pod_path(ns, name);
  req.body = body.dump();
  req.content_type = "application/json";
  req.idempotent = true;
  return req;
}

request make_disruption_condition_request(
    std::string_view ns, std::string_view name, std::string_view uid,
    std::optional<std::chrono::system_clock::time_point> transition_time) {
  json condition = {{"type", disruption_target_type},
                    {"status", "True"},
                    {"reason", taint_manager_reason},
                    {"message", taint_manager_message}};
  if (transition_time) {
    condition["lastTransitionTime"] = format_rfc3339(*transition_time);
  }
  const json body = {{"metadata", {{"uid", std::string(uid)}}},
                     {"status", {{"conditions", json::array({condition})}}}};
  request req;
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
error with_context(const std::string& what, error err) {
  err.message = what + ": " + err.message;
  return err;
}
}  // namespace

pod_writer::pod_writer(client& c, wall_clock now) : client_(c), now_(std::move(now)) {}

boost::asio::awaitable<result<delete_outcome>> pod_writer::delete_pod(
    std::string ns, std::string name, std::string uid, std::function<bool()> cancelled) {
  request req = make_delete_pod_request(ns, name, uid);
  req.cancelled = std::move(cancelled);
  auto resp = co_await client_.send(std::move(req));
  const std::string what = "DELETE pod " + ns + "/" + name;
  if (!resp) {
    co_return with_context(what, resp.err());
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
  co_return api_error(what, resp.value());
}

boost::asio::awaitable<result<patch_outcome>> pod_writer::add_disruption_condition(
    std::string ns, std::string name, std::string uid, std::function<bool()> cancelled,
    bool keep_transition_time) {
  request req = make_disruption_condition_request(
      ns, name, uid,
      keep_transition_time ? std::nullopt
                           : std::optional<std::chrono::system_clock::time_point>(now_()));
  req.cancelled = std::move(cancelled);
  auto resp = co_await client_.send(std::move(req));
  const std::string what = "PATCH pod status " + ns + "/" + name;
  if (!resp) {
    co_return with_context(what, resp.err());
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
  co_return api_error(what, resp.value());
}

}  // namespace tec::k8s
