#pragma once

// Who may read what on the secure port: the seam between the HTTP server and delegated
// authentication/authorization (delegated_auth.hpp), so the server's tests use a fake.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>

namespace tec::serving {

enum class auth_outcome : std::uint8_t {
  allowed,          ///< 200 (the request is served).
  unauthenticated,  ///< 401: no bearer token, or one the API server does not accept.
  forbidden,        ///< 403: an authenticated user without RBAC for the path.
  unavailable,      ///< 503: the reviews could not be made (API server unreachable, ...).
};

struct auth_decision {
  auth_outcome outcome = auth_outcome::unavailable;
  /// For the response body and the debug log: why (never contains the token).
  std::string reason;
};

/// Decides whether the sender of a bearer token may GET a path.
///
/// Thread: the HTTP server calls authorize() on its strand, one call per request, possibly
/// many at once (one per connection, at most http_endpoints_options::max_connections); the
/// awaitable runs there and may await work on other executors.
class request_authorizer {
public:
  virtual ~request_authorizer() = default;
  /// `bearer`: the token of the request's "Authorization: Bearer" header, empty when it has
  /// none (or another scheme); any bytes. `path`: the request's path without the query.
  /// `peer`: the client's IP address (a rate limit's key), empty when unknown.
  virtual boost::asio::awaitable<auth_decision> authorize(std::string bearer, std::string path,
                                                          std::string peer) = 0;
};

}  // namespace tec::serving
