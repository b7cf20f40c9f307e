#pragma once

// The plugin's output building blocks, as kubectl prints: a table (upper-case headers, columns
// padded to their widest cell, three spaces apart, "<none>" for an empty cell), JSON
// (two-space indentation) and YAML (block style) of one document. Pure; any thread.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tec/controller/model.hpp"

namespace tec::kubectl_plugin {

using table_row = std::vector<std::string>;
/// The JSON and YAML documents: fields in the order they are set.
using document = nlohmann::ordered_json;

/// The table, one line per row after the header, each line ending in '\n'. Cells are made
/// printable (control characters escaped, at most 512 bytes); an empty one is "<none>".
[[nodiscard]] std::string render_table(const table_row& header, const std::vector<table_row>& rows);

/// `doc` as JSON, indented by two, with a final newline.
[[nodiscard]] std::string render_json(const document& doc);

/// `doc` as block-style YAML (strings quoted where YAML would read them otherwise), with a
/// final newline.
[[nodiscard]] std::string render_yaml(const document& doc);

/// The parts joined by commas, as a table cell lists several ("a,b"; "" for none).
[[nodiscard]] std::string join_cell(const std::vector<std::string>& parts);

/// "2026-11-28T03:12:00Z" for seconds since the epoch.
[[nodiscard]] std::string utc_time(std::int64_t unix_seconds);

/// A toleration as one cell: "dedicated=x:NoExecute for 300s", "dedicated:NoExecute
/// (Exists) forever", "* (Exists)" for an empty key with Exists.
[[nodiscard]] std::string toleration_text(const controller::toleration& t);

/// A toleration as the history record writes it: {"key", "operator", "value", "effect",
/// "tolerationSeconds"} (tolerationSeconds null when it tolerates forever).
[[nodiscard]] document toleration_json(const controller::toleration& t);

}  // namespace tec::kubectl_plugin
