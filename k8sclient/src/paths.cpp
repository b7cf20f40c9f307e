#include "tec/k8sclient/paths.hpp"

#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

namespace tec::k8sclient {

std::string escape_path_segment(std::string_view segment) {
  // Boost.URL's encoder: upper-case hex digits, as Go's url.PathEscape writes them.
  return boost::urls::encode(segment, boost::urls::unreserved_chars);
}

}  // namespace tec::k8sclient
