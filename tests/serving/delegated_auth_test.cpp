#include "tec/serving/delegated_auth.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "k8sclient/support/run_sync.hpp"
#include "support/manual_clock.hpp"

// A namespace of its own: the module's tests are compiled as one unity file.
namespace tec::serving::delegated_auth_tests {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using json = nlohmann::json;

auth_decision allowed() {
  return {auth_outcome::allowed, {}};
}
auth_decision denied() {
  return {auth_outcome::forbidden, "no"};
}

TEST(review_cache, keys_are_sha256_of_token_and_path_never_the_token) {
  const auto k = review_cache::key_of("secret-token", "/metrics");
  EXPECT_EQ(k, review_cache::key_of("secret-token", "/metrics"));
  EXPECT_NE(k, review_cache::key_of("secret-token", "/debug/evictions"));
  EXPECT_NE(k, review_cache::key_of("secret-tokeN", "/metrics"));
  // The separator: ("ab", "c") and ("a", "bc") differ.
  EXPECT_NE(review_cache::key_of("ab", "c"), review_cache::key_of("a", "bc"));
  // SHA-256 of "" NUL "" (one zero byte).
  EXPECT_EQ(review_cache::key_of("", ""),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
  EXPECT_EQ(k.size(), 64U);
  EXPECT_EQ(k.find("secret"), std::string::npos);
}

TEST(review_cache, allowed_and_denied_expire_after_their_ttl) {
  test::manual_clock clock;
  review_cache cache(clock, {.allowed_ttl = 10s, .denied_ttl = 2s, .max_entries = 8});
  const auto a = review_cache::key_of("a", "/metrics");
  const auto d = review_cache::key_of("d", "/metrics");
  cache.insert(a, allowed());
  cache.insert(d, denied());
  ASSERT_TRUE(cache.find(a));
  EXPECT_EQ(cache.find(a)->outcome, auth_outcome::allowed);
  ASSERT_TRUE(cache.find(d));
  EXPECT_EQ(cache.find(d)->reason, "no");
  clock.advance(1999ms);
  EXPECT_TRUE(cache.find(d));
  clock.advance(1ms);
  EXPECT_FALSE(cache.find(d));
  EXPECT_EQ(cache.size(), 1U);  // the expired one was dropped
  clock.advance(7999ms);
  EXPECT_TRUE(cache.find(a));
  clock.advance(1ms);
  EXPECT_FALSE(cache.find(a));
  EXPECT_EQ(cache.size(), 0U);
}

TEST(review_cache, unavailable_is_not_cached) {
  test::manual_clock clock;
  review_cache cache(clock, {});
  const auto k = review_cache::key_of("t", "/metrics");
  cache.insert(k, {auth_outcome::unavailable, "down"});
  EXPECT_FALSE(cache.find(k));
  EXPECT_EQ(cache.size(), 0U);
}

TEST(review_cache, is_bounded_and_evicts_the_oldest) {
  test::manual_clock clock;
  review_cache cache(clock, {.allowed_ttl = 10s, .denied_ttl = 2s, .max_entries = 3});
  for (int i = 0; i < 1000; ++i) {
    cache.insert(review_cache::key_of("t" + std::to_string(i), "/metrics"), denied());
    ASSERT_LE(cache.size(), 3U);
  }
  EXPECT_EQ(cache.size(), 3U);
  EXPECT_FALSE(cache.find(review_cache::key_of("t996", "/metrics")));
  EXPECT_TRUE(cache.find(review_cache::key_of("t997", "/metrics")));
  EXPECT_TRUE(cache.find(review_cache::key_of("t999", "/metrics")));
  // Replacing an entry does not grow the cache, and makes it the newest.
  cache.insert(review_cache::key_of("t997", "/metrics"), allowed());
  cache.insert(review_cache::key_of("new", "/metrics"), allowed());
  EXPECT_EQ(cache.size(), 3U);
  EXPECT_TRUE(cache.find(review_cache::key_of("t997", "/metrics")));
  EXPECT_FALSE(cache.find(review_cache::key_of("t998", "/metrics")));
}

// Answers from tables, and counts the calls.
class fake_backend final : public review_backend {
public:
  std::map<std::string, reviewed_user> users;            // by token
  std::map<std::string, std::vector<std::string>> rbac;  // user -> paths allowed
  bool failing = false;
  /// When set, each TokenReview waits for it (cancel() lets them all answer).
  std::shared_ptr<asio::steady_timer> gate;
  int token_reviews = 0;
  int access_reviews = 0;
  reviewed_user last_user;

  asio::awaitable<base::result<std::optional<reviewed_user>>> token_review(
      std::string token) override {
    ++token_reviews;
    if (gate) {
      co_await gate->async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (failing) {
      co_return base::make_error(base::errc::connection_failed, "API server down");
    }
    const auto it = users.find(token);
    if (it == users.end()) {
      co_return std::optional<reviewed_user>{};
    }
    co_return std::optional<reviewed_user>{it->second};
  }

  asio::awaitable<base::result<access_verdict>> access_review(reviewed_user user,
                                                              std::string path) override {
    ++access_reviews;
    last_user = user;
    const auto& paths = rbac[user.username];
    const bool ok = std::find(paths.begin(), paths.end(), path) != paths.end();
    co_return access_verdict{ok, ok ? "" : "no RBAC"};
  }
};

class delegated_authorizer_test : public ::testing::Test {
protected:
  delegated_authorizer_test() {
    backend_->users["good"] = {.username = "system:serviceaccount:mon:prometheus",
                               .uid = "u1",
                               .groups = {"system:serviceaccounts"},
                               .extra = {{"k", {"v"}}}};
    backend_->users["norbac"] = {.username = "bob", .uid = {}, .groups = {}, .extra = {}};
    backend_->rbac["system:serviceaccount:mon:prometheus"] = {"/metrics"};
  }

  auth_decision authorize(const std::string& token, const std::string& path,
                          const std::string& peer = "10.0.0.1") {
    auto out = k8sclient::testing::run_sync(ioc_, authorizer_.authorize(token, path, peer));
    EXPECT_TRUE(out);
    return out.value_or(auth_decision{});
  }

  asio::io_context ioc_;
  test::manual_clock clock_;
  std::shared_ptr<fake_backend> backend_ = std::make_shared<fake_backend>();
  delegated_authorizer authorizer_{
      backend_, clock_, {.allowed_ttl = 10s, .denied_ttl = 2s, .max_entries = 4}};
};

TEST_F(delegated_authorizer_test, no_token_is_401_without_a_review) {
  EXPECT_EQ(authorize("", "/metrics").outcome, auth_outcome::unauthenticated);
  EXPECT_EQ(backend_->token_reviews, 0);
  EXPECT_EQ(authorizer_.cached_for_test(), 0U);
}

TEST_F(delegated_authorizer_test, an_unknown_token_is_401_and_cached_briefly) {
  EXPECT_EQ(authorize("wrong", "/metrics").outcome, auth_outcome::unauthenticated);
  EXPECT_EQ(authorize("wrong", "/metrics").outcome, auth_outcome::unauthenticated);
  EXPECT_EQ(backend_->token_reviews, 1);
  EXPECT_EQ(backend_->access_reviews, 0);
  clock_.advance(2s);
  EXPECT_EQ(authorize("wrong", "/metrics").outcome, auth_outcome::unauthenticated);
  EXPECT_EQ(backend_->token_reviews, 2);
}

TEST_F(delegated_authorizer_test, a_user_without_rbac_is_403_naming_user_and_path) {
  const auto d = authorize("norbac", "/metrics");
  EXPECT_EQ(d.outcome, auth_outcome::forbidden);
  EXPECT_EQ(d.reason, "forbidden: user \"bob\" cannot get path \"/metrics\": no RBAC");
  EXPECT_EQ(d.reason.find("norbac"), std::string::npos);  // never the token
}

TEST_F(delegated_authorizer_test, an_allowed_user_is_cached_for_the_allowed_ttl_per_path) {
  EXPECT_EQ(authorize("good", "/metrics").outcome, auth_outcome::allowed);
  EXPECT_EQ(backend_->last_user.uid, "u1");
  EXPECT_EQ(backend_->last_user.groups, std::vector<std::string>{"system:serviceaccounts"});
  EXPECT_EQ(authorize("good", "/debug/evictions").outcome, auth_outcome::forbidden);
  EXPECT_EQ(backend_->token_reviews, 1) << "the TokenReview's user is cached by token";
  clock_.advance(9s);
  EXPECT_EQ(authorize("good", "/metrics").outcome, auth_outcome::allowed);
  EXPECT_EQ(backend_->token_reviews, 1);
  clock_.advance(1s);
  EXPECT_EQ(authorize("good", "/metrics").outcome, auth_outcome::allowed);
  EXPECT_EQ(backend_->token_reviews, 2);
  EXPECT_EQ(backend_->access_reviews, 3);
}

TEST_F(delegated_authorizer_test, a_token_that_is_not_visible_ascii_is_401_without_a_review) {
  for (const std::string& token :
       {std::string("ab\xff"), std::string("a b"), std::string("\x01"), std::string("good\x7f")}) {
    const auto d = authorize(token, "/metrics");
    EXPECT_EQ(d.outcome, auth_outcome::unauthenticated);
    EXPECT_EQ(d.reason, "malformed bearer token");
  }
  EXPECT_EQ(backend_->token_reviews, 0);
}

TEST_F(delegated_authorizer_test, unknown_tokens_are_rate_limited_per_address) {
  // The default burst (10) per address, then 2 a second; another address has its own.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(authorize("stranger-" + std::to_string(i), "/metrics", "10.9.9.9").outcome,
              auth_outcome::unauthenticated);
  }
  const auto over = authorize("stranger-x", "/metrics", "10.9.9.9");
  EXPECT_EQ(over.outcome, auth_outcome::unavailable);
  EXPECT_EQ(over.reason, "too many unknown tokens from this address");
  EXPECT_EQ(backend_->token_reviews, 10);
  EXPECT_EQ(authorize("stranger-y", "/metrics", "10.8.8.8").outcome, auth_outcome::unauthenticated);
  clock_.advance(500ms);
  EXPECT_EQ(authorize("stranger-z", "/metrics", "10.9.9.9").outcome, auth_outcome::unauthenticated);
  // A known token from the flooded address is not limited.
  EXPECT_EQ(authorize("good", "/metrics", "10.7.7.7").outcome, auth_outcome::allowed);
  for (int i = 0; i < 20; ++i) {
    authorize("stranger-more-" + std::to_string(i), "/metrics", "10.7.7.7");
  }
  clock_.advance(10s);  // its decision and user expired; it is still known
  EXPECT_EQ(authorize("good", "/metrics", "10.7.7.7").outcome, auth_outcome::allowed);
}

TEST_F(delegated_authorizer_test, a_failed_review_is_503_and_not_cached) {
  backend_->failing = true;
  EXPECT_EQ(authorize("good", "/metrics").outcome, auth_outcome::unavailable);
  EXPECT_EQ(authorizer_.cached_for_test(), 0U);
  backend_->failing = false;
  EXPECT_EQ(authorize("good", "/metrics").outcome, auth_outcome::allowed);
}

TEST_F(delegated_authorizer_test, a_flood_of_new_tokens_stays_within_the_bound) {
  for (int i = 0; i < 500; ++i) {
    authorize("flood-" + std::to_string(i), "/metrics");
    ASSERT_LE(authorizer_.cached_for_test(), 4U);
  }
}

TEST_F(delegated_authorizer_test, at_most_max_in_flight_reviews_then_503_at_once) {
  backend_->gate =
      std::make_shared<asio::steady_timer>(ioc_, asio::steady_timer::time_point::max());
  delegated_authorizer two(backend_, clock_, {}, 2);
  std::vector<auth_decision> done;
  for (const char* token : {"good", "wrong", "good2", "good3"}) {
    asio::co_spawn(ioc_, two.authorize(token, "/metrics", "p"),
                   [&done](const std::exception_ptr& e, auth_decision d) {
                     EXPECT_FALSE(e);
                     done.push_back(std::move(d));
                   });
  }
  ASSERT_TRUE(k8sclient::testing::run_until(ioc_, [&] { return done.size() == 2; }));
  EXPECT_EQ(backend_->token_reviews, 2);  // the third and fourth were not sent
  EXPECT_EQ(done[0].outcome, auth_outcome::unavailable);
  EXPECT_EQ(done[1].outcome, auth_outcome::unavailable);
  backend_->gate->cancel();
  ASSERT_TRUE(k8sclient::testing::run_until(ioc_, [&] { return done.size() == 4; }));
  EXPECT_EQ(done[2].outcome, auth_outcome::allowed);
  EXPECT_EQ(done[3].outcome, auth_outcome::unauthenticated);
  // The slots are free again.
  backend_->gate.reset();
  const auto again =
      k8sclient::testing::run_sync(ioc_, two.authorize("good", "/debug/evictions", "p"));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->outcome, auth_outcome::forbidden);
}

TEST_F(delegated_authorizer_test, a_known_token_has_slots_that_unknown_tokens_cannot_take) {
  delegated_authorizer two(backend_, clock_, {}, 2);
  // "good" authenticates once, then its decision expires.
  const auto first = k8sclient::testing::run_sync(ioc_, two.authorize("good", "/metrics", "a"));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->outcome, auth_outcome::allowed);
  clock_.advance(11s);
  backend_->gate =
      std::make_shared<asio::steady_timer>(ioc_, asio::steady_timer::time_point::max());
  std::vector<auth_decision> strangers;
  for (const char* token : {"s1", "s2", "s3"}) {
    asio::co_spawn(ioc_, two.authorize(token, "/metrics", "b"),
                   [&strangers](const std::exception_ptr& e, auth_decision d) {
                     EXPECT_FALSE(e);
                     strangers.push_back(std::move(d));
                   });
  }
  ASSERT_TRUE(k8sclient::testing::run_until(ioc_, [&] { return strangers.size() == 1; }));
  EXPECT_EQ(strangers[0].outcome, auth_outcome::unavailable);  // the unknown slots are full
  std::optional<auth_decision> reader;
  asio::co_spawn(ioc_, two.authorize("good", "/metrics", "a"),
                 [&reader](const std::exception_ptr& e, auth_decision d) {
                   EXPECT_FALSE(e);
                   reader = std::move(d);
                 });
  ASSERT_TRUE(k8sclient::testing::run_until(ioc_, [&] { return backend_->token_reviews == 4; }))
      << "the known token's review was sent although the unknown slots are full";
  backend_->gate->cancel();
  ASSERT_TRUE(k8sclient::testing::run_until(ioc_, [&] { return reader.has_value(); }));
  EXPECT_EQ(reader->outcome, auth_outcome::allowed);
}

TEST(review_json, invalid_utf8_is_replaced_not_thrown) {
  const auto req = json::parse(review_json::token_review_request("a\xff"));
  EXPECT_EQ(req["spec"]["token"], "a\xEF\xBF\xBD");
  const auto sar = json::parse(review_json::access_review_request(
      {.username = "u\xfe", .uid = {}, .groups = {}, .extra = {}}, "/m\xff"));
  EXPECT_EQ(sar["spec"]["nonResourceAttributes"]["path"], "/m\xEF\xBF\xBD");
}

TEST(review_json, token_review_round_trip) {
  const auto req = json::parse(review_json::token_review_request("tok"));
  EXPECT_EQ(req["apiVersion"], "authentication.k8s.io/v1");
  EXPECT_EQ(req["kind"], "TokenReview");
  EXPECT_EQ(req["spec"]["token"], "tok");

  const auto user = review_json::parse_token_review(R"({"kind":"TokenReview","status":{
      "authenticated":true,"user":{"username":"system:serviceaccount:a:b","uid":"x",
      "groups":["g1","g2"],"extra":{"authentication.kubernetes.io/pod-name":["p"]}}}})");
  ASSERT_TRUE(user) << user.error().message;
  ASSERT_TRUE(user->has_value());
  EXPECT_EQ((*user)->username, "system:serviceaccount:a:b");
  EXPECT_EQ((*user)->groups.size(), 2U);
  EXPECT_EQ((*user)->extra.at("authentication.kubernetes.io/pod-name").at(0), "p");

  const auto no = review_json::parse_token_review(
      R"({"status":{"authenticated":false,"error":"invalid bearer token"}})");
  ASSERT_TRUE(no);
  EXPECT_FALSE(no->has_value());
  EXPECT_FALSE(review_json::parse_token_review("not json"));
  EXPECT_FALSE(review_json::parse_token_review(R"({"spec":{}})"));
  EXPECT_FALSE(review_json::parse_token_review(R"({"status":{"authenticated":true}})"));
}

TEST(review_json, access_review_round_trip) {
  const reviewed_user u{.username = "bob", .uid = "u", .groups = {"g"}, .extra = {{"k", {"v"}}}};
  const auto req = json::parse(review_json::access_review_request(u, "/debug/evictions"));
  EXPECT_EQ(req["apiVersion"], "authorization.k8s.io/v1");
  EXPECT_EQ(req["kind"], "SubjectAccessReview");
  EXPECT_EQ(req["spec"]["user"], "bob");
  EXPECT_EQ(req["spec"]["uid"], "u");
  EXPECT_EQ(req["spec"]["groups"][0], "g");
  EXPECT_EQ(req["spec"]["extra"]["k"][0], "v");
  EXPECT_EQ(req["spec"]["nonResourceAttributes"]["path"], "/debug/evictions");
  EXPECT_EQ(req["spec"]["nonResourceAttributes"]["verb"], "get");

  const auto yes = review_json::parse_access_review(R"({"status":{"allowed":true}})");
  ASSERT_TRUE(yes);
  EXPECT_TRUE(yes->allowed);
  const auto no = review_json::parse_access_review(R"({"status":{"allowed":false,"reason":"r"}})");
  ASSERT_TRUE(no);
  EXPECT_FALSE(no->allowed);
  EXPECT_EQ(no->reason, "r");
  EXPECT_FALSE(review_json::parse_access_review("{}"));
}

}  // namespace
}  // namespace tec::serving::delegated_auth_tests
