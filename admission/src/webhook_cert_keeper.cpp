#include "tec/admission/webhook_cert_keeper.hpp"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>
#include <utility>

#include "tec/base/logger.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/k8sclient/paths.hpp"
#include "tec/serving/tls_credentials.hpp"

namespace tec::admission {

namespace {

namespace asio = boost::asio;
using json = nlohmann::json;
using namespace std::chrono_literals;

const std::shared_ptr<spdlog::logger>& logger() {
  static const std::shared_ptr<spdlog::logger> log = base::named_logger("certs");
  return log;
}

// Updates of the Secret tried in one check (each 409 re-reads it first).
constexpr int max_secret_writes = 3;
// One request to the API server, retries included.
constexpr auto request_deadline = 30s;

// The Secret's data keys, with the member of webhook_tls each holds.
constexpr std::pair<const char*, std::string webhook_tls::*> secret_keys[] = {
    {"ca.crt", &webhook_tls::ca_crt},
    {"ca.key", &webhook_tls::ca_key},
    {"tls.crt", &webhook_tls::tls_crt},
    {"tls.key", &webhook_tls::tls_key},
};

std::string encode_base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(std::max(n, 0)));
  return out;
}

base::error shape_error(std::string what) {
  return base::make_error(base::errc::unexpected_shape, std::move(what));
}

base::result<json> parse_object(std::string_view body, const char* what) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    return base::make_error(base::errc::malformed_json,
                            std::string(what) + ": not JSON: " + base::printable(body, 200));
  }
  if (!j.is_object()) {
    return shape_error(std::string(what) + ": not a JSON object");
  }
  return j;
}

std::string resource_version_of(const json& j) {
  const auto m = j.find("metadata");
  if (m == j.end() || !m->is_object()) {
    return {};
  }
  const auto rv = m->find("resourceVersion");
  return rv != m->end() && rv->is_string() ? rv->get<std::string>() : std::string();
}

}  // namespace

namespace webhook_json {

base::result<webhook_secret> parse_secret(std::string_view body) {
  auto j = parse_object(body, "the Secret");
  if (!j) {
    return j.error();
  }
  webhook_secret out;
  out.resource_version = resource_version_of(*j);
  if (out.resource_version.empty()) {
    return shape_error("the Secret has no metadata.resourceVersion");
  }
  if (const auto data = j->find("data"); data != j->end() && data->is_object()) {
    for (const auto& [key, member] : secret_keys) {
      const auto v = data->find(key);
      if (v != data->end() && v->is_string()) {
        out.tls.*member = k8sclient::decode_base64(v->get<std::string>()).value_or("");
      }
    }
  }
  out.object = std::string(body);
  return out;
}

base::result<std::string> secret_update(const webhook_secret& read, const webhook_tls& tls) {
  auto j = parse_object(read.object, "the Secret");
  if (!j) {
    return j.error();
  }
  if (const auto m = j->find("metadata"); m == j->end() || !m->is_object()) {
    return shape_error("the Secret has no metadata");
  }
  json& data = (*j)["data"];
  if (!data.is_object()) {
    data = json::object();
  }
  for (const auto& [key, member] : secret_keys) {
    data[key] = encode_base64(tls.*member);
  }
  (*j)["metadata"]["resourceVersion"] = read.resource_version;
  return j->dump();
}

base::result<std::optional<std::string>> ca_bundle_patch(std::string_view body,
                                                         std::string_view ca_pem) {
  auto j = parse_object(body, "the ValidatingWebhookConfiguration");
  if (!j) {
    return j.error();
  }
  const std::string rv = resource_version_of(*j);
  if (rv.empty()) {
    return shape_error("the ValidatingWebhookConfiguration has no metadata.resourceVersion");
  }
  const std::string bundle = encode_base64(ca_pem);
  json patch = json::array();
  patch.push_back({{"op", "replace"}, {"path", "/metadata/resourceVersion"}, {"value", rv}});
  const auto hooks = j->find("webhooks");
  if (hooks != j->end() && !hooks->is_array() && !hooks->is_null()) {
    return shape_error("the ValidatingWebhookConfiguration's webhooks is not a list");
  }
  if (hooks != j->end() && hooks->is_array()) {
    for (std::size_t i = 0; i < hooks->size(); ++i) {
      const json& hook = (*hooks)[i];
      const auto config = hook.is_object() ? hook.find("clientConfig") : hook.end();
      if (!hook.is_object() || config == hook.end() || !config->is_object()) {
        return shape_error("webhooks[" + std::to_string(i) + "] has no clientConfig");
      }
      const auto current = config->find("caBundle");
      if (current != config->end() && current->is_string() &&
          current->get<std::string>() == bundle) {
        continue;
      }
      patch.push_back({{"op", "add"},
                       {"path", "/webhooks/" + std::to_string(i) + "/clientConfig/caBundle"},
                       {"value", bundle}});
    }
  }
  if (patch.size() == 1) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>(patch.dump());
}

}  // namespace webhook_json

namespace {

class api_backend final : public webhook_cert_backend {
public:
  api_backend(k8sclient::client& api, const std::string& ns, const std::string& name,
              const std::string& webhook)
      : api_(api),
        secret_path_("/api/v1/namespaces/" + k8sclient::escape_path_segment(ns) + "/secrets/" +
                     k8sclient::escape_path_segment(name)),
        secret_what_("Secret " + ns + "/" + name),
        webhook_path_("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" +
                      k8sclient::escape_path_segment(webhook)),
        webhook_what_("ValidatingWebhookConfiguration " + webhook) {}

  asio::awaitable<base::result<webhook_secret>> get_secret() override {
    auto got = co_await send(boost::beast::http::verb::get, secret_path_, {}, {});
    if (!got) {
      co_return got.error();
    }
    if (got->status != 200) {
      co_return k8sclient::api_error("GET " + secret_what_, *got);
    }
    co_return webhook_json::parse_secret(got->body);
  }

  asio::awaitable<base::result<secret_write>> update_secret(const webhook_secret& read,
                                                            const webhook_tls& tls) override {
    auto body = webhook_json::secret_update(read, tls);
    if (!body) {
      co_return body.error();
    }
    auto put = co_await send(boost::beast::http::verb::put, secret_path_, std::move(*body),
                             "application/json");
    if (!put) {
      co_return put.error();
    }
    if (put->status == 409) {
      co_return secret_write::conflict;
    }
    if (put->status != 200) {
      co_return k8sclient::api_error("PUT " + secret_what_, *put);
    }
    co_return secret_write::written;
  }

  asio::awaitable<base::result<ca_bundle_sync>> sync_ca_bundle(std::string ca_pem) override {
    for (int attempt = 0;; ++attempt) {
      auto got = co_await send(boost::beast::http::verb::get, webhook_path_, {}, {});
      if (!got) {
        co_return got.error();
      }
      if (got->status == 404) {
        co_return ca_bundle_sync::missing;
      }
      if (got->status != 200) {
        co_return k8sclient::api_error("GET " + webhook_what_, *got);
      }
      auto patch = webhook_json::ca_bundle_patch(got->body, ca_pem);
      if (!patch) {
        co_return patch.error();
      }
      if (!*patch) {
        co_return ca_bundle_sync::unchanged;
      }
      auto sent = co_await send(boost::beast::http::verb::patch, webhook_path_, std::move(**patch),
                                "application/json-patch+json");
      if (!sent) {
        co_return sent.error();
      }
      if (sent->status == 200) {
        co_return ca_bundle_sync::patched;
      }
      if (sent->status != 409 || attempt == 1) {
        co_return k8sclient::api_error("PATCH " + webhook_what_, *sent);
      }
    }
  }

private:
  asio::awaitable<base::result<k8sclient::response>> send(boost::beast::http::verb verb,
                                                          std::string target, std::string body,
                                                          std::string content_type) {
    k8sclient::request req(
        verb, std::move(target), std::move(body),
        content_type.empty() ? std::string("application/json") : std::move(content_type),
        true);  // GET; a PUT and a PATCH under a resourceVersion
    req.deadline = api_.clock().now() + request_deadline;
    co_return co_await api_.send(std::move(req));
  }

  k8sclient::client& api_;
  const std::string secret_path_;
  const std::string secret_what_;
  const std::string webhook_path_;
  const std::string webhook_what_;
};

}  // namespace

std::shared_ptr<webhook_cert_backend> make_api_webhook_cert_backend(
    k8sclient::client& api, const std::string& secret_namespace, const std::string& secret_name,
    const std::string& webhook_configuration) {
  return std::make_shared<api_backend>(api, secret_namespace, secret_name, webhook_configuration);
}

webhook_cert_keeper::webhook_cert_keeper(std::shared_ptr<webhook_cert_backend> backend,
                                         std::shared_ptr<serving::tls_credentials> credentials,
                                         base::clock& clock, webhook_cert_keeper_options options)
    : backend_(std::move(backend)),
      credentials_(std::move(credentials)),
      clock_(clock),
      options_(std::move(options)) {}

void webhook_cert_keeper::warn(const std::string& problem) {
  if (problem == last_problem_) {
    logger()->debug("webhook certificate: still: {}", problem);
    return;
  }
  last_problem_ = problem;
  logger()->warn("webhook certificate: {}", problem);
}

void webhook_cert_keeper::serve(const webhook_tls& tls, webhook_cert_check& out) {
  if (tls == served_) {
    return;
  }
  if (tls.tls_crt == served_.tls_crt) {
    served_ = tls;  // a new ca.crt with the same serving certificate
    return;
  }
  if (auto used = credentials_->use_pem(tls.tls_crt, tls.tls_key); !used) {
    warn("cannot serve the Secret's certificate: " + used.error().message);
    return;
  }
  served_ = tls;
  out.swapped = true;
  const auto verdict = check_webhook_tls(tls, options_.policy, clock_.wall());
  logger()->info(
      "webhook certificate: the secure port serves the certificate of Secret {}/{} to new "
      "connections (expires {}, renewal due from {})",
      options_.secret_namespace, options_.secret_name,
      base::format_rfc3339(verdict.serving_not_after), base::format_rfc3339(verdict.renew_at));
}

void webhook_cert_keeper::note_ca_bundle(const base::result<ca_bundle_sync>& synced,
                                         webhook_cert_check& out) {
  const std::string what = "ValidatingWebhookConfiguration " + options_.webhook_configuration;
  if (!synced) {
    warn("cannot update the caBundle of " + what + ": " + synced.error().message + "; retrying");
    return;
  }
  out.ca_bundle = *synced;
  switch (*synced) {
    case ca_bundle_sync::missing:
      warn(what +
           " not found: nothing to put the caBundle in (the webhook is optional); looking "
           "again later");
      break;
    case ca_bundle_sync::patched:
      logger()->info("webhook certificate: the caBundle of {} is the Secret's ca.crt now", what);
      break;
    case ca_bundle_sync::unchanged:
      break;
  }
}

std::chrono::milliseconds webhook_cert_keeper::next_check(const webhook_tls& tls, bool ok) {
  if (!ok) {
    return options_.retry_interval;
  }
  const auto verdict = check_webhook_tls(tls, options_.policy, clock_.wall());
  const auto until_renewal =
      std::chrono::duration_cast<std::chrono::milliseconds>(verdict.renew_at - clock_.wall());
  return std::clamp(until_renewal, options_.retry_interval, options_.check_interval);
}

base::result<webhook_cert_keeper::renewal> webhook_cert_keeper::renew(
    const webhook_tls& read, const webhook_tls_verdict& verdict) {
  // What this replica serves, when still good, goes back in (the Secret was emptied, e.g. by
  // re-applying deploy/): the other replicas and the caBundle keep the same CA.
  if (!served_.empty() && check_webhook_tls(served_, options_.policy, clock_.wall()).action ==
                              webhook_tls_action::keep) {
    return renewal{served_, "the certificate this replica serves back"};
  }
  auto fresh = renew_webhook_tls(read, verdict.action, options_.policy, clock_.wall());
  if (!fresh) {
    return fresh.error();
  }
  return renewal{std::move(*fresh), verdict.action == webhook_tls_action::renew_all
                                        ? "a new CA and serving certificate"
                                        : "a new serving certificate"};
}

// One coroutine, calling no other coroutine of this file: clang-analyzer, following a call
// into a coroutine defined here, takes the callee's Asio frame for uninitialized
// (clang-analyzer-core.CallAndMessage in boost/asio/impl/awaitable.hpp).
asio::awaitable<webhook_cert_check> webhook_cert_keeper::check() {
  webhook_cert_check out;
  out.next_check = options_.retry_interval;
  const std::string secret = "Secret " + options_.secret_namespace + "/" + options_.secret_name;
  // The Secret's texts to serve: as read when still good, else renewed and written (a 409 reads
  // it again).
  std::optional<webhook_tls> tls;
  for (int write = 0; !tls; ++write) {
    auto read = co_await backend_->get_secret();
    if (!read) {
      warn(read.error().code == base::errc::not_found
               ? secret +
                     " does not exist: apply deploy/webhook.yaml (the controller "
                     "fills it but may not create it); retrying"
               : "cannot read the " + secret + ": " + read.error().message + "; retrying");
      co_return out;
    }
    const auto verdict = check_webhook_tls(read->tls, options_.policy, clock_.wall());
    if (verdict.action == webhook_tls_action::keep) {
      tls = std::move(read->tls);
      break;
    }
    if (write == max_secret_writes) {
      warn("the " + secret + " changed under each of " + std::to_string(max_secret_writes) +
           " updates; retrying");
      co_return out;
    }
    auto renewed = renew(read->tls, verdict);
    if (!renewed) {
      warn("cannot issue a certificate: " + renewed.error().message);
      co_return out;
    }
    auto written = co_await backend_->update_secret(*read, renewed->tls);
    if (!written) {
      warn("cannot write the renewed certificate to the " + secret + ": " +
           written.error().message + "; retrying");
      co_return out;
    }
    if (*written == secret_write::conflict) {
      out.conflicted = true;
      logger()->info(
          "webhook certificate: the {} changed since it was read (another replica wrote it); "
          "reading it again",
          secret);
      continue;
    }
    out.wrote = true;
    logger()->info("webhook certificate: wrote {} to the {} ({})", renewed->what, secret,
                   verdict.reason);
    tls = std::move(renewed->tls);
  }
  serve(*tls, out);
  const auto synced = co_await backend_->sync_ca_bundle(tls->ca_crt);
  note_ca_bundle(synced, out);
  out.ok = served_ == *tls && out.ca_bundle && *out.ca_bundle != ca_bundle_sync::missing;
  if (out.ok && !last_problem_.empty()) {
    logger()->info("webhook certificate: in order again (Secret {}/{}, caBundle of {})",
                   options_.secret_namespace, options_.secret_name, options_.webhook_configuration);
    last_problem_.clear();
  }
  out.next_check = next_check(*tls, out.ok);
  co_return out;
}

}  // namespace tec::admission
