#pragma once

// The k8sclient names the informers use unqualified: the codecs and stores are written in the
// client's vocabulary (errors as values, requests and responses, the line splitter). The
// writers and shadow mode name them qualified (k8sclient::result).

#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/error.hpp"
#include "tec/k8sclient/line_splitter.hpp"
#include "tec/k8sclient/paths.hpp"
#include "tec/k8sclient/result.hpp"
#include "tec/k8sclient/rfc3339.hpp"

namespace tec::informers {

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

}  // namespace tec::informers
