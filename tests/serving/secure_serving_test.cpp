// The secure port: TLS with the self-signed or file certificate (reloaded when the files
// change) and the request path through a request_authorizer (a fake here; the real one is
// tested against the API server in secure_serving_itest.cpp).

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "k8sclient/support/run_sync.hpp"
#include "serving/support/served_certificate.hpp"
#include "tec/serving/http_endpoints.hpp"
#include "tec/serving/request_authorizer.hpp"
#include "tec/serving/tls_credentials.hpp"

// A namespace of its own: the module's tests are compiled as one unity file.
namespace tec::serving::secure_serving_tests {

// Outside the anonymous namespace: run_sync's coroutine frame holds one.
struct reply {
  unsigned status = 0;
  std::string body;
  std::string www_authenticate;
  std::string error;  // the handshake's or the exchange's, when it failed
};

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

constexpr auto test_cap = 30s;

using testing::served_certificate_pem;

std::string key_pem(ssl::context& ctx) {
  EVP_PKEY* key = SSL_CTX_get0_privatekey(ctx.native_handle());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return out;
}

// A client context that trusts only `ca_pem` and checks the host name.
std::shared_ptr<ssl::context> client_trusting(const std::string& ca_pem) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->add_certificate_authority(asio::buffer(ca_pem));
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

asio::awaitable<reply> https_get(tcp::endpoint ep, std::shared_ptr<ssl::context> ctx,
                                 std::string host, std::string target, std::string token) {
  beast::ssl_stream<beast::tcp_stream> stream(co_await asio::this_coro::executor, *ctx);
  beast::get_lowest_layer(stream).expires_after(test_cap);
  stream.set_verify_callback(ssl::host_name_verification(host));
  reply out;
  auto [cec] = co_await beast::get_lowest_layer(stream).async_connect(
      ep, asio::as_tuple(asio::use_awaitable));
  if (cec) {
    out.error = cec.message();
    co_return out;
  }
  auto [hec] = co_await stream.async_handshake(ssl::stream_base::client,
                                               asio::as_tuple(asio::use_awaitable));
  if (hec) {
    out.error = "handshake: " + hec.message();
    co_return out;
  }
  http::request<http::string_body> req{http::verb::get, target, 11};
  req.set(http::field::host, host);
  if (!token.empty()) {
    req.set(http::field::authorization, "Bearer " + token);
  }
  auto [wec, w] = co_await http::async_write(stream, req, asio::as_tuple(asio::use_awaitable));
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  auto [rec, r] =
      co_await http::async_read(stream, buffer, res, asio::as_tuple(asio::use_awaitable));
  if (wec || rec) {
    out.error = (wec ? wec : rec).message();
    co_return out;
  }
  out.status = res.result_int();
  out.body = res.body();
  out.www_authenticate = std::string(res[http::field::www_authenticate]);
  co_return out;
}

// Tokens to decisions; counts the calls.
class fake_authorizer final : public request_authorizer {
public:
  std::map<std::string, auth_outcome> tokens;
  std::vector<std::string> paths;

  std::vector<std::string> peers;

  asio::awaitable<auth_decision> authorize(std::string bearer, std::string path,
                                           std::string peer) override {
    paths.push_back(path);
    peers.push_back(std::move(peer));
    if (bearer.empty()) {
      co_return auth_decision{auth_outcome::unauthenticated, "no token"};
    }
    const auto it = tokens.find(bearer);
    if (it == tokens.end()) {
      co_return auth_decision{auth_outcome::unauthenticated, "bad token"};
    }
    co_return auth_decision{it->second,
                            it->second == auth_outcome::forbidden
                                ? "forbidden: user \"u\" cannot get path \"" + path + "\""
                                : "down"};
  }
};

class secure_serving_test : public ::testing::Test {
protected:
  reply get(tcp::endpoint ep, std::shared_ptr<ssl::context> ctx, std::string target,
            std::string token = {}, std::string host = "localhost") {
    auto out = k8sclient::testing::run_sync(
        ioc_, https_get(ep, std::move(ctx), std::move(host), std::move(target), std::move(token)),
        test_cap);
    EXPECT_TRUE(out) << "no answer in time";
    return out.value_or(reply{});
  }

  static http_endpoints_options tls_options(std::shared_ptr<tls_credentials> creds,
                                            std::shared_ptr<request_authorizer> authz = {}) {
    http_endpoints_options o;
    o.bind_address = "127.0.0.1:0";
    o.tls = std::move(creds);
    o.authorizer = std::move(authz);
    return o;
  }

  tcp::endpoint start(http_endpoints& server) {
    auto ep = server.start();
    EXPECT_TRUE(ep && ep.value()) << (ep ? "disabled" : ep.error().message);
    return ep && ep.value() ? *ep.value() : tcp::endpoint{};
  }

  asio::io_context ioc_;
};

TEST_F(secure_serving_test, the_request_path_is_401_403_503_or_served) {
  auto creds = tls_credentials::self_signed({"localhost", "127.0.0.1"});
  ASSERT_TRUE(creds) << creds.error().message;
  auto authz = std::make_shared<fake_authorizer>();
  authz->tokens = {{"reader", auth_outcome::allowed},
                   {"nobody", auth_outcome::forbidden},
                   {"outage", auth_outcome::unavailable}};
  http_endpoints server(ioc_.get_executor(), tls_options(*creds, authz));
  server.handle("/metrics", [] { return http_response{200, "text/plain", "m 1\n"}; });
  const auto ep = start(server);
  const auto trust = client_trusting(served_certificate_pem(*(*creds)->current()));

  const auto none = get(ep, trust, "/metrics");
  EXPECT_EQ(none.status, 401U) << none.error;
  EXPECT_EQ(none.www_authenticate, "Bearer");
  EXPECT_EQ(get(ep, trust, "/metrics", "wrong").status, 401U);
  const auto forbidden = get(ep, trust, "/metrics", "nobody");
  EXPECT_EQ(forbidden.status, 403U);
  EXPECT_EQ(forbidden.body, "forbidden: user \"u\" cannot get path \"/metrics\"\n");
  EXPECT_EQ(get(ep, trust, "/metrics", "outage").status, 503U);
  const auto ok = get(ep, trust, "/metrics?x=1", "reader");
  EXPECT_EQ(ok.status, 200U) << ok.error;
  EXPECT_EQ(ok.body, "m 1\n");
  // Unknown paths are authorized first too: nothing says what exists to a stranger.
  EXPECT_EQ(get(ep, trust, "/nope").status, 401U);
  EXPECT_EQ(get(ep, trust, "/nope", "reader").status, 404U);
  EXPECT_EQ(authz->paths.back(), "/nope");
  EXPECT_EQ(authz->paths.at(4), "/metrics");  // the query is not part of the path
  EXPECT_EQ(authz->peers.back(), "127.0.0.1");
  // A target with a byte no URL has is refused before anyone is asked about it.
  const auto asked = authz->paths.size();
  EXPECT_EQ(get(ep, trust, "/metrics\xff", "reader").status, 400U);
  EXPECT_EQ(get(ep, trust, "/metrics?\x01", "reader").status, 400U);
  EXPECT_EQ(authz->paths.size(), asked);
  server.stop();
}

TEST_F(secure_serving_test, the_self_signed_certificate_names_its_hosts) {
  auto creds = tls_credentials::self_signed({"tec.example", "localhost", "127.0.0.1"});
  ASSERT_TRUE(creds) << creds.error().message;
  http_endpoints server(ioc_.get_executor(), secure_serving_test::tls_options(*creds));
  server.handle("/x", [] { return http_response{200, "text/plain", "x"}; });
  const auto ep = start(server);
  const auto trust = client_trusting(served_certificate_pem(*(*creds)->current()));
  EXPECT_EQ(get(ep, trust, "/x", {}, "tec.example").status, 200U);
  EXPECT_EQ(get(ep, trust, "/x", {}, "localhost").status, 200U);
  const auto wrong_name = get(ep, trust, "/x", {}, "other.example");
  EXPECT_EQ(wrong_name.status, 0U);
  EXPECT_NE(wrong_name.error.find("handshake"), std::string::npos) << wrong_name.error;

  // Another self-signed certificate is not trusted.
  auto stranger = tls_credentials::self_signed({"localhost"});
  ASSERT_TRUE(stranger);
  const auto untrusted =
      get(ep, client_trusting(served_certificate_pem(*(*stranger)->current())), "/x");
  EXPECT_EQ(untrusted.status, 0U);
  server.stop();
}

TEST_F(secure_serving_test, plain_http_to_the_secure_port_is_closed) {
  auto creds = tls_credentials::self_signed({"localhost"});
  ASSERT_TRUE(creds);
  http_endpoints server(ioc_.get_executor(), secure_serving_test::tls_options(*creds));
  server.handle("/x", [] { return http_response{200, "text/plain", "x"}; });
  const auto ep = start(server);
  auto plain = [ep]() -> asio::awaitable<std::string> {
    beast::tcp_stream s(co_await asio::this_coro::executor);
    s.expires_after(test_cap);
    co_await s.async_connect(ep, asio::use_awaitable);
    const std::string req = "GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
    co_await s.async_write_some(asio::buffer(req), asio::use_awaitable);
    std::string all;
    char buf[256];
    for (;;) {
      auto [ec, n] =
          co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      all.append(buf, n);
      if (ec) {
        EXPECT_NE(ec, beast::error::timeout);
        co_return all;
      }
    }
  };
  const auto got = k8sclient::testing::run_sync(ioc_, plain(), test_cap);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->find("200"), std::string::npos) << *got;
  EXPECT_TRUE(k8sclient::testing::run_until(
      ioc_, [&server] { return server.connections_for_test() == 0; }, test_cap));
  server.stop();
}

class cert_files : public secure_serving_test {
protected:
  cert_files() {
    dir_ = std::filesystem::temp_directory_path() /
           ("tec-tls-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  ~cert_files() override { std::filesystem::remove_all(dir_); }
  cert_files(const cert_files&) = delete;
  cert_files& operator=(const cert_files&) = delete;

  // Writes a new self-signed pair for `host`; returns its certificate PEM. The files get a
  // modification time of their own (`generation` seconds after the epoch), so a change is
  // seen however coarse the file system's clock.
  std::string write_pair(const std::string& host, int generation) {
    auto creds = tls_credentials::self_signed({host});
    EXPECT_TRUE(creds);
    auto ctx = (*creds)->current();
    const auto cert = served_certificate_pem(*ctx);
    write(cert_path(), cert, generation);
    write(key_path(), key_pem(*ctx), generation);
    return cert;
  }

  void write(const std::filesystem::path& p, const std::string& text, int generation) {
    // A new file renamed over the old one, as a Secret volume's update swaps files.
    const auto tmp = p.string() + ".tmp";
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
    std::filesystem::rename(tmp, p);
    std::filesystem::last_write_time(
        p, std::filesystem::file_time_type(std::chrono::seconds(1'000'000 + generation)));
  }

  std::filesystem::path cert_path() const { return dir_ / "tls.crt"; }
  std::filesystem::path key_path() const { return dir_ / "tls.key"; }

  std::filesystem::path dir_;
};

TEST_F(cert_files, a_changed_pair_is_loaded_and_a_broken_one_keeps_the_last_good) {
  const auto first = write_pair("localhost", 1);
  auto creds = tls_credentials::from_files(cert_path().string(), key_path().string());
  ASSERT_TRUE(creds) << creds.error().message;
  EXPECT_EQ(served_certificate_pem(*(*creds)->current()), first);
  EXPECT_EQ((*creds)->current(), (*creds)->current());  // unchanged files: the same context
  EXPECT_EQ((*creds)->reloads(), 0U);

  const auto second = write_pair("localhost", 2);
  EXPECT_EQ(served_certificate_pem(*(*creds)->current()), second);
  EXPECT_EQ((*creds)->reloads(), 1U);

  // Half an update: a new certificate with the old key does not match; the last good pair
  // stays, and it is not retried until the files change again.
  auto other = tls_credentials::self_signed({"localhost"});
  ASSERT_TRUE(other);
  write(cert_path(), served_certificate_pem(*(*other)->current()), 3);
  EXPECT_EQ(served_certificate_pem(*(*creds)->current()), second);
  write(cert_path(), "not a certificate", 4);
  EXPECT_EQ(served_certificate_pem(*(*creds)->current()), second);
  EXPECT_EQ((*creds)->reloads(), 1U);

  const auto third = write_pair("localhost", 5);
  EXPECT_EQ(served_certificate_pem(*(*creds)->current()), third);
  EXPECT_EQ((*creds)->reloads(), 2U);
}

TEST_F(cert_files, a_server_hands_new_connections_the_reloaded_certificate) {
  const auto first = write_pair("localhost", 1);
  auto creds = tls_credentials::from_files(cert_path().string(), key_path().string());
  ASSERT_TRUE(creds) << creds.error().message;
  http_endpoints server(ioc_.get_executor(), secure_serving_test::tls_options(*creds));
  server.handle("/x", [] { return http_response{200, "text/plain", "x"}; });
  auto ep = server.start();
  ASSERT_TRUE(ep && ep.value());
  auto fetch = [&](const std::string& ca) {
    auto out = k8sclient::testing::run_sync(
        ioc_, https_get(*ep.value(), client_trusting(ca), "localhost", "/x", {}), test_cap);
    return out ? out->status : 0U;
  };
  EXPECT_EQ(fetch(first), 200U);
  const auto second = write_pair("localhost", 2);
  EXPECT_EQ(fetch(second), 200U);
  EXPECT_EQ(fetch(first), 0U);
  server.stop();
}

TEST_F(cert_files, missing_or_mismatched_files_are_errors_naming_them) {
  auto missing = tls_credentials::from_files(cert_path().string(), key_path().string());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("tls.crt"), std::string::npos) << missing.error().message;
  write_pair("localhost", 1);
  auto other = tls_credentials::self_signed({"localhost"});
  ASSERT_TRUE(other);
  write(cert_path(), served_certificate_pem(*(*other)->current()), 2);
  auto mismatch = tls_credentials::from_files(cert_path().string(), key_path().string());
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.error().message.find("does not match"), std::string::npos)
      << mismatch.error().message;
}

}  // namespace
}  // namespace tec::serving::secure_serving_tests
