#pragma once

// What the daemon's --policy does at start, in one call for the policy tests.

#include <string>

#include "tec/policy/policy_file.hpp"

namespace tec::policy::test {

/// Reads `path` (read_policy_text) and parses it.
inline parse_result load_policy_file(const std::string& path) {
  auto text = read_policy_text(path);
  if (!text) {
    return parse_result{std::nullopt, {text.error().message}};
  }
  return parse_policy(*text, path);
}

}  // namespace tec::policy::test
