#pragma once

// The kube names the adapters use unqualified: the adapters are written in the client's
// vocabulary (errors as values, requests and responses, the line splitter), and these
// using-declarations keep that code as it was when it lived beside the client.

#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/error.hpp"
#include "tec/k8sclient/line_splitter.hpp"
#include "tec/k8sclient/paths.hpp"
#include "tec/k8sclient/result.hpp"
#include "tec/k8sclient/rfc3339.hpp"

namespace tec::adapters {

using k8sclient::api_error;
using k8sclient::client;
using k8sclient::errc;
using k8sclient::errc_for_status;
using k8sclient::error;
using k8sclient::error_category;
using k8sclient::error_reason;
using k8sclient::escape_path_segment;
using k8sclient::format_rfc3339;
using k8sclient::line_splitter;
using k8sclient::make_error;
using k8sclient::make_error_code;
using k8sclient::printable;
using k8sclient::request;
using k8sclient::response;
using k8sclient::result;

}  // namespace tec::adapters
