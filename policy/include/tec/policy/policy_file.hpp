#pragma once

// The EvictionPolicy file: YAML in, a validated controller::eviction_policy out. Its fields
// are documented in README.md ("Eviction policy").
//
// Strict, as Kubernetes' strict decoding is: an unknown or duplicate field, a value of the
// wrong type, or a number out of range is an error naming the file, line, column and field
// path ("policy.yaml:4:3: rateLimit.burts: unknown field ..."). Every problem is reported, not
// just the first, up to max_reported_errors ("... and N more"), each escaped (control
// characters, line breaks and bytes that are not UTF-8 as \n, \xHH: base::printable) and
// clipped to max_error_bytes. `null` (or an empty value) means "not set".
//
// Bounded by the input (issue 29, after go-yaml's CVE-2019-11253): aliases (`*name`) are
// allowed, but reading a document may cost at most walk_budget_floor + walk_budget_per_byte x
// its size, each node reached counting 1 plus its scalar's length (once per alias that reaches
// it). A document without aliases costs at most about its size; one whose aliases multiply a
// part of it past the budget is refused with that one error. Booleans are `true` or `false`
// only (YAML 1.1's yes/no/on/off are refused: they are a classic source of surprises).
// Growing the format means adding fields to the tables in policy_file.cpp; apiVersion stays
// v1alpha1 while fields are only added.
//
// Pure: no file system access except in read_policy_text(). Any thread.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/controller/policy.hpp"

namespace tec::policy {

inline constexpr std::string_view api_version = "taint-eviction-controller/v1alpha1";
inline constexpr std::string_view kind = "EvictionPolicy";

/// Policy files larger than this are refused. 128 KiB holds thousands of rules; the limit is
/// there for memory: yaml-cpp holds a whole document as nodes, about 240 bytes per byte of a
/// dense file (a 1 MiB file of short values cost ~240 MB in YAML::Load, near the Deployment's
/// 256 MiB limit), so 128 KiB bounds a parse to ~30 MB.
inline constexpr std::size_t max_file_bytes = std::size_t{128} << 10U;

/// At most this many problems are listed; the rest are counted in a last "... and N more".
inline constexpr std::size_t max_reported_errors = 20;
/// Each problem is clipped to about this many bytes ("... [clipped: N bytes]").
inline constexpr std::size_t max_error_bytes = 512;

/// What validating a document may cost (see above): walk_budget_floor + walk_budget_per_byte
/// x its size in bytes.
inline constexpr std::size_t walk_budget_floor = 65'536;
inline constexpr std::size_t walk_budget_per_byte = 2;

/// A policy, or the problems found in the text. Exactly one of the two is set.
struct parse_result {
  std::optional<controller::eviction_policy> policy;
  /// One line each: "<source>:<line>:<column>: <field path>: <what is wrong>", escaped and
  /// clipped; at most max_reported_errors, then "... and N more".
  std::vector<std::string> errors;

  explicit operator bool() const { return policy.has_value(); }
  /// The errors joined with "; " (for a single log line).
  [[nodiscard]] std::string summary() const;
};

/// Parses and validates `text`; `source` names it in messages (the file path).
parse_result parse_policy(std::string_view text, std::string_view source);

/// The content of `path`, or an error naming it (missing, not a regular file, unreadable,
/// larger than max_file_bytes). Symlinks are followed (a ConfigMap mount is made of them).
/// Opens the path once, non-blocking, and checks what it opened (fstat): a FIFO or a device
/// is refused without waiting for a writer or reading it, whatever the path pointed to a
/// moment before. Never reads more than max_file_bytes + 1 bytes. Blocking file I/O: not on
/// an I/O thread.
base::result<std::string> read_policy_text(const std::string& path);

/// One line for the log: what the policy does ("dry-run off, rate limit 5/s burst 10, ...,
/// storm breaker off").
std::string describe(const controller::eviction_policy& p);

}  // namespace tec::policy
