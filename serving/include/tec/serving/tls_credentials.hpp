#pragma once

// The serving certificate of the secure port (/metrics, /debug/*): from a certificate and key
// file (--tls-cert-file, --tls-private-key-file), re-read when they change, or, without them,
// a self-signed one generated in memory at start, as kube-controller-manager does, which the
// webhook's certificate keeper (webhook_cert_keeper.hpp) may replace while it serves.

#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"

namespace tec::serving {

/// The TLS server context the secure port hands each new connection.
///
/// Thread-safety: every member may be called from any thread. A context handed out stays
/// valid as long as its holder keeps it (a connection keeps the one it started with when the
/// files change).
class tls_credentials {
public:
  /// A new EC P-256 key and a self-signed certificate for `hosts` (DNS names or IP literals,
  /// the subjectAltNames; the first is also the common name), valid from an hour ago for a
  /// year. Error: OpenSSL failed.
  static base::result<std::shared_ptr<tls_credentials>> self_signed(
      const std::vector<std::string>& hosts);

  /// The PEM certificate chain and private key in `cert_file` and `key_file`, read now (an
  /// error names the file and what is wrong: unreadable, not PEM, a key that does not match
  /// the certificate).
  static base::result<std::shared_ptr<tls_credentials>> from_files(std::string cert_file,
                                                                   std::string key_file);

  /// The PEM certificate chain (the serving certificate first) and its private key, as given
  /// (an error says what is wrong with them).
  static base::result<std::shared_ptr<tls_credentials>> from_pem(std::string_view cert_chain_pem,
                                                                 std::string_view key_pem);

  /// Not for credentials from files (the files stay the source): from now on, new connections
  /// get this certificate chain and key; connections open keep theirs. Counts as a reload. An
  /// error (the pair does not load) keeps the one in use.
  base::result<void> use_pem(std::string_view cert_chain_pem, std::string_view key_pem);

  /// The context for a new connection. With files: stats both first (cheap), and when either
  /// changed (modification time, size or inode: a Secret volume's symlink swap) loads the pair
  /// again; a broken pair keeps the last good one and is logged once, until the files change
  /// again.
  std::shared_ptr<boost::asio::ssl::context> current();

  /// How many times a changed pair was loaded since start (from the files, or use_pem()).
  [[nodiscard]] std::uint64_t reloads() const;

  tls_credentials(const tls_credentials&) = delete;
  tls_credentials& operator=(const tls_credentials&) = delete;
  ~tls_credentials();

private:
  struct file_stamp {
    std::int64_t mtime_ns = -1;
    std::int64_t size = -1;
    std::uint64_t inode = 0;
    bool operator==(const file_stamp&) const = default;
  };
  tls_credentials(std::shared_ptr<boost::asio::ssl::context> ctx, std::string cert_file,
                  std::string key_file);
  static file_stamp stamp_of(const std::string& path);

  const std::string cert_file_;  // empty: self-signed
  const std::string key_file_;
  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> context_;  // under mu_
  file_stamp cert_stamp_;                               // under mu_: the pair last tried
  file_stamp key_stamp_;                                // under mu_
  std::uint64_t reloads_ = 0;                           // under mu_
};

}  // namespace tec::serving
