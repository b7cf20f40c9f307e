#pragma once

// ::read(2), again after EINTR (a signal came): the kubeconfig's file reads and the exec
// plugin's pipe drains both need it.

#include <unistd.h>

#include <cerrno>
#include <span>

namespace tec::k8sclient::detail {

/// What ::read() returns for `buffer`, never -1 with errno EINTR.
inline ssize_t read_retrying(int fd, std::span<char> buffer) {
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n >= 0 || errno != EINTR) {
      return n;
    }
  }
}

}  // namespace tec::k8sclient::detail
