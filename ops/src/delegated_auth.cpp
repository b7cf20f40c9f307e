#include "tec/ops/delegated_auth.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <cassert>
#include <nlohmann/json.hpp>
#include <utility>

#include "tec/base/logger.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/ops/sha256.hpp"

namespace tec::ops {

namespace asio = boost::asio;
using json = nlohmann::json;

namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const std::shared_ptr<spdlog::logger> log = base::named_logger("http");
  return log;
}

// How long one review may take, retries included (a scraper times out after ~10 s).
constexpr std::chrono::seconds review_deadline{5};

// A reason from the API server, as a response body may carry it: bounded.
std::string bounded(std::string s) {
  constexpr std::size_t max_reason = 512;
  if (s.size() > max_reason) {
    s.resize(max_reason);
    s += "...";
  }
  return s;
}

base::error shape_error(std::string_view what, const std::exception& e) {
  return base::make_error(base::errc::unexpected_shape,
                          std::string(what) + " answer has an unexpected shape: " + e.what());
}

}  // namespace

// ---------------------------------------------------------------------------------------------

review_cache::review_cache(base::clock& clock, review_cache_options options)
    : clock_(clock), options_(options) {
  assert(options_.max_entries > 0);
}

review_cache::key review_cache::key_of(std::string_view token, std::string_view path) {
  std::string text;
  text.reserve(token.size() + 1 + path.size());
  text.append(token).push_back('\0');
  text.append(path);
  return sha256_hex(text);
}

std::optional<auth_decision> review_cache::find(const key& k) {
  const auto it = entries_.find(k);
  if (it == entries_.end()) {
    return std::nullopt;
  }
  if (clock_.now() >= it->second.expires) {
    order_.erase(it->second.order);
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.decision;
}

void review_cache::insert(const key& k, auth_decision d) {
  if (d.outcome == auth_outcome::unavailable) {
    return;
  }
  const auto ttl = d.outcome == auth_outcome::allowed ? options_.allowed_ttl : options_.denied_ttl;
  const auto expires = clock_.now() + ttl;
  if (const auto it = entries_.find(k); it != entries_.end()) {
    order_.erase(it->second.order);
    entries_.erase(it);
  }
  while (entries_.size() >= options_.max_entries) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  order_.push_back(k);
  entries_.emplace(k, entry{std::move(d), expires, std::prev(order_.end())});
}

// ---------------------------------------------------------------------------------------------

namespace review_json {

std::string token_review_request(std::string_view token) {
  return json{{"apiVersion", "authentication.k8s.io/v1"},
              {"kind", "TokenReview"},
              {"spec", {{"token", token}}}}
      .dump();
}

base::result<std::optional<reviewed_user>> parse_token_review(std::string_view body) {
  try {
    const auto doc = json::parse(body);
    const auto& status = doc.at("status");
    if (!status.value("authenticated", false)) {
      return std::optional<reviewed_user>{};
    }
    const auto& user = status.at("user");
    reviewed_user u;
    u.username = user.value("username", "");
    u.uid = user.value("uid", "");
    if (user.contains("groups")) {
      u.groups = user.at("groups").get<std::vector<std::string>>();
    }
    if (user.contains("extra")) {
      u.extra = user.at("extra").get<std::map<std::string, std::vector<std::string>>>();
    }
    if (u.username.empty()) {
      return base::make_error(base::errc::unexpected_shape,
                              "TokenReview answer: authenticated without a username");
    }
    return std::optional<reviewed_user>{std::move(u)};
  } catch (const json::exception& e) {
    return shape_error("TokenReview", e);
  }
}

std::string access_review_request(const reviewed_user& user, std::string_view path) {
  json spec{{"user", user.username}, {"nonResourceAttributes", {{"path", path}, {"verb", "get"}}}};
  if (!user.uid.empty()) {
    spec["uid"] = user.uid;
  }
  if (!user.groups.empty()) {
    spec["groups"] = user.groups;
  }
  if (!user.extra.empty()) {
    spec["extra"] = user.extra;
  }
  return json{{"apiVersion", "authorization.k8s.io/v1"},
              {"kind", "SubjectAccessReview"},
              {"spec", std::move(spec)}}
      .dump();
}

base::result<access_verdict> parse_access_review(std::string_view body) {
  try {
    const auto doc = json::parse(body);
    const auto& status = doc.at("status");
    access_verdict v;
    v.allowed = status.value("allowed", false);
    v.reason = status.value("reason", "");
    if (v.reason.empty()) {
      v.reason = status.value("evaluationError", "");
    }
    return v;
  } catch (const json::exception& e) {
    return shape_error("SubjectAccessReview", e);
  }
}

}  // namespace review_json

// ---------------------------------------------------------------------------------------------

namespace {

class api_review_backend final : public review_backend {
public:
  api_review_backend(k8sclient::client& api, asio::any_io_executor ex)
      : api_(api), executor_(std::move(ex)) {}

  asio::awaitable<base::result<std::optional<reviewed_user>>> token_review(
      std::string token) override {
    auto posted = post("/apis/authentication.k8s.io/v1/tokenreviews",
                       review_json::token_review_request(token), "TokenReview");
    auto body = co_await std::move(posted);  // named: GCC 12 (see http_endpoints.cpp)
    if (!body) {
      co_return body.error();
    }
    co_return review_json::parse_token_review(*body);
  }

  asio::awaitable<base::result<access_verdict>> access_review(reviewed_user user,
                                                              std::string path) override {
    auto posted = post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                       review_json::access_review_request(user, path), "SubjectAccessReview");
    auto body = co_await std::move(posted);
    if (!body) {
      co_return body.error();
    }
    co_return review_json::parse_access_review(*body);
  }

private:
  // The answer's body of a 2xx; an error otherwise (the client's, or the API status).
  asio::awaitable<base::result<std::string>> post(std::string target, std::string body,
                                                  std::string_view what) {
    k8sclient::request req(boost::beast::http::verb::post, std::move(target), std::move(body));
    req.deadline = api_.clock().now() + review_deadline;
    auto sent = asio::co_spawn(executor_, api_.send(std::move(req)), asio::use_awaitable);
    auto resp = co_await std::move(sent);
    if (!resp) {
      co_return resp.error();
    }
    if (resp->status < 200 || resp->status >= 300) {
      co_return k8sclient::api_error(std::string(what), *resp);
    }
    co_return std::move(resp->body);
  }

  k8sclient::client& api_;
  asio::any_io_executor executor_;
};

}  // namespace

std::shared_ptr<review_backend> make_api_review_backend(k8sclient::client& api,
                                                        asio::any_io_executor client_executor) {
  return std::make_shared<api_review_backend>(api, std::move(client_executor));
}

// ---------------------------------------------------------------------------------------------

delegated_authorizer::delegated_authorizer(std::shared_ptr<review_backend> backend,
                                           base::clock& clock, review_cache_options options,
                                           std::size_t max_in_flight)
    : backend_(std::move(backend)), cache_(clock, options), max_in_flight_(max_in_flight) {}

asio::awaitable<auth_decision> delegated_authorizer::authorize(std::string bearer,
                                                               std::string path) {
  if (bearer.empty()) {
    co_return auth_decision{auth_outcome::unauthenticated, "no bearer token"};
  }
  const auto key = review_cache::key_of(bearer, path);
  if (auto cached = cache_.find(key)) {
    co_return std::move(*cached);
  }
  if (in_flight_ >= max_in_flight_) {
    logger()->debug("{} requests being reviewed: answering 503 to one for {}", in_flight_, path);
    co_return auth_decision{auth_outcome::unavailable, "too many requests being authenticated"};
  }
  struct in_flight_slot {
    std::size_t& count;
    explicit in_flight_slot(std::size_t& c) : count(c) { ++count; }
    in_flight_slot(const in_flight_slot&) = delete;
    in_flight_slot& operator=(const in_flight_slot&) = delete;
    ~in_flight_slot() { --count; }
  } const slot(in_flight_);
  auto tr = backend_->token_review(std::move(bearer));  // named: GCC 12
  auto user = co_await std::move(tr);
  if (!user) {
    logger()->warn("cannot authenticate a request for {}: TokenReview failed: {}", path,
                   user.error().message);
    co_return auth_decision{auth_outcome::unavailable, "authentication is unavailable"};
  }
  if (!user->has_value()) {
    auth_decision d{auth_outcome::unauthenticated, "invalid bearer token"};
    cache_.insert(key, d);
    co_return d;
  }
  const std::string username = (*user)->username;
  auto sar = backend_->access_review(std::move(**user), path);  // named: GCC 12
  auto verdict = co_await std::move(sar);
  if (!verdict) {
    logger()->warn("cannot authorize user \"{}\" for {}: SubjectAccessReview failed: {}", username,
                   path, verdict.error().message);
    co_return auth_decision{auth_outcome::unavailable, "authorization is unavailable"};
  }
  auth_decision d;
  if (verdict->allowed) {
    d = {auth_outcome::allowed, {}};
  } else {
    d = {auth_outcome::forbidden,
         "forbidden: user \"" + bounded(username) + "\" cannot get path \"" + bounded(path) + "\"" +
             (verdict->reason.empty() ? "" : ": ") + bounded(verdict->reason)};
    logger()->debug("{}", d.reason);
  }
  cache_.insert(key, d);
  co_return d;
}

}  // namespace tec::ops
