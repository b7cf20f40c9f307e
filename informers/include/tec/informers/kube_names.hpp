#pragma once

// The k8sclient names the informers use unqualified: the codecs and stores are written in the
// client's vocabulary (errors as values, requests and responses, the line splitter). The
// writers and shadow mode name them qualified (base::result).

#include "tec/base/error.hpp"
#include "tec/base/result.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/line_splitter.hpp"
#include "tec/k8sclient/paths.hpp"

namespace tec::informers {

using base::errc;
using base::error;
using base::error_category;
using base::format_rfc3339;
using base::make_error;
using base::make_error_code;
using base::printable;
using base::result;
using k8sclient::api_error;
using k8sclient::client;
using k8sclient::errc_for_status;
using k8sclient::error_reason;
using k8sclient::escape_path_segment;
using k8sclient::line_splitter;
using k8sclient::request;
using k8sclient::response;

}  // namespace tec::informers
