#pragma once

// result<T>: a value or an error (errors as values), shared by the pure parts of kube and adapters
// (config, decode) and the HTTP client. Kept apart from client.hpp so that code which only
// decodes or loads configuration does not pull in Asio.

#include <string>
#include <utility>
#include <variant>

#include "tec/kube/error.hpp"

namespace tec::kube {

/// A value or an error; never both. Not thread-safe (a plain value type).
template <class T>
class result {
public:
  result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  result(error err) : v_(std::move(err)) {}  // NOLINT(google-explicit-constructor)
  [[nodiscard]] bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  [[nodiscard]] const error& err() const { return std::get<1>(v_); }

private:
  std::variant<T, error> v_;
};

/// Builds an error in the project category. `message` must not contain secrets.
inline error make_error(errc code, std::string message, int http_status = 0) {
  return error{make_error_code(code), std::move(message), http_status};
}

}  // namespace tec::kube
