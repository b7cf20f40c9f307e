#pragma once

// Re-reading the policy file when it changes. A mounted ConfigMap is updated by an atomic swap
// of its `..data` symlink (the file's path stays, its inode and mtime may or may not change),
// so a change is detected by content: each poll() reads the file (at most max_file_bytes) and
// compares it with what the last poll read. Only a changed content is parsed and reported, so
// a broken file is reported once, not at every poll.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/controller/policy.hpp"

namespace tec::policy {

/// What a poll found.
struct reload_result {
  enum class kind : unsigned char {
    unchanged,  ///< Same content (or a new content that parses to the policy in force).
    applied,    ///< A new valid policy: `policy` is set; the caller applies it.
    rejected,   ///< A new content that cannot be used: `errors` say why; the old policy stays.
  };
  kind what = kind::unchanged;
  std::optional<controller::eviction_policy> policy;
  std::vector<std::string> errors;  ///< For rejected: one line each (parse_result::errors).
  /// The file's new content whenever it changed and could be read (also for a change that
  /// leaves the policy as it was, e.g. comments: `what` is then unchanged); empty otherwise.
  std::string text;

  /// The errors joined with "; " (for a single log line).
  [[nodiscard]] std::string summary() const;
};

/// Polls one policy file. Not thread-safe: one owner calls poll(), one call at a time (the
/// daemon calls it on a worker thread of its own: poll() reads the file and parses it, which
/// must not run on an I/O thread).
class reloader {
public:
  using read_fn = std::function<base::result<std::string>(const std::string& path)>;

  /// `path`: the file given to --policy; `in_force`: the policy parsed from it at start.
  /// `read` reads the file (tests inject one); the default is read_policy_text().
  reloader(std::string path, controller::eviction_policy in_force, read_fn read = {});

  /// Reads the file and reports a change. The first poll compares with `in_force` only (the
  /// content read at start is not known here): a file changed between the start and the first
  /// poll is still seen.
  reload_result poll();

  [[nodiscard]] const controller::eviction_policy& in_force() const { return in_force_; }

private:
  std::string path_;
  controller::eviction_policy in_force_;
  read_fn read_;
  /// What the last poll read: the content, or the read error's message.
  std::optional<std::string> last_text_;
  std::optional<std::string> last_read_error_;
};

}  // namespace tec::policy
