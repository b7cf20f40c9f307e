#pragma once

// result<T>: a value or an error (errors as values), shared by the pure parts of k8sclient and
// informers (config, decode) and the HTTP client: Boost.System's result with the project's error
// type. Kept apart from client.hpp so that code which only decodes or loads configuration does not
// pull in Asio.

#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>
#include <boost/throw_exception.hpp>
#include <string>
#include <system_error>
#include <utility>

#include "tec/base/error.hpp"

namespace tec::base {

/// What result<T>::value() throws on an error (found by ADL): std::system_error with the code
/// and the message. Expected failures are tested first (has_value(), operator bool); value() on
/// an error is a bug, not a way to report one.
[[noreturn]] inline void throw_exception_from_error(const error& e,
                                                    const boost::source_location& loc) {
  boost::throw_exception(std::system_error(e.code, e.message), loc);
}

/// A value or an error; never both. Not thread-safe (a plain value type). error() returns a
/// copy of the error (an empty one when there is a value); operator-> is null on an error.
/// Not for T = bool: tec::base::error converts explicitly to bool, so result<bool> could not
/// be built from an error.
template <class T>
using result = boost::system::result<T, error>;

/// Builds an error in the project category. `message` must not contain secrets.
inline error make_error(errc code, std::string message, int http_status = 0) {
  return error{make_error_code(code), std::move(message), http_status};
}

}  // namespace tec::base
