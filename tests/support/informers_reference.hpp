#pragma once

// Test-only: the reference JSON decoder (tec_informers_reference, built with the tests, the fuzz
// targets or the benchmarks, never linked into the daemon). The same field mapping as
// decode.hpp's (informers/src/json_walk.hpp), fed by nlohmann's DOM, an independent parser, so
// that the tests and the fuzz target can compare the production decoder (simdjson) against it. Same
// contract as decode.hpp, with one difference by design: an integer outside [-2^63, 2^64) is
// malformed JSON for simdjson and a floating-point number here.

#include <string_view>

#include "tec/informers/decode.hpp"

namespace tec::informers::reference {

/// As informers::decode_pod_event and the others, through nlohmann's DOM.
result<pod_event> decode_pod_event(std::string_view line);
result<node_event> decode_node_event(std::string_view line);
result<pod_list> decode_pod_list(std::string_view body);
result<node_list> decode_node_list(std::string_view body);
result<pod_record> decode_pod(std::string_view json);
result<node_record> decode_node(std::string_view json);
result<api_status> decode_status(std::string_view json);

}  // namespace tec::informers::reference
