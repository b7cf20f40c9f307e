#pragma once

// The kube names the adapters use unqualified: the adapters are written in the client's
// vocabulary (errors as values, requests and responses, the line splitter), and these
// using-declarations keep that code as it was when it lived beside the client.

#include "tec/kube/api_error.hpp"
#include "tec/kube/client.hpp"
#include "tec/kube/error.hpp"
#include "tec/kube/line_splitter.hpp"
#include "tec/kube/paths.hpp"
#include "tec/kube/result.hpp"
#include "tec/kube/rfc3339.hpp"

namespace tec::adapters {

using kube::api_error;
using kube::client;
using kube::errc;
using kube::errc_for_status;
using kube::error;
using kube::error_category;
using kube::error_reason;
using kube::escape_path_segment;
using kube::format_rfc3339;
using kube::line_splitter;
using kube::make_error;
using kube::make_error_code;
using kube::printable;
using kube::request;
using kube::response;
using kube::result;

}  // namespace tec::adapters
