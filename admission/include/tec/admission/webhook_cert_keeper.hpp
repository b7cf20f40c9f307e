#pragma once

// Keeps the admission webhook's serving certificate without cert-manager (issue 32): every
// replica reads the certificates from one Secret in its namespace, renews them when they are
// missing, broken or due (webhook_certs.hpp says when), writes them back under the Secret's
// resourceVersion (on 409 another replica wrote first: its certificates are read and used), has
// the secure port serve them from its next connection on (serving::tls_credentials::use_pem, no
// restart), and keeps the caBundle of every webhook of our ValidatingWebhookConfiguration equal
// to the Secret's ca.crt. Each check says when the next is due: check_interval, sooner after a
// failure or when the renewal is due sooner (the daemon runs them with async::repeat, the
// first at start).
//
// Least privilege: get and update on that one Secret (RBAC cannot limit create by name, so
// deploy/ ships the Secret empty and the keeper only fills it), get and patch on that one
// webhook configuration. A missing webhook configuration is a warning, not an error (the
// webhook is optional), and is looked for again at the next check.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/admission/webhook_certs.hpp"
#include "tec/base/clock.hpp"
#include "tec/base/result.hpp"

namespace tec::k8sclient {
class client;
}  // namespace tec::k8sclient

namespace tec::serving {
class tls_credentials;
}  // namespace tec::serving

namespace tec::admission {

/// The Secret as read: its certificate texts and what an update needs.
struct webhook_secret {
  std::string resource_version;
  webhook_tls tls;
  /// The object as read (JSON), which an update writes back with new data.
  std::string object;
};

enum class secret_write : unsigned char {
  written,
  conflict,  ///< 409: the Secret changed since it was read (another replica wrote it).
};

enum class ca_bundle_sync : unsigned char {
  unchanged,  ///< Every webhook's caBundle already was ca.crt.
  patched,
  missing,  ///< No such ValidatingWebhookConfiguration (404).
};

/// The cluster side of the keeper: the seam its tests replace.
/// Thread: called from the keeper's coroutine; the awaitables resume on its executor.
class webhook_cert_backend {
public:
  virtual ~webhook_cert_backend() = default;
  /// GET the Secret; errc::not_found when it does not exist, other errors as the client gives
  /// them (api_error for a non-2xx answer).
  virtual boost::asio::awaitable<base::result<webhook_secret>> get_secret() = 0;
  /// PUT `read` with `tls` as its ca.crt, ca.key, tls.crt and tls.key (other data keys kept),
  /// under read's resourceVersion.
  virtual boost::asio::awaitable<base::result<secret_write>> update_secret(
      const webhook_secret& read, const webhook_tls& tls) = 0;
  /// Sets `webhooks[*].clientConfig.caBundle` of the webhook configuration to `ca_pem`
  /// where it differs (one JSON patch under the resourceVersion read; a conflict is read and
  /// tried again once).
  virtual boost::asio::awaitable<base::result<ca_bundle_sync>> sync_ca_bundle(
      std::string ca_pem) = 0;
};

/// The Secret and webhook configuration bodies (core/v1 Secret, admissionregistration.k8s.io/v1
/// ValidatingWebhookConfiguration), apart from the transport. Bad JSON or shapes are errors,
/// bounded and escaped; a data value that is not base64 reads as empty (and so is renewed).
namespace webhook_json {
base::result<webhook_secret> parse_secret(std::string_view body);
/// `read.object` with its data's four keys set to `tls` (base64), other keys as they were.
base::result<std::string> secret_update(const webhook_secret& read, const webhook_tls& tls);
/// The JSON patch that sets every webhook's caBundle to `ca_pem` and the resourceVersion to
/// the one in `body` (so that the API server refuses it with 409 if the object changed), or
/// nullopt when every caBundle already is `ca_pem`.
base::result<std::optional<std::string>> ca_bundle_patch(std::string_view body,
                                                         std::string_view ca_pem);
}  // namespace webhook_json

/// The backend through the daemon's API client (borrowed: it must outlive the backend). Its
/// calls must run on the client's executor.
std::shared_ptr<webhook_cert_backend> make_api_webhook_cert_backend(
    k8sclient::client& api, const std::string& secret_namespace, const std::string& secret_name,
    const std::string& webhook_configuration);

struct webhook_cert_keeper_options {
  std::string secret_namespace;  ///< For the log lines.
  std::string secret_name;
  std::string webhook_configuration;
  webhook_cert_policy policy;
  /// Between two checks when all went well (sooner when the serving certificate's renewal
  /// window opens before that).
  std::chrono::milliseconds check_interval{std::chrono::hours(1)};
  /// After a check that failed (the API, RBAC, a missing webhook configuration).
  std::chrono::milliseconds retry_interval{std::chrono::minutes(1)};
};

/// What one check did.
struct webhook_cert_check {
  bool ok = false;          ///< Serving the Secret's certificate, caBundle current.
  bool wrote = false;       ///< This replica wrote renewed certificates to the Secret.
  bool swapped = false;     ///< The secure port serves a certificate it did not serve before.
  bool conflicted = false;  ///< An update met 409 (another replica wrote first).
  std::optional<ca_bundle_sync> ca_bundle;  ///< nullopt: not attempted (no usable certificate).
  /// When the next check should run (check_interval, retry_interval or the renewal time).
  std::chrono::milliseconds next_check{0};
};

/// The keeper of one replica.
///
/// Thread: check() on the backend's executor, one at a time (the daemon runs it with
/// async::repeat, at once and then after each check's next_check). Owns the backend; shares the
/// credentials with the secure port (use_pem is thread-safe); borrows the clock (wall time for the
/// certificates), which must outlive it.
class webhook_cert_keeper {
public:
  webhook_cert_keeper(std::shared_ptr<webhook_cert_backend> backend,
                      std::shared_ptr<serving::tls_credentials> credentials, base::clock& clock,
                      webhook_cert_keeper_options options);

  /// Reads the Secret, renews and writes it when check_webhook_tls says so (at most 3 tries
  /// through conflicts; what this replica serves, if still good, is written back instead of new
  /// certificates, so an emptied Secret gets the CA the caBundle has), serves its certificate
  /// when it is not the one served, and syncs the caBundle to its ca.crt. Failures are logged
  /// (a repeated one at debug) and reported.
  boost::asio::awaitable<webhook_cert_check> check();

private:
  // Texts to write for `verdict`, and what they are (for the log).
  struct renewal {
    webhook_tls tls;
    const char* what = "";
  };
  base::result<renewal> renew(const webhook_tls& read, const webhook_tls_verdict& verdict);
  void serve(const webhook_tls& tls, webhook_cert_check& out);
  void note_ca_bundle(const base::result<ca_bundle_sync>& synced, webhook_cert_check& out);
  void warn(const std::string& problem);
  std::chrono::milliseconds next_check(const webhook_tls& tls, bool ok);

  std::shared_ptr<webhook_cert_backend> backend_;
  std::shared_ptr<serving::tls_credentials> credentials_;
  base::clock& clock_;
  const webhook_cert_keeper_options options_;
  webhook_tls served_;        // the Secret's texts served now (empty: the self-signed start)
  std::string last_problem_;  // the last warning, logged again at debug while it repeats
};

}  // namespace tec::admission
