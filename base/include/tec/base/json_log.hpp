#pragma once

// The JSON log format (--log-format=json): one JSON object per line, for every logger.

#include <spdlog/common.h>
#include <spdlog/formatter.h>

#include <memory>
#include <string_view>

namespace tec::base {

/// Appends the message part of a JSON log line to `dest`: `"msg":"<payload escaped>"`. Pure;
/// any thread.
void append_json_message(std::string_view payload, spdlog::memory_buf_t& dest);

/// A new formatter writing each record as one line
/// `{"ts":"<RFC 3339 UTC, microseconds>","level":..,"logger":..,<append_json_message>}`.
/// The caller owns it (usually a sink, through set_formatter); a formatter is used by one
/// thread at a time (spdlog's sinks lock around it).
std::unique_ptr<spdlog::formatter> make_json_log_formatter();

}  // namespace tec::base
