#include "tec/admission/review.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <utility>

#include "tec/base/error.hpp"
#include "tec/informers/decode.hpp"

namespace tec::admission {
namespace {

using json = nlohmann::json;

base::error shape_error(std::string_view path, std::string_view what) {
  return base::make_error(
      base::errc::unexpected_shape,
      base::printable("AdmissionReview: " + std::string(path) + ": " + std::string(what),
                      max_error_bytes));
}

/// The string at `key` of object `o`; nullptr when absent or null; an error when not a string.
base::result<const std::string*> string_field(const json& o, const char* key,
                                              std::string_view path) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    return static_cast<const std::string*>(nullptr);
  }
  if (!it->is_string()) {
    return shape_error(path, "expected a string");
  }
  return &it->get_ref<const std::string&>();
}

/// The object at `key` of `o`; nullptr when absent or null; an error when not an object.
base::result<const json*> object_field(const json& o, const char* key, std::string_view path) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    return static_cast<const json*>(nullptr);
  }
  if (!it->is_object()) {
    return shape_error(path, "expected an object");
  }
  return &*it;
}

/// A Node of the request: decoded by the informers' decoder (name and taints); the
/// acknowledgement read here.
base::result<node_object> decode_node_object(const json& o, std::string_view path) {
  if (!o.is_object()) {
    return shape_error(path, "expected an object");
  }
  if (const auto kind = string_field(o, "kind", std::string(path) + ".kind"); !kind) {
    return kind.error();
  } else if (*kind != nullptr && **kind != "Node") {
    return shape_error(std::string(path) + ".kind", "expected Node, got \"" + **kind + "\"");
  }
  auto decoded = informers::decode_node(o.dump(-1, ' ', false, json::error_handler_t::replace));
  if (!decoded) {
    return shape_error(path, decoded.error().message);
  }
  node_object out{.node = std::move(decoded->node), .acknowledged = false};
  const auto meta = o.find("metadata");
  if (meta != o.end() && meta->is_object()) {
    const auto annotations = meta->find("annotations");
    if (annotations != meta->end() && annotations->is_object()) {
      const auto ack = annotations->find(std::string(acknowledge_annotation));
      out.acknowledged = ack != annotations->end() && ack->is_string() &&
                         ack->get_ref<const std::string&>() == acknowledge_value;
    }
  }
  return out;
}

/// `body` parsed, bounded: at most max_review_bytes, nested at most max_review_depth deep
/// (deeper values are dropped as they are parsed, never recursing: the callback parser builds
/// the tree with an explicit stack, and the body is refused, so nothing later meets the depth).
base::result<json> parse_bounded(std::string_view body) {
  if (body.size() > max_review_bytes) {
    return base::make_error(base::errc::response_too_large,
                            "AdmissionReview: the body is " + std::to_string(body.size()) +
                                " bytes, more than " + std::to_string(max_review_bytes));
  }
  bool too_deep = false;
  const auto deep_error = [] {
    return base::make_error(
        base::errc::malformed_json,
        "AdmissionReview: nested more than " + std::to_string(max_review_depth) + " levels deep");
  };
  json root;
  try {
    root = json::parse(
        body,
        [&too_deep](int depth, json::parse_event_t /*event*/, json& /*parsed*/) {
          if (static_cast<std::size_t>(depth) > max_review_depth) {
            too_deep = true;
            return false;
          }
          return true;
        },
        true, false);
  } catch (const json::exception& e) {
    if (too_deep) {  // the first problem, met before the syntax error
      return deep_error();
    }
    return base::make_error(
        base::errc::malformed_json,
        base::printable(std::string("AdmissionReview: not JSON: ") + e.what(), max_error_bytes));
  }
  if (too_deep) {
    return deep_error();
  }
  return root;
}

/// The envelope of `root`: its apiVersion into `out`, and its request object.
base::result<const json*> decode_envelope(const json& root, review_request& out) {
  if (!root.is_object()) {
    return shape_error("(root)", "expected an AdmissionReview object");
  }
  const auto version = string_field(root, "apiVersion", "apiVersion");
  if (!version) {
    return version.error();
  }
  if (*version == nullptr || (**version != api_version_v1 && **version != api_version_v1beta1)) {
    return shape_error("apiVersion",
                       "expected " + std::string(api_version_v1) + " or " +
                           std::string(api_version_v1beta1) +
                           (*version == nullptr ? ", got none" : ", got \"" + **version + "\""));
  }
  out.api_version = **version;
  if (const auto kind = string_field(root, "kind", "kind");
      !kind || *kind == nullptr || **kind != "AdmissionReview") {
    return kind ? shape_error("kind", "expected AdmissionReview") : kind.error();
  }
  const auto request = object_field(root, "request", "request");
  if (!request) {
    return request.error();
  }
  if (*request == nullptr) {
    return shape_error("request", "missing");
  }
  return *request;
}

/// request.kind: a core Node, or an error.
std::optional<base::error> check_kind(const json& req) {
  const auto kind = object_field(req, "kind", "request.kind");
  if (!kind) {
    return kind.error();
  }
  if (*kind == nullptr) {
    return shape_error("request.kind", "missing");
  }
  const auto group = string_field(**kind, "group", "request.kind.group");
  const auto kind_name = string_field(**kind, "kind", "request.kind.kind");
  if (!group || !kind_name) {
    return group ? kind_name.error() : group.error();
  }
  if ((*group != nullptr && !(*group)->empty()) || *kind_name == nullptr || **kind_name != "Node") {
    return shape_error("request.kind", "expected a core Node (this webhook reviews nodes only)");
  }
  return std::nullopt;
}

/// request.operation.
base::result<operation> decode_operation(const json& req) {
  const auto op = string_field(req, "operation", "request.operation");
  if (!op) {
    return op.error();
  }
  if (*op == nullptr) {
    return shape_error("request.operation", "missing");
  }
  if (**op == "CREATE") {
    return operation::create;
  }
  if (**op == "UPDATE") {
    return operation::update;
  }
  if (**op == "DELETE") {
    return operation::delete_;
  }
  if (**op == "CONNECT") {
    return operation::connect;
  }
  return shape_error("request.operation",
                     "expected CREATE, UPDATE, DELETE or CONNECT, got \"" + **op + "\"");
}

/// The Node at `key` of `req` into `into`; absent: an error when `required`.
std::optional<base::error> decode_node_at(const json& req, const char* key, std::string_view path,
                                          bool required, std::optional<node_object>& into) {
  const auto it = req.find(key);
  if (it == req.end() || it->is_null()) {
    return required ? std::optional<base::error>(shape_error(path, "missing")) : std::nullopt;
  }
  auto node = decode_node_object(*it, path);
  if (!node) {
    return node.error();
  }
  into = std::move(*node);
  return std::nullopt;
}

/// The request's uid, kind, operation, user and Nodes into `out`.
std::optional<base::error> decode_request(const json& req, review_request& out) {
  const auto uid = string_field(req, "uid", "request.uid");
  if (!uid) {
    return uid.error();
  }
  if (*uid == nullptr || (*uid)->empty()) {
    return shape_error("request.uid", "missing");
  }
  out.uid = **uid;
  if (auto e = check_kind(req)) {
    return e;
  }
  const auto op = decode_operation(req);
  if (!op) {
    return op.error();
  }
  out.op = *op;
  if (const auto user = object_field(req, "userInfo", "request.userInfo"); !user) {
    return user.error();
  } else if (*user != nullptr) {
    const auto name = string_field(**user, "username", "request.userInfo.username");
    if (!name) {
      return name.error();
    }
    if (*name != nullptr) {
      out.user = **name;
    }
  }
  if (out.op == operation::create || out.op == operation::update) {
    if (auto e = decode_node_at(req, "object", "request.object", true, out.object)) {
      return e;
    }
  }
  if (out.op == operation::update) {
    return decode_node_at(req, "oldObject", "request.oldObject", true, out.old_object);
  }
  return std::nullopt;
}

}  // namespace

base::result<review_request> decode_review(std::string_view body) {
  const auto root = parse_bounded(body);
  if (!root) {
    return root.error();
  }
  review_request out;
  const auto req = decode_envelope(*root, out);
  if (!req) {
    return req.error();
  }
  if (auto e = decode_request(**req, out)) {
    return *e;
  }
  return out;
}

std::string encode_review(const review_response& response) {
  json r = {{"uid", response.uid}, {"allowed", response.allowed}};
  if (!response.warnings.empty()) {
    r["warnings"] = response.warnings;
  }
  if (!response.allowed) {
    r["status"] = {{"code", response.code}, {"message", response.message}};
  }
  const json review = {
      {"apiVersion", response.api_version}, {"kind", "AdmissionReview"}, {"response", r}};
  // Replace, not throw, should a message carry bytes that are not UTF-8.
  return review.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tec::admission
