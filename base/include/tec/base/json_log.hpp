#pragma once

// The JSON log format (--log-format=json): one JSON object per line, for every logger, with the
// key=value pairs of the message's text as fields of their own (README "Logging").

#include <spdlog/common.h>
#include <spdlog/formatter.h>

#include <cstddef>
#include <memory>
#include <string_view>

namespace tec::base {

/// Most fields taken from one message; later pairs stay in the message text only.
inline constexpr std::size_t max_json_log_fields = 16;

/// Appends the message part of a JSON log line to `dest`, always valid JSON members (every
/// string escaped, invalid UTF-8 as U+FFFD):
///  - a payload that is itself one JSON object (the "history" logger's records; on one line,
///    at most 64 KiB) is embedded as an object: `"msg":"record","record":{...}`;
///  - any other payload is `"msg":"<payload>"` (the text of the text format, unchanged), then
///    one string field per `key=value` pair in it, as the messages write them: a key
///    ([A-Za-z_][A-Za-z0-9_.-]*, at most 64 bytes) at the start or after a space, then `=`,
///    then a value either quoted (`"..."`, backslash escapes \" \\ \n \t \r decoded) or running
///    to the next space (a trailing `:`, `,`, `;`, `.` or `)` belongs to the sentence and is
///    dropped). The first of repeated keys wins; keys the line itself uses (ts, level, logger,
///    msg, record, caller) are skipped; at most max_json_log_fields. A `pod` value of the form
///    NAMESPACE/NAME stays one string, as kube-controller-manager's taint manager logs it, and
///    adds `"namespace":"NAMESPACE"` (unless a `namespace` field came first). Values are
///    strings, whatever they look like, so a field's type never changes from line to line.
/// Pure; any thread; linear in the payload's size.
void append_json_message(std::string_view payload, spdlog::memory_buf_t& dest);

/// A new formatter writing each record as one line
/// `{"ts":"<RFC 3339 UTC, microseconds>","level":..,"logger":..,<append_json_message>}`.
/// The caller owns it (usually a sink, through set_formatter); a formatter is used by one
/// thread at a time (spdlog's sinks lock around it).
std::unique_ptr<spdlog::formatter> make_json_log_formatter();

}  // namespace tec::base
