#pragma once

// Internal to informers and the tests' reference decoder: reading the known members of a parsed
// JSON document through a view of its DOM, with their JSON types checked and the JSON path of
// the value being read kept for error messages. Nothing here knows a Pod or a Node:
// json_walk.hpp says which members are read.
//
// A DOM view is a struct with `node`, `kind(node) -> value_kind`, `boolean`, `integer`,
// `floating`, `string`, `each_member(node, f(key, value) -> bool)` and
// `each_element(node, f(value) -> bool)`, each called only on a value of the kind it reads;
// decode.cpp has simdjson's (production), tests/support/informers_reference.cpp nlohmann's.

#include <array>
#include <cassert>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tec/informers/kube_names.hpp"

namespace tec::informers::json_walk {

/// Input quoted in an error message is clipped to this many bytes.
inline constexpr std::size_t max_error_detail = 200;

/// Nesting deeper than this is malformed JSON (simdjson's default maximum depth, which decode.cpp
/// checks; the reference decoder applies the same limit). A Pod or Node follows a fixed schema a
/// few dozen levels deep; nothing the API server sends comes near it.
inline constexpr std::size_t max_json_depth = 1024;

/// The JSON type of a DOM value, as the readers distinguish them.
enum class value_kind : std::uint8_t {
  null,
  boolean,
  signed_integer,    // fits std::int64_t
  unsigned_integer,  // above INT64_MAX, fits std::uint64_t
  floating,          // a fraction or an exponent (or, for nlohmann, an integer beyond 64 bits)
  string,
  array,
  object,
};

/// "got ..." in a type error.
constexpr std::string_view describe(value_kind k) noexcept {
  constexpr std::array<std::string_view, 8> names = {
      "null", "a boolean", "a number", "a number", "a number", "a string", "an array", "an object"};
  return names.at(static_cast<std::size_t>(k));
}

/// `text` without a leading UTF-8 byte order mark (nlohmann skips one; simdjson does not).
inline std::string_view without_bom(std::string_view text) noexcept {
  return text.substr(0, 3) == "\xEF\xBB\xBF" ? text.substr(3) : text;
}

/// Input quoted in an error message: clipped and escaped (it ends up in logs).
inline std::string clip(std::string_view text) {
  return printable(text, max_error_detail);
}

/// The JSON path of the container being read and the first error found. The names on the path
/// are views into the document or the readers' literals, valid while the document is read.
class trail {
public:
  explicit trail(std::string_view what) : what_(what) {}

  /// Enters member `name` of the current container, or (`name` empty) its element `index`.
  void enter(std::string_view name, std::size_t index = 0) noexcept {
    // Only known members are entered, so the depth is bounded by the schema (at most 5).
    assert(depth_ < path_.size());
    path_[depth_++] = step{name, index};
  }
  void leave() noexcept { --depth_; }

  /// The JSON path of the current container, e.g. "items[3].spec.tolerations".
  [[nodiscard]] std::string path() const {
    std::string out;
    for (std::size_t i = 0; i < depth_; ++i) {
      if (path_[i].name.empty()) {
        out += '[';
        out += std::to_string(path_[i].index);
        out += ']';
      } else {
        if (!out.empty()) {
          out += '.';
        }
        out += path_[i].name;
      }
    }
    return out;
  }

  /// Records "what: message" unless an error is recorded already. Always false.
  bool fail(errc code, std::string_view message) {
    if (!error_) {
      error_ = make_error(code, std::string(what_) + ": " + std::string(message));
    }
    return false;
  }

  /// An unexpected_shape error at member `name` of the current container.
  bool fail_at(std::string_view name, std::string_view why) {
    std::string p = path();
    if (!p.empty()) {
      p += '.';
    }
    p += name;
    return fail(errc::unexpected_shape, p + ": " + std::string(why));
  }

  /// Appends `text` to the recorded error's message.
  void append_to_failure(std::string_view text) {
    assert(error_);
    error_->message += text;
  }

  /// The recorded error; the trail is spent.
  error take_failure() { return std::move(*error_); }

private:
  struct step {
    std::string_view name;  // a member's name, or empty for an array index
    std::size_t index = 0;
  };

  std::string_view what_;
  std::array<step, 8> path_{};
  std::size_t depth_ = 0;
  std::optional<error> error_;
};

/// Reads the value of a known member `name` as the type it must have, into a `take` callback.
/// null is always accepted as "absent" (nothing is taken); another type is an unexpected_shape
/// error at the member's path. Every reader returns false once an error is recorded, which ends
/// the walk: members are visited in document order, so the first wrong type in that order is
/// the error.
template <class Dom>
class reader {
public:
  using node = typename Dom::node;

  explicit reader(trail& t) noexcept : trail_(t) {}

  [[nodiscard]] trail& errors() noexcept { return trail_; }

  /// A string: take(std::string_view), which may return false after recording an error.
  template <class Take>
  bool string(std::string_view name, const node& v, Take&& take) {
    const value_kind k = Dom::kind(v);
    if (k != value_kind::string) {
      return k == value_kind::null || type_error(name, "a string", k);
    }
    if constexpr (std::is_void_v<std::invoke_result_t<Take, std::string_view>>) {
      take(Dom::string(v));
      return true;
    } else {
      return take(Dom::string(v));
    }
  }

  /// An integer that fits T (std::int32_t or std::int64_t): take(T).
  template <class T, class Take>
  bool integer(std::string_view name, const node& v, Take&& take) {
    const value_kind k = Dom::kind(v);
    switch (k) {
      case value_kind::null:
        return true;
      case value_kind::signed_integer:
        if (const std::int64_t i = Dom::integer(v); std::in_range<T>(i)) {
          take(static_cast<T>(i));
          return true;
        }
        break;
      case value_kind::unsigned_integer:
        break;
      case value_kind::floating:
        return trail_.fail_at(name, "expected an integer, got a floating-point number (" +
                                        format_double(Dom::floating(v)) + ")");
      default:
        return type_error(name, "an integer", k);
    }
    return trail_.fail_at(
        name, sizeof(T) == 4 ? "integer out of int32 range" : "integer out of int64 range");
  }

  /// A boolean, into `out`.
  bool boolean(std::string_view name, const node& v, bool& out) {
    const value_kind k = Dom::kind(v);
    if (k != value_kind::boolean) {
      return k == value_kind::null || type_error(name, "a boolean", k);
    }
    out = Dom::boolean(v);
    return true;
  }

  /// An object: each(key, value) -> bool for its members, with `name` on the path.
  template <class Each>
  bool object(std::string_view name, const node& v, Each&& each) {
    const value_kind k = Dom::kind(v);
    if (k != value_kind::object) {
      return k == value_kind::null || type_error(name, "an object", k);
    }
    trail_.enter(name);
    const bool ok = Dom::each_member(v, each);
    trail_.leave();
    return ok;
  }

  /// An array of objects: each element(value) with "name[index]" on the path; an element that
  /// is not an object is an error.
  template <class Element>
  bool array(std::string_view name, const node& v, Element&& element) {
    const value_kind k = Dom::kind(v);
    if (k != value_kind::array) {
      return k == value_kind::null || type_error(name, "an array", k);
    }
    trail_.enter(name);
    std::size_t index = 0;
    const bool ok = Dom::each_element(v, [&](const node& e) {
      const value_kind ek = Dom::kind(e);
      if (ek != value_kind::object) {
        return trail_.fail(errc::unexpected_shape, trail_.path() + "[" + std::to_string(index) +
                                                       "]: expected an object, got " +
                                                       std::string(describe(ek)));
      }
      trail_.enter({}, index++);
      const bool element_ok = element(e);
      trail_.leave();
      return element_ok;
    });
    trail_.leave();
    return ok;
  }

  /// "expected <expected>, got <what `got` is>" at member `name`.
  bool type_error(std::string_view name, std::string_view expected, value_kind got) {
    return trail_.fail_at(
        name, "expected " + std::string(expected) + ", got " + std::string(describe(got)));
  }

private:
  static std::string format_double(double v) {
    std::array<char, 32> buf{};
    const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    return ec == std::errc{} ? std::string(buf.data(), end) : std::string("?");
  }

  trail& trail_;
};

}  // namespace tec::informers::json_walk
