#pragma once

// Escaping of what goes into a request target: path segments and query values.

#include <string>
#include <string_view>

namespace tec::k8sclient {

/// Percent-encodes everything but RFC 3986 unreserved characters, so a name can be put in a
/// URL path, or a query value (continue tokens are base64, with '=' and '/'). Kubernetes names
/// never need it; it keeps a bad name from changing the path.
std::string escape_path_segment(std::string_view segment);

}  // namespace tec::k8sclient
