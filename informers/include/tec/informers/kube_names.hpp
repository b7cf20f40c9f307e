#pragma once

// The k8sclient names the informers use unqualified: the codecs and stores are written in the
// client's vocabulary (errors as values, requests and responses, the line splitter). The
// writers and shadow mode name them qualified (base::result).

#include "tec/base/error.hpp"
#include "tec/base/result.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/line_splitter.hpp"

namespace tec::informers {

using base::errc;
using base::error;
using base::make_error;
using base::make_error_code;
using base::printable;
using base::result;
using k8sclient::client;
using k8sclient::line_splitter;
using k8sclient::request;
using k8sclient::response;

}  // namespace tec::informers
