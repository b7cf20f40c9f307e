#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tec::base {

/// `text` made fit for an API object's message (an Event's): control characters (C0, DEL,
/// C1) become spaces, invalid UTF-8 becomes U+FFFD, and a result longer than `max_bytes` is
/// cut on a character boundary and ends in "..." (at most `max_bytes` bytes in all). Pure;
/// any thread.
std::string sanitize_message(std::string_view text, std::size_t max_bytes);

}  // namespace tec::base
