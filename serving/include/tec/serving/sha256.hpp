#pragma once

#include <string>
#include <string_view>

namespace tec::serving {

/// The SHA-256 of `data` as 64 lowercase hex digits (OpenSSL's EVP digest), e.g. the
/// policy_info metric's label and the PolicyApplied Event's digest of the policy file.
std::string sha256_hex(std::string_view data);

}  // namespace tec::serving
