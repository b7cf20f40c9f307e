#include "tec/serving/delegated_auth.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <cassert>
#include <nlohmann/json.hpp>
#include <utility>

#include "tec/base/logger.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/serving/sha256.hpp"

namespace tec::serving {

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

template <class V>
expiring_map<V>::expiring_map(base::clock& clock, std::size_t max_entries)
    : clock_(clock), max_entries_(max_entries) {
  assert(max_entries_ > 0);
}

template <class V>
void expiring_map<V>::erase(typename std::map<std::string, entry>::iterator it) {
  order_.erase(it->second.order);
  entries_.erase(it);
}

template <class V>
V* expiring_map<V>::find(const std::string& k) {
  const auto it = entries_.find(k);
  if (it == entries_.end()) {
    return nullptr;
  }
  if (clock_.now() >= it->second.expires) {
    erase(it);
    return nullptr;
  }
  return &it->second.value;
}

template <class V>
V& expiring_map<V>::insert(const std::string& k, V v, std::chrono::milliseconds ttl) {
  const auto expires = clock_.now() + ttl;
  if (const auto it = entries_.find(k); it != entries_.end()) {
    erase(it);
  }
  while (entries_.size() >= max_entries_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  order_.push_back(k);
  return entries_.emplace(k, entry{std::move(v), expires, std::prev(order_.end())})
      .first->second.value;
}

template class expiring_map<auth_decision>;
template class expiring_map<reviewed_user>;
template class expiring_map<char>;
template class expiring_map<base::token_bucket>;

review_cache::review_cache(base::clock& clock, review_cache_options options)
    : options_(options), entries_(clock, options.max_entries) {}

review_cache::key review_cache::key_of(std::string_view token, std::string_view path) {
  std::string text;
  text.reserve(token.size() + 1 + path.size());
  text.append(token).push_back('\0');
  text.append(path);
  return sha256_hex(text);
}

std::optional<auth_decision> review_cache::find(const key& k) {
  if (const auto* d = entries_.find(k)) {
    return *d;
  }
  return std::nullopt;
}

void review_cache::insert(const key& k, auth_decision d) {
  if (d.outcome == auth_outcome::unavailable) {
    return;
  }
  const auto ttl = d.outcome == auth_outcome::allowed ? options_.allowed_ttl : options_.denied_ttl;
  entries_.insert(k, std::move(d), ttl);
}

// ---------------------------------------------------------------------------------------------

namespace review_json {

// The JSON of a review: invalid UTF-8 (in a token or path the caller did not check) is replaced,
// never thrown.
std::string dump(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string token_review_request(std::string_view token) {
  return dump(json{{"apiVersion", "authentication.k8s.io/v1"},
                   {"kind", "TokenReview"},
                   {"spec", {{"token", token}}}});
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
  return dump(json{{"apiVersion", "authorization.k8s.io/v1"},
                   {"kind", "SubjectAccessReview"},
                   {"spec", std::move(spec)}});
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
    : backend_(std::move(backend)),
      clock_(clock),
      options_(options),
      cache_(clock, options),
      users_(clock, options.max_entries),
      known_(clock, options.max_entries),
      strangers_(clock, options.max_entries),
      max_in_flight_(max_in_flight) {}

namespace {

// A bearer token as RFC 6750 allows it (b64token) is visible ASCII; anything else is no token
// the API server issued, and must not reach a review's JSON.
bool visible_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace

asio::awaitable<auth_decision> delegated_authorizer::authorize(std::string bearer, std::string path,
                                                               std::string peer) {
  if (bearer.empty()) {
    co_return auth_decision{auth_outcome::unauthenticated, "no bearer token"};
  }
  if (!visible_ascii(bearer)) {
    co_return auth_decision{auth_outcome::unauthenticated, "malformed bearer token"};
  }
  const auto key = review_cache::key_of(bearer, path);
  if (auto cached = cache_.find(key)) {
    co_return std::move(*cached);
  }
  const auto token_key = sha256_hex(bearer);
  const bool known = known_.find(token_key) != nullptr;
  std::size_t& in_flight = known ? known_in_flight_ : in_flight_;
  if (in_flight >= max_in_flight_) {
    logger()->debug("{} requests of {} tokens being reviewed: answering 503 to one for {}",
                    in_flight, known ? "known" : "unknown", path);
    co_return auth_decision{auth_outcome::unavailable, "too many requests being authenticated"};
  }
  if (!known) {
    auto* bucket = strangers_.find(peer);
    if (bucket == nullptr) {
      bucket = &strangers_.insert(
          peer,
          base::token_bucket(options_.unknown_per_second, options_.unknown_burst, clock_.now()),
          std::chrono::minutes(1));
    }
    if (!bucket->try_take(clock_.now())) {
      co_return auth_decision{auth_outcome::unavailable,
                              "too many unknown tokens from this address"};
    }
  }
  struct in_flight_slot {
    std::size_t& count;
    explicit in_flight_slot(std::size_t& c) : count(c) { ++count; }
    in_flight_slot(const in_flight_slot&) = delete;
    in_flight_slot& operator=(const in_flight_slot&) = delete;
    ~in_flight_slot() { --count; }
  } const slot(in_flight);
  std::optional<reviewed_user> user;
  if (const auto* u = users_.find(token_key)) {
    user = *u;
  } else {
    auto tr = backend_->token_review(std::move(bearer));  // named: GCC 12
    auto reviewed = co_await std::move(tr);
    if (!reviewed) {
      logger()->warn("cannot authenticate a request for {}: TokenReview failed: {}", path,
                     reviewed.error().message);
      co_return auth_decision{auth_outcome::unavailable, "authentication is unavailable"};
    }
    if (!reviewed->has_value()) {
      auth_decision d{auth_outcome::unauthenticated, "invalid bearer token"};
      cache_.insert(key, d);
      co_return d;
    }
    user = std::move(**reviewed);
    users_.insert(token_key, *user, options_.allowed_ttl);
    known_.insert(token_key, 1, options_.known_ttl);
  }
  const std::string username = user->username;
  auto sar = backend_->access_review(std::move(*user), path);  // named: GCC 12
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

}  // namespace tec::serving
