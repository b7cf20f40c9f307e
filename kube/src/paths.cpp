#include "tec/kube/paths.hpp"

namespace tec::kube {

std::string escape_path_segment(std::string_view segment) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(segment.size());
  for (const char ch : segment) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4U];
      out += hex[c & 0x0FU];
    }
  }
  return out;
}

}  // namespace tec::kube
