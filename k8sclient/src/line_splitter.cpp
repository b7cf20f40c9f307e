#include "tec/k8sclient/line_splitter.hpp"

namespace tec::k8sclient {

using base::error;

void line_splitter::reset() noexcept {
  discarding_ = false;
  release_buffer();
}

error line_splitter::too_long() const {
  return base::make_error(base::errc::line_too_long, "watch event line longer than " +
                                                         std::to_string(max_) + " bytes dropped");
}

void line_splitter::release_buffer() noexcept {
  // Keep a modest buffer for reuse; give back what an unusually long line grew it to.
  constexpr std::size_t keep = std::size_t{1} << 20U;
  if (buffer_.capacity() > keep) {
    std::string().swap(buffer_);
  } else {
    buffer_.clear();
  }
}

}  // namespace tec::k8sclient
