#include "tec/kubectl_plugin/cluster.hpp"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/http/verb.hpp>
#include <exception>
#include <future>
#include <nlohmann/json.hpp>
#include <utility>

#include "tec/base/error.hpp"
#include "tec/controller/matching.hpp"
#include "tec/informers/decode.hpp"
#include "tec/informers/namespaces.hpp"
#include "tec/k8sclient/paths.hpp"

namespace tec::kubectl_plugin {
namespace {

using json = nlohmann::json;
using base::errc;
using base::make_error;

constexpr std::size_t page_limit = 500;
constexpr std::size_t max_pages = 10'000;  // 5 million objects: a bound, not a real cluster

base::result<json> parse_json(std::string_view body, std::string_view what) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) {
    return make_error(errc::malformed_json, std::string(what) + ": not JSON");
  }
  return doc;
}

std::string string_at(const json& obj, const char* key) {
  if (!obj.is_object()) {
    return {};
  }
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// The API's Status message of a failed request, as kubectl prints it ("Error from server").
base::error status_error(const k8sclient::response& r, std::string_view what) {
  auto status = informers::decode_status(r.body);
  std::string message = status && !status.value().message.empty()
                            ? status.value().message
                            : std::to_string(r.status) + " reading " + std::string(what);
  const errc code = r.status == 404   ? errc::not_found
                    : r.status == 401 ? errc::unauthorized
                    : r.status == 403 ? errc::forbidden
                                      : errc::http_status;
  return make_error(code, base::printable(message, 512), static_cast<int>(r.status));
}

base::result<controller::label_selector> decode_selector(const json& sel, const std::string& at) {
  controller::label_selector out;
  if (sel.is_null()) {
    return out;
  }
  if (!sel.is_object()) {
    return make_error(errc::unexpected_shape, at + ": not an object");
  }
  if (const auto ml = sel.find("matchLabels"); ml != sel.end() && ml->is_object()) {
    for (const auto& [k, v] : ml->items()) {
      if (!v.is_string()) {
        return make_error(
            errc::unexpected_shape,
            std::string(at).append(".matchLabels.").append(k).append(": not a string"));
      }
      out.match_labels.emplace_back(k, v.get<std::string>());
    }
  }
  if (const auto me = sel.find("matchExpressions"); me != sel.end() && me->is_array()) {
    for (const auto& e : *me) {
      controller::label_requirement r;
      r.key = string_at(e, "key");
      const std::string op = string_at(e, "operator");
      if (op == "In") {
        r.operator_ = controller::label_requirement::op::in;
      } else if (op == "NotIn") {
        r.operator_ = controller::label_requirement::op::not_in;
      } else if (op == "Exists") {
        r.operator_ = controller::label_requirement::op::exists;
      } else if (op == "DoesNotExist") {
        r.operator_ = controller::label_requirement::op::does_not_exist;
      } else {
        return make_error(errc::unexpected_shape, at + ".matchExpressions: unknown operator \"" +
                                                      base::printable(op, 64) + "\"");
      }
      if (const auto vs = e.find("values"); vs != e.end() && vs->is_array()) {
        for (const auto& v : *vs) {
          if (v.is_string()) {
            r.values.push_back(v.get<std::string>());
          }
        }
      }
      out.match_expressions.push_back(std::move(r));
    }
  }
  return out;
}

// Runs `aw` on `io` to completion on this thread; rethrows what it threw.
template <class T>
T run_sync(boost::asio::io_context& io, boost::asio::awaitable<T> aw) {
  std::future<T> result = boost::asio::co_spawn(io, std::move(aw), boost::asio::use_future);
  while (result.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
    if (io.stopped()) {
      io.restart();
    }
    io.run_one();
  }
  return result.get();
}

}  // namespace

std::string kubeconfig_path(const std::string& flag,
                            const std::optional<std::string>& kubeconfig_env,
                            const std::optional<std::string>& home) {
  if (!flag.empty()) {
    return flag;
  }
  if (kubeconfig_env && !kubeconfig_env->empty()) {
    return kubeconfig_env->substr(0, kubeconfig_env->find(':'));
  }
  return (home ? *home : std::string{}) + "/.kube/config";
}

bool covers(const pdb_view& pdb, std::string_view namespace_, std::string_view labels) {
  if (pdb.namespace_ != namespace_) {
    return false;
  }
  if (pdb.selector.empty()) {
    return pdb.selects_all;
  }
  return controller::selects(pdb.selector, labels);
}

base::result<std::vector<pdb_view>> decode_pdb_list(std::string_view body, bool v1) {
  auto doc = parse_json(body, "PodDisruptionBudget list");
  if (!doc) {
    return doc.error();
  }
  const auto items = doc.value().find("items");
  std::vector<pdb_view> out;
  if (items == doc.value().end() || !items->is_array()) {
    return out;
  }
  for (std::size_t i = 0; i < items->size(); ++i) {
    const json& item = (*items)[i];
    const std::string at = "items[" + std::to_string(i) + "]";
    pdb_view p;
    const json meta = item.value("metadata", json::object());
    p.namespace_ = string_at(meta, "namespace");
    p.name = string_at(meta, "name");
    const json spec = item.value("spec", json::object());
    auto sel = decode_selector(spec.is_object() ? spec.value("selector", json()) : json(),
                               at + ".spec.selector");
    if (!sel) {
      return sel.error();
    }
    p.selector = std::move(sel).value();
    p.selects_all = v1;
    const json status = item.value("status", json::object());
    if (status.is_object()) {
      if (const auto d = status.find("disruptionsAllowed");
          d != status.end() && d->is_number_integer()) {
        p.disruptions_allowed = d->get<std::int64_t>();
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

base::result<std::vector<event_view>> decode_event_list(std::string_view body) {
  auto doc = parse_json(body, "Event list");
  if (!doc) {
    return doc.error();
  }
  std::vector<event_view> out;
  const auto items = doc.value().find("items");
  if (items == doc.value().end() || !items->is_array()) {
    return out;
  }
  for (const json& item : *items) {
    event_view e;
    const json meta = item.value("metadata", json::object());
    e.namespace_ = string_at(meta, "namespace");
    const json involved = item.value("involvedObject", json::object());
    e.pod = string_at(involved, "name");
    e.pod_uid = string_at(involved, "uid");
    e.message = string_at(item, "message");
    e.last_seen = string_at(item, "lastTimestamp");
    if (e.last_seen.empty()) {
      e.last_seen = string_at(item, "eventTime");
    }
    if (e.last_seen.empty()) {
      e.last_seen = string_at(item, "firstTimestamp");
    }
    out.push_back(std::move(e));
  }
  return out;
}

base::result<std::optional<std::string>> decode_configmap_value(std::string_view body,
                                                                std::string_view key) {
  auto doc = parse_json(body, "ConfigMap");
  if (!doc) {
    return doc.error();
  }
  const json data = doc.value().value("data", json::object());
  if (!data.is_object()) {
    return std::optional<std::string>{};
  }
  const auto it = data.find(std::string(key));
  if (it == data.end() || !it->is_string()) {
    return std::optional<std::string>{};
  }
  return std::optional<std::string>{it->get<std::string>()};
}

base::result<std::string> decode_lease_holder(std::string_view body) {
  auto doc = parse_json(body, "Lease");
  if (!doc) {
    return doc.error();
  }
  return string_at(doc.value().value("spec", json::object()), "holderIdentity");
}

cluster_reader::cluster_reader(k8sclient::rest_config config, std::chrono::milliseconds timeout)
    : config_(std::move(config)), timeout_(timeout) {
  k8sclient::client_options options;
  options.qps = 0;  // one command's few requests
  options.max_connections = 2;
  options.request_timeout = timeout_;
  options.dial_timeout = std::min<std::chrono::milliseconds>(timeout_, options.dial_timeout);
  options.max_retries = 2;
  options.user_agent = "kubectl-taint_eviction";
  options.max_response_bytes = std::size_t{64} << 20U;
  client_ = std::make_unique<k8sclient::client>(io_.get_executor(), config_, std::move(options));
}

cluster_reader::~cluster_reader() {
  client_->shutdown();
  io_.restart();
  io_.poll();
}

base::result<k8sclient::response> cluster_reader::get(const std::string& target) {
  k8sclient::request req(boost::beast::http::verb::get, target, {}, "application/json", true);
  req.deadline = std::chrono::steady_clock::now() + timeout_;
  return run_sync(io_, client_->send(std::move(req)));
}

base::result<std::optional<std::string>> cluster_reader::get_object(const std::string& target,
                                                                    std::string_view what) {
  auto r = get(target);
  if (!r) {
    return r.error();
  }
  if (r.value().status == 404) {
    return std::optional<std::string>{};
  }
  if (r.value().status / 100 != 2) {
    return status_error(r.value(), what);
  }
  return std::optional<std::string>{std::move(r.value().body)};
}

template <class Record, class Decode>
base::result<std::vector<Record>> cluster_reader::list(const std::string& path,
                                                       std::string_view query, Decode decode) {
  std::vector<Record> out;
  std::string cont;
  for (std::size_t page = 0; page < max_pages; ++page) {
    std::string target = path + "?limit=" + std::to_string(page_limit);
    if (!query.empty()) {
      target += "&" + std::string(query);
    }
    if (!cont.empty()) {
      target += "&continue=" + k8sclient::escape_path_segment(cont);
    }
    auto r = get(target);
    if (!r) {
      return r.error();
    }
    if (r.value().status / 100 != 2) {
      return status_error(r.value(), path);
    }
    auto decoded = decode(r.value().body);
    if (!decoded) {
      return decoded.error();
    }
    for (auto& item : decoded.value().items) {
      out.push_back(std::move(item));
    }
    cont = decoded.value().continue_token;
    if (cont.empty()) {
      return out;
    }
  }
  return make_error(errc::response_too_large,
                    path + ": more than " + std::to_string(max_pages) + " pages");
}

base::result<std::vector<controller::node_view>> cluster_reader::nodes(
    std::string_view label_selector) {
  std::string query;
  if (!label_selector.empty()) {
    query = "labelSelector=" + k8sclient::escape_path_segment(label_selector);
  }
  auto records = list<informers::node_record>("/api/v1/nodes", query, informers::decode_node_list);
  if (!records) {
    return records.error();
  }
  std::vector<controller::node_view> out;
  out.reserve(records.value().size());
  for (auto& r : records.value()) {
    out.push_back(std::move(r.node));
  }
  return out;
}

base::result<std::optional<controller::node_view>> cluster_reader::node(std::string_view name) {
  auto body = get_object("/api/v1/nodes/" + k8sclient::escape_path_segment(name), "node");
  if (!body) {
    return body.error();
  }
  if (!body.value()) {
    return std::optional<controller::node_view>{};
  }
  auto n = informers::decode_node(*body.value());
  if (!n) {
    return n.error();
  }
  return std::optional<controller::node_view>{std::move(n.value().node)};
}

base::result<std::vector<controller::pod_view>> cluster_reader::pods(
    std::string_view namespace_, std::string_view field_selector) {
  informers::keep_pod_labels(true);
  const std::string path =
      namespace_.empty()
          ? std::string("/api/v1/pods")
          : "/api/v1/namespaces/" + k8sclient::escape_path_segment(namespace_) + "/pods";
  std::string query;
  if (!field_selector.empty()) {
    query = "fieldSelector=" + k8sclient::escape_path_segment(field_selector);
  }
  auto records = list<informers::pod_record>(path, query, informers::decode_pod_list);
  if (!records) {
    return records.error();
  }
  std::vector<controller::pod_view> out;
  out.reserve(records.value().size());
  for (auto& r : records.value()) {
    out.push_back(std::move(r.pod));
  }
  return out;
}

base::result<std::optional<controller::pod_view>> cluster_reader::pod(std::string_view namespace_,
                                                                      std::string_view name) {
  informers::keep_pod_labels(true);
  auto body = get_object("/api/v1/namespaces/" + k8sclient::escape_path_segment(namespace_) +
                             "/pods/" + k8sclient::escape_path_segment(name),
                         "pod");
  if (!body) {
    return body.error();
  }
  if (!body.value()) {
    return std::optional<controller::pod_view>{};
  }
  auto p = informers::decode_pod(*body.value());
  if (!p) {
    return p.error();
  }
  return std::optional<controller::pod_view>{std::move(p.value().pod)};
}

base::result<std::vector<std::string>> cluster_reader::opted_out_namespaces() {
  auto records =
      list<informers::namespace_record>("/api/v1/namespaces", {}, informers::decode_namespace_list);
  if (!records) {
    return records.error();
  }
  std::vector<std::string> out;
  for (const auto& r : records.value()) {
    if (r.opted_out) {
      out.push_back(r.name);
    }
  }
  return out;
}

base::result<std::optional<std::string>> cluster_reader::configmap_value(
    std::string_view namespace_, std::string_view name, std::string_view key) {
  auto body = get_object("/api/v1/namespaces/" + k8sclient::escape_path_segment(namespace_) +
                             "/configmaps/" + k8sclient::escape_path_segment(name),
                         "configmap");
  if (!body) {
    return body.error();
  }
  if (!body.value()) {
    return std::optional<std::string>{};
  }
  return decode_configmap_value(*body.value(), key);
}

base::result<std::vector<pdb_view>> cluster_reader::pdbs() {
  for (const bool v1 : {true, false}) {
    const std::string path =
        v1 ? "/apis/policy/v1/poddisruptionbudgets" : "/apis/policy/v1beta1/poddisruptionbudgets";
    auto r = get(path);
    if (!r) {
      return r.error();
    }
    if (r.value().status == 404 && v1) {
      continue;
    }
    if (r.value().status / 100 != 2) {
      return status_error(r.value(), "poddisruptionbudgets");
    }
    return decode_pdb_list(r.value().body, v1);
  }
  return std::vector<pdb_view>{};
}

base::result<std::optional<std::string>> cluster_reader::lease_holder(std::string_view namespace_,
                                                                      std::string_view name) {
  auto body = get_object("/apis/coordination.k8s.io/v1/namespaces/" +
                             k8sclient::escape_path_segment(namespace_) + "/leases/" +
                             k8sclient::escape_path_segment(name),
                         "lease");
  if (!body || !body.value()) {
    return body;
  }
  auto holder = decode_lease_holder(*body.value());
  if (!holder) {
    return holder.error();
  }
  return std::optional<std::string>{std::move(holder).value()};
}

base::result<std::vector<event_view>> cluster_reader::events(std::string_view namespace_,
                                                             std::string_view reason) {
  const std::string path =
      namespace_.empty()
          ? std::string("/api/v1/events")
          : "/api/v1/namespaces/" + k8sclient::escape_path_segment(namespace_) + "/events";
  auto r = get(path +
               "?fieldSelector=" + k8sclient::escape_path_segment("reason=" + std::string(reason)));
  if (!r) {
    return r.error();
  }
  if (r.value().status / 100 != 2) {
    return status_error(r.value(), "events");
  }
  return decode_event_list(r.value().body);
}

}  // namespace tec::kubectl_plugin
