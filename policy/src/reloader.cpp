#include "tec/policy/reloader.hpp"

#include <utility>

#include "tec/policy/policy_file.hpp"

namespace tec::policy {

std::string reload_result::summary() const {
  return parse_result{std::nullopt, errors}.summary();
}

reloader::reloader(std::string path, controller::eviction_policy in_force, read_fn read)
    : path_(std::move(path)), in_force_(std::move(in_force)), read_(std::move(read)) {
  if (!read_) {
    read_ = read_policy_text;
  }
}

reload_result reloader::poll() {
  reload_result out;
  auto text = read_(path_);
  if (!text) {
    // The file is gone or unreadable (a ConfigMap deleted, a mount broken): the policy in
    // force stays. Reported once per distinct error.
    std::string message = text.error().message;
    if (last_read_error_ == message) {
      return out;
    }
    last_read_error_ = message;
    last_text_.reset();
    out.what = reload_result::kind::rejected;
    out.errors.push_back(std::move(message));
    return out;
  }
  last_read_error_.reset();
  if (last_text_ == *text) {
    return out;
  }
  last_text_ = *text;
  out.text = *text;
  auto parsed = parse_policy(*text, path_);
  if (!parsed) {
    out.what = reload_result::kind::rejected;
    out.errors = std::move(parsed.errors);
    return out;
  }
  if (*parsed.policy == in_force_) {
    return out;  // e.g. only comments changed
  }
  in_force_ = *parsed.policy;
  out.what = reload_result::kind::applied;
  out.policy = std::move(parsed.policy);
  return out;
}

}  // namespace tec::policy
