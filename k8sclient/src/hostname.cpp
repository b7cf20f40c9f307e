#include "tec/k8sclient/hostname.hpp"

#include <unistd.h>

#include <array>

namespace tec::k8sclient {

std::string local_hostname() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0 || buf[0] == '\0') {
    return "unknown";
  }
  return buf.data();
}

}  // namespace tec::k8sclient
