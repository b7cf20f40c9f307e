#include "tec/policy/policy_file.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tec/base/duration.hpp"
#include "tec/base/error.hpp"

namespace tec::policy {
namespace {

// Upper bounds that keep numbers sane: anything above them is a typo, not a policy.
constexpr double max_rate = 1e6;
constexpr std::uint32_t max_count = 1'000'000;

/// A number without trailing zeros ("2.5", "100").
std::string format_number(double v) {
  std::string s = std::to_string(v);
  while (s.find('.') != std::string::npos && (s.back() == '0' || s.back() == '.')) {
    s.pop_back();
  }
  return s;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    out += out.empty() ? "" : separator;
    out += item;
  }
  return out;
}

/// Walks the YAML tree and collects the problems with their positions (the first
/// max_reported_errors, then a count), within the walk budget of policy_file.hpp: yaml-cpp
/// shares an aliased node, so `*r` costs the parser nothing but this walk visits the node
/// behind it once per alias (go-yaml's CVE-2019-11253).
class reader {
public:
  reader(std::string_view source, std::size_t text_bytes)
      : source_(source),
        text_bytes_(text_bytes),
        budget_(walk_budget_floor + walk_budget_per_byte * text_bytes) {}

  using value_fn = std::function<void(const YAML::Node& value, const std::string& path)>;
  struct field {
    std::string_view name;
    value_fn read;
  };

  /// Records a problem. Past max_reported_errors only counts it; once the budget is spent,
  /// records nothing (the budget error is the only one reported).
  void error(const YAML::Mark& at, const std::string& path, std::string_view what) {
    if (exhausted_) {
      return;
    }
    if (errors_.size() >= max_reported_errors) {
      ++unreported_;
      return;
    }
    errors_.push_back(format(at, path, what));
  }

  /// Charges a step into `node` against the budget: false once it is spent (the caller stops
  /// walking; the result is then this one error).
  bool step(const YAML::Node& node) {
    if (exhausted_) {
      return false;
    }
    const std::size_t cost = 1 + (node.IsScalar() ? node.Scalar().size() : 0);
    if (cost <= budget_) {
      budget_ -= cost;
      return true;
    }
    exhausted_ = true;
    errors_.clear();
    unreported_ = 0;
    errors_.push_back(
        format(node.Mark(), "",
               "aliases (*name) expand this document past what reading it may cost (" +
                   std::to_string(walk_budget_floor) + " + " +
                   std::to_string(walk_budget_per_byte) + " x its " + std::to_string(text_bytes_) +
                   " bytes, each node counting 1 plus its length): write the repeated parts out "
                   "instead of aliasing them so often"));
    return false;
  }

private:
  /// "<source>:<line>:<column>: <path>: <what>", escaped and clipped.
  [[nodiscard]] std::string format(const YAML::Mark& at, const std::string& path,
                                   std::string_view what) const {
    std::string line(source_);
    if (!at.is_null()) {
      line += ':' + std::to_string(at.line + 1) + ':' + std::to_string(at.column + 1);
    }
    line += ": ";
    if (!path.empty()) {
      line += path + ": ";
    }
    line += what;
    // Keys, values and the file's path are the user's: escaped, so that no byte of them can
    // end the log line or forge another one, and clipped.
    return base::printable(line, max_error_bytes);
  }

public:
  /// Reads a mapping: each key must be one of `fields` and appear once. Null values are
  /// skipped (not set).
  void map(const YAML::Node& node, const std::string& path, const std::vector<field>& fields) {
    if (!step(node)) {
      return;
    }
    if (!node.IsMap()) {
      error(node.Mark(), path, "expected a mapping, got " + describe(node));
      return;
    }
    std::set<std::string, std::less<>> seen;
    for (const auto& kv : node) {
      const YAML::Node& key = kv.first;
      if (!step(key)) {
        return;
      }
      if (!key.IsScalar()) {
        error(key.Mark(), path, "keys must be strings");
        continue;
      }
      const std::string name = key.Scalar();
      std::string child = path;
      if (!child.empty()) {
        child += '.';
      }
      child += name;
      if (!seen.insert(name).second) {
        error(key.Mark(), child, "duplicate field");
        continue;
      }
      const field* f = nullptr;
      for (const auto& candidate : fields) {
        if (candidate.name == name) {
          f = &candidate;
        }
      }
      if (f == nullptr) {
        std::string known;
        for (const auto& candidate : fields) {
          known += known.empty() ? "" : ", ";
          known += candidate.name;
        }
        error(key.Mark(), child, "unknown field (known: " + known + ")");
        continue;
      }
      if (kv.second.IsNull()) {
        continue;
      }
      if (!step(kv.second)) {
        return;
      }
      f->read(kv.second, child);
    }
  }

  std::optional<std::string> string(const YAML::Node& node, const std::string& path) {
    if (!node.IsScalar()) {
      error(node.Mark(), path, "expected a string, got " + describe(node));
      return std::nullopt;
    }
    return node.Scalar();
  }

  std::optional<bool> boolean(const YAML::Node& node, const std::string& path) {
    if (plain_scalar(node) && (node.Scalar() == "true" || node.Scalar() == "false")) {
      return node.Scalar() == "true";
    }
    error(node.Mark(), path, "expected true or false, got " + describe(node));
    return std::nullopt;
  }

  std::optional<std::uint32_t> count(const YAML::Node& node, const std::string& path,
                                     std::uint32_t max = max_count) {
    if (plain_scalar(node)) {
      const std::string& s = node.Scalar();
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc{} && end == s.data() + s.size() && !s.empty()) {
        if (v > max) {
          error(node.Mark(), path, "must be at most " + std::to_string(max) + ", got " + s);
          return std::nullopt;
        }
        return static_cast<std::uint32_t>(v);
      }
      if (!s.empty() && s.front() == '-') {
        error(node.Mark(), path, "must not be negative, got " + s);
        return std::nullopt;
      }
    }
    error(node.Mark(), path, "expected a whole number >= 0, got " + describe(node));
    return std::nullopt;
  }

  std::optional<double> number(const YAML::Node& node, const std::string& path, double max) {
    if (plain_scalar(node)) {
      const std::string& s = node.Scalar();
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(v) &&
          s.find_first_of("xXnN") == std::string::npos) {  // no hex floats, nan, inf
        if (v < 0) {
          error(node.Mark(), path, "must not be negative, got " + s);
          return std::nullopt;
        }
        if (v > max) {
          error(node.Mark(), path, "must be at most " + format_number(max) + ", got " + s);
          return std::nullopt;
        }
        return v;
      }
    }
    error(node.Mark(), path, "expected a number >= 0, got " + describe(node));
    return std::nullopt;
  }

  /// A Go duration ("30s", "10m", "1h30m", "0s"): not negative, at most 100 years. A minus
  /// sign is negative unless every digit is zero ("-0s" is zero, as in Go): "-0.4ms" is
  /// negative although it rounds to 0 ms.
  std::optional<std::chrono::milliseconds> duration(const YAML::Node& node,
                                                    const std::string& path) {
    if (node.IsScalar()) {
      if (const auto d = base::parse_go_duration(node.Scalar())) {
        const std::string& text = node.Scalar();
        const bool minus =
            text.starts_with('-') && text.find_first_of("123456789") != std::string::npos;
        if (d->count() < 0 || minus) {
          error(node.Mark(), path, "must not be negative, got " + describe(node));
          return std::nullopt;
        }
        if (*d > std::chrono::hours(24 * 365 * 100)) {
          error(node.Mark(), path, "must be at most 100 years, got " + describe(node));
          return std::nullopt;
        }
        return d;
      }
    }
    error(node.Mark(), path,
          "expected a duration such as 30s, 10m or 1h30m, got " + describe(node));
    return std::nullopt;
  }

  /// A field reader that stores a valid value in `target` (nothing on an error).
  value_fn set_bool(bool& target) {
    return [this, &target](const YAML::Node& v, const std::string& p) {
      if (auto b = boolean(v, p)) {
        target = *b;
      }
    };
  }
  value_fn set_count(std::uint32_t& target, std::uint32_t max = max_count) {
    return [this, &target, max](const YAML::Node& v, const std::string& p) {
      if (auto x = count(v, p, max)) {
        target = *x;
      }
    };
  }
  value_fn set_number(double& target, double max) {
    return [this, &target, max](const YAML::Node& v, const std::string& p) {
      if (auto x = number(v, p, max)) {
        target = *x;
      }
    };
  }

  /// One of `names` (a string), as its value; the error lists them ("must be A, B or C").
  template <class T>
  std::optional<T> choice(const YAML::Node& node, const std::string& path,
                          std::initializer_list<std::pair<std::string_view, T>> names) {
    const auto s = string(node, path);
    if (!s) {
      return std::nullopt;
    }
    std::string known;
    std::size_t i = 0;
    for (const auto& [name, value] : names) {
      if (name == *s) {
        return value;
      }
      known += i == 0 ? "" : (i + 1 == names.size() ? " or " : ", ");
      known += name;
      ++i;
    }
    error(node.Mark(), path, "must be " + known + ", got " + describe(node));
    return std::nullopt;
  }

  template <class F>
  void sequence(const YAML::Node& node, const std::string& path, F&& each) {
    if (!node.IsSequence()) {
      error(node.Mark(), path, "expected a list, got " + describe(node));
      return;
    }
    std::size_t i = 0;
    for (const auto& item : node) {
      if (!step(item)) {
        return;
      }
      each(item, path + "[" + std::to_string(i++) + "]");
    }
  }

  /// The problems found, with "... and N more" last when there were more than
  /// max_reported_errors.
  [[nodiscard]] std::vector<std::string> take_errors() {
    if (unreported_ > 0) {
      errors_.push_back("... and " + std::to_string(unreported_) + " more");
      unreported_ = 0;
    }
    return std::move(errors_);
  }
  [[nodiscard]] bool ok() const { return errors_.empty(); }

  static std::string describe(const YAML::Node& node) {
    switch (node.Type()) {
      case YAML::NodeType::Map:
        return "a mapping";
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Scalar:
        return (plain_scalar(node) ? "" : "the quoted string ") + quote(node.Scalar());
      case YAML::NodeType::Null:
        return "null";
      case YAML::NodeType::Undefined:
        break;
    }
    return "nothing";
  }

private:
  /// Unquoted scalars only: "5" in quotes is a string, not a number (as in strict JSON).
  static bool plain_scalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() == "?"; }

  static std::string quote(const std::string& s) { return '"' + base::printable(s, 64) + '"'; }

  std::string_view source_;
  std::size_t text_bytes_;
  std::vector<std::string> errors_;
  std::size_t unreported_ = 0;  ///< Problems found past max_reported_errors.
  std::size_t budget_;          ///< What the walk may still spend (step()).
  bool exhausted_ = false;
};

bool alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/// A label value: empty, or at most 63 characters [A-Za-z0-9-_.] starting and ending
/// alphanumeric.
bool valid_label_value(std::string_view v) {
  if (v.empty()) {
    return true;
  }
  if (v.size() > 63 || !alnum(v.front()) || !alnum(v.back())) {
    return false;
  }
  return std::all_of(v.begin(), v.end(),
                     [](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

/// A qualified name as Kubernetes validates label and taint keys: an optional DNS subdomain
/// prefix and '/', then a name of at most 63 characters [A-Za-z0-9][-A-Za-z0-9_.]*.
bool valid_taint_key(std::string_view key) {
  std::string_view name = key;
  if (const auto slash = key.find('/'); slash != std::string_view::npos) {
    const std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty() || prefix.size() > 253) {
      return false;
    }
    if (!std::all_of(prefix.begin(), prefix.end(),
                     [](char c) { return lower_alnum(c) || c == '-' || c == '.'; })) {
      return false;
    }
  }
  return !name.empty() && valid_label_value(name);
}

/// A namespace name (a DNS-1123 label): at most 63 characters [a-z0-9-], starting and ending
/// alphanumeric.
bool valid_namespace(std::string_view v) {
  if (v.empty() || v.size() > 63 || !lower_alnum(v.front()) || !lower_alnum(v.back())) {
    return false;
  }
  return std::all_of(v.begin(), v.end(), [](char c) { return lower_alnum(c) || c == '-'; });
}

constexpr std::string_view key_syntax =
    " (an optional DNS subdomain and '/', then at most 63 characters [A-Za-z0-9-_.], starting "
    "and ending alphanumeric)";

/// A taint rule's key: a taint key, or a prefix of one followed by '*' ("example.com/*",
/// "node.kubernetes.io/not-*", "*"). The prefix is checked for characters a key may hold.
bool valid_rule_key(std::string_view key, bool& prefix) {
  prefix = !key.empty() && key.back() == '*';
  if (!prefix) {
    return valid_taint_key(key);
  }
  const std::string_view head = key.substr(0, key.size() - 1);
  if (head.find('*') != std::string_view::npos || std::count(head.begin(), head.end(), '/') > 1 ||
      head.size() > 253 + 1 + 63) {
    return false;
  }
  return std::all_of(head.begin(), head.end(), [](char c) {
    return alnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

/// A list of strings into `out`; one that fails `valid` is reported as `invalid` instead.
void read_strings(reader& r, const YAML::Node& node, const std::string& path,
                  bool (*valid)(std::string_view), std::string_view invalid,
                  std::vector<std::string>& out) {
  r.sequence(node, path, [&](const YAML::Node& item, const std::string& ip) {
    if (auto s = r.string(item, ip)) {
      if (valid != nullptr && !valid(*s)) {
        r.error(item.Mark(), ip, invalid);
      } else {
        out.push_back(*s);
      }
    }
  });
}

void read_selector(reader& r, const YAML::Node& node, const std::string& path,
                   controller::label_selector& out) {
  r.map(
      node, path,
      {
          {"matchLabels",
           [&](const YAML::Node& v, const std::string& p) {
             if (!v.IsMap()) {
               r.error(v.Mark(), p, "expected a mapping, got " + reader::describe(v));
               return;
             }
             for (const auto& kv : v) {
               if (!r.step(kv.first) || !r.step(kv.second)) {
                 return;
               }
               const auto key = r.string(kv.first, p);
               if (!key) {
                 continue;
               }
               const std::string kp = p + "." + *key;
               if (!valid_taint_key(*key)) {
                 r.error(kv.first.Mark(), kp, "not a valid key" + std::string(key_syntax));
                 continue;
               }
               const auto value =
                   kv.second.IsNull() ? std::optional<std::string>("") : r.string(kv.second, kp);
               if (value && !valid_label_value(*value)) {
                 r.error(kv.second.Mark(), kp,
                         "not a valid label value (at most 63 characters [A-Za-z0-9-_.], "
                         "starting and ending alphanumeric)");
               } else if (value) {
                 out.match_labels.emplace_back(*key, *value);
               }
             }
           }},
          {"matchExpressions",
           [&](const YAML::Node& v, const std::string& p) {
             r.sequence(v, p, [&](const YAML::Node& item, const std::string& ip) {
               controller::label_requirement req;
               bool has_key = false;
               bool has_op = false;
               bool has_values = false;
               using o = controller::label_requirement::op;
               std::optional<o> parsed_op;
               r.map(item, ip,
                     {
                         {"key",
                          [&](const YAML::Node& kv, const std::string& kp) {
                            if (auto s = r.string(kv, kp)) {
                              has_key = true;
                              req.key = *s;
                              if (!valid_taint_key(*s)) {
                                r.error(kv.Mark(), kp, "not a valid key" + std::string(key_syntax));
                              }
                            }
                          }},
                         {"operator",
                          [&](const YAML::Node& ov, const std::string& op) {
                            has_op = ov.IsScalar();
                            parsed_op = r.choice<o>(ov, op,
                                                    {{"In", o::in},
                                                     {"NotIn", o::not_in},
                                                     {"Exists", o::exists},
                                                     {"DoesNotExist", o::does_not_exist}});
                          }},
                         {"values",
                          [&](const YAML::Node& vv, const std::string& vp) {
                            has_values = true;
                            read_strings(r, vv, vp, nullptr, {}, req.values);
                          }},
                     });
               if (!item.IsMap()) {
                 return;
               }
               if (!has_key) {
                 r.error(item.Mark(), ip + ".key", "missing");
               }
               if (!has_op) {
                 r.error(item.Mark(), ip + ".operator", "missing");
                 return;
               }
               if (!parsed_op) {
                 return;
               }
               req.operator_ = *parsed_op;
               const bool set_op = req.operator_ == o::in || req.operator_ == o::not_in;
               if (set_op && req.values.empty()) {
                 r.error(item.Mark(), ip + ".values", "must not be empty for In and NotIn");
               } else if (!set_op && has_values && !req.values.empty()) {
                 r.error(item.Mark(), ip + ".values", "must be empty for Exists and DoesNotExist");
               }
               out.match_expressions.push_back(std::move(req));
             });
           }},
      });
}

void read_exclude(reader& r, const YAML::Node& node, const std::string& path,
                  controller::exclude_policy& out) {
  r.map(
      node, path,
      {
          {"namespaces",
           [&](const YAML::Node& v, const std::string& p) {
             read_strings(r, v, p, valid_namespace,
                          "not a valid namespace name (at most 63 characters [a-z0-9-], starting "
                          "and ending alphanumeric)",
                          out.namespaces);
           }},
          {"podSelector", [&](const YAML::Node& v,
                              const std::string& p) { read_selector(r, v, p, out.pod_selector); }},
          {"mirrorPods", r.set_bool(out.mirror_pods)},
          {"terminalPods", r.set_bool(out.terminal_pods)},
          {"daemonSetPods", r.set_bool(out.daemon_set_pods)},
      });
}

// tolerationSeconds floors and caps: at most 100 years, as toleration_time::max_delay.
constexpr std::uint32_t max_seconds = 3'153'600'000U;

void read_taint_rules(reader& r, const YAML::Node& node, const std::string& path,
                      std::vector<controller::taint_rule>& out) {
  r.sequence(node, path, [&](const YAML::Node& item, const std::string& ip) {
    controller::taint_rule rule;
    bool has_key = false;
    bool key_ok = false;
    bool has_action = false;
    bool has_seconds = false;
    bool has_fallback = false;
    const auto seconds = [&](std::int64_t& target) -> reader::value_fn {
      return [&](const YAML::Node& v, const std::string& p) {
        if (auto x = r.count(v, p, max_seconds)) {
          has_seconds = has_seconds || *x > 0;
          target = *x;
        }
      };
    };
    r.map(item, ip,
          {
              {"key",
               [&](const YAML::Node& v, const std::string& p) {
                 if (auto s = r.string(v, p)) {
                   has_key = true;
                   if (valid_rule_key(*s, rule.prefix)) {
                     key_ok = true;
                     rule.key = rule.prefix ? s->substr(0, s->size() - 1) : *s;
                   } else {
                     r.error(v.Mark(), p,
                             "not a valid taint key or prefix (a taint key, or the start of one "
                             "followed by a single '*' at the end, e.g. example.com/*)");
                   }
                 }
               }},
              {"action",
               [&](const YAML::Node& v, const std::string& p) {
                 using a = controller::taint_action;
                 has_action = v.IsScalar();
                 if (auto x = r.choice<a>(v, p, {{"Evict", a::evict}, {"Ignore", a::ignore}})) {
                   rule.action = *x;
                 }
               }},
              {"minTolerationSeconds", seconds(rule.min_toleration_seconds)},
              {"maxTolerationSeconds", seconds(rule.max_toleration_seconds)},
              {"fallbackAfter",
               [&](const YAML::Node& v, const std::string& p) {
                 if (auto d = r.duration(v, p)) {
                   has_fallback = true;
                   rule.fallback_after = *d;
                 }
               }},
          });
    if (!item.IsMap()) {
      return;
    }
    if (!has_key) {
      r.error(item.Mark(), ip + ".key", "missing");
      return;
    }
    if (has_action && rule.action == controller::taint_action::ignore && has_seconds) {
      r.error(item.Mark(), ip,
              "minTolerationSeconds and maxTolerationSeconds have no effect with action Ignore");
    }
    if (has_action && rule.action == controller::taint_action::ignore && has_fallback) {
      r.error(item.Mark(), ip + ".fallbackAfter", "has no effect with action Ignore");
    }
    if (rule.max_toleration_seconds > 0 &&
        rule.min_toleration_seconds > rule.max_toleration_seconds) {
      r.error(item.Mark(), ip + ".minTolerationSeconds",
              "must not exceed maxTolerationSeconds (" +
                  std::to_string(rule.min_toleration_seconds) + " > " +
                  std::to_string(rule.max_toleration_seconds) + ")");
    }
    if (!key_ok) {
      return;
    }
    for (const auto& earlier : out) {
      // An earlier prefix covers every key starting with it; an earlier exact key only itself.
      if (earlier.prefix ? rule.key.starts_with(earlier.key)
                         : !rule.prefix && earlier.key == rule.key) {
        r.error(item.Mark(), ip + ".key",
                "never applies: an earlier rule (" + earlier.key + (earlier.prefix ? "*" : "") +
                    ") matches every key this one does (the first matching rule wins)");
        return;
      }
    }
    out.push_back(std::move(rule));
  });
}

void read_rate_limit(reader& r, const YAML::Node& node, const std::string& path,
                     controller::rate_limit_policy& out) {
  r.map(node, path,
        {
            {"evictionsPerSecond", r.set_number(out.evictions_per_second, max_rate)},
            {"burst", r.set_count(out.burst)},
            {"maxInFlightPerNode", r.set_count(out.max_in_flight_per_node)},
            {"maxInFlightPerNamespace", r.set_count(out.max_in_flight_per_namespace)},
        });
}

// stormBreaker.settleSeconds: every eviction a new taint causes waits this long, so more than
// a few minutes would be an outage of eviction rather than a pause to count the storm.
constexpr std::uint32_t max_settle_seconds = 600;

// maxHold: a hold-until annotation keeps an eviction waiting at most this long; a week is the
// most a forgotten annotation may suspend eviction.
constexpr auto max_max_hold = std::chrono::hours(24 * 7);

void read_storm_breaker(reader& r, const YAML::Node& node, const std::string& path,
                        controller::storm_breaker_policy& out) {
  r.map(node, path,
        {
            {"maxTaintedNodesPercent", r.set_number(out.max_tainted_nodes_percent, 100)},
            {"minTaintedNodes", r.set_count(out.min_tainted_nodes)},
            {"hysteresisPercent", r.set_number(out.hysteresis_percent, 100)},
            {"taintKeys",
             [&](const YAML::Node& v, const std::string& p) {
               read_strings(r, v, p, valid_taint_key,
                            "not a valid taint key" + std::string(key_syntax), out.taint_keys);
             }},
            {"settleSeconds", r.set_count(out.settle_seconds, max_settle_seconds)},
        });
  if (out.hysteresis_percent > out.max_tainted_nodes_percent && out.enabled()) {
    r.error(node.Mark(), path + ".hysteresisPercent",
            "must not exceed maxTaintedNodesPercent (the breaker could never close)");
  }
  if (out.settle_seconds > 0 && !out.enabled()) {
    r.error(node.Mark(), path + ".settleSeconds",
            "has no effect without maxTaintedNodesPercent (the breaker is off)");
  }
}

void read_admission(reader& r, const YAML::Node& node, const std::string& path,
                    controller::admission_policy& out) {
  r.map(node, path,
        {
            {"denyEvictingMoreThan",
             [&](const YAML::Node& v, const std::string& p) {
               if (auto x = r.count(v, p)) {
                 out.deny_evicting_more_than = *x;
               }
             }},
            {"denyIfBreakerOpens", r.set_bool(out.deny_if_breaker_opens)},
        });
}

}  // namespace

std::string parse_result::summary() const {
  return join(errors, "; ");
}

parse_result parse_policy(std::string_view text, std::string_view source) {
  parse_result out;
  reader r(source, text.size());
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file".
    r.error(e.mark, "",
            "not read: nested " + std::to_string(e.depth()) +
                " levels deep, the most the YAML parser allows (a policy needs fewer than 10)");
    out.errors = r.take_errors();
    return out;
  } catch (const YAML::ParserException& e) {
    r.error(e.mark, "", "not valid YAML: " + e.msg);
    out.errors = r.take_errors();
    return out;
  }
  if (!root.IsMap()) {
    r.error(root.Mark(), "", "expected an EvictionPolicy mapping, got " + reader::describe(root));
    out.errors = r.take_errors();
    return out;
  }
  controller::eviction_policy policy;
  bool has_version = false;
  bool has_kind = false;
  const auto constant = [&r](bool& seen, std::string_view want) -> reader::value_fn {
    return [&r, &seen, want](const YAML::Node& v, const std::string& p) {
      seen = true;
      if (auto s = r.string(v, p); s && *s != want) {
        r.error(v.Mark(), p, "must be " + std::string(want));
      }
    };
  };
  r.map(
      root, "",
      {
          {"apiVersion", constant(has_version, api_version)},
          {"kind", constant(has_kind, kind)},
          {"dryRun", r.set_bool(policy.dry_run)},
          {"evictionMode",
           [&](const YAML::Node& v, const std::string& p) {
             using m = controller::eviction_mode;
             if (auto x = r.choice<m>(v, p, {{"Delete", m::delete_pod}, {"Evict", m::evict}})) {
               policy.mode = *x;
             }
           }},
          {"fallbackAfter",
           [&](const YAML::Node& v, const std::string& p) {
             if (auto d = r.duration(v, p)) {
               policy.fallback_after = *d;
             }
           }},
          {"maxHold",
           [&](const YAML::Node& v, const std::string& p) {
             if (auto d = r.duration(v, p)) {
               if (d->count() == 0 || *d > max_max_hold) {
                 r.error(
                     v.Mark(), p,
                     "must be more than 0s and at most 168h (a week), got " + reader::describe(v));
               } else {
                 policy.max_hold = *d;
               }
             }
           }},
          {"rateLimit", [&](const YAML::Node& v,
                            const std::string& p) { read_rate_limit(r, v, p, policy.rate_limit); }},
          {"stormBreaker",
           [&](const YAML::Node& v, const std::string& p) {
             read_storm_breaker(r, v, p, policy.storm_breaker);
           }},
          {"exclude", [&](const YAML::Node& v,
                          const std::string& p) { read_exclude(r, v, p, policy.exclude); }},
          {"taints", [&](const YAML::Node& v,
                         const std::string& p) { read_taint_rules(r, v, p, policy.taints); }},
          {"admission", [&](const YAML::Node& v,
                            const std::string& p) { read_admission(r, v, p, policy.admission); }},
      });
  if (policy.admission.deny_if_breaker_opens && !policy.storm_breaker.enabled()) {
    r.error(root.Mark(), "admission.denyIfBreakerOpens",
            "has no effect without stormBreaker.maxTaintedNodesPercent");
  }
  if (!has_version) {
    r.error(root.Mark(), "apiVersion", "missing (must be " + std::string(api_version) + ")");
  }
  if (!has_kind) {
    r.error(root.Mark(), "kind", "missing (must be " + std::string(kind) + ")");
  }
  if (r.ok()) {
    out.policy = std::move(policy);
  } else {
    out.errors = r.take_errors();
  }
  return out;
}

base::result<std::string> read_policy_text(const std::string& path) {
  // Opened once, without blocking, and checked through the descriptor: a path checked first
  // and opened after can be swapped for a FIFO in between, whose open() blocks until a writer
  // comes. Symlinks are followed, as a ConfigMap mount needs.
  const std::string name = base::printable(path, 256);
  const auto fail = [&](const std::string& why) {
    return base::make_error(base::errc::config_invalid, name + ": " + why);
  };
  // Right after the failed call, before anything else may change errno.
  const auto fail_errno = [&](const char* what) {
    const int err = errno;
    return fail(std::string(what) + " the policy file (" + std::generic_category().message(err) +
                ")");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return fail_errno("cannot open");
  }
  const auto close_fd = [](const int* f) { ::close(*f); };
  const std::unique_ptr<const int, decltype(close_fd)> closing(&fd, close_fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return fail_errno("cannot read");
  }
  if (!S_ISREG(st.st_mode)) {
    return fail("not a regular file");
  }
  if (st.st_size < 0 || static_cast<std::uintmax_t>(st.st_size) > max_file_bytes) {
    return fail("larger than " + std::to_string(max_file_bytes) + " bytes");
  }
  // The file may grow between fstat and read: never more than max_file_bytes + 1 bytes.
  std::string text(max_file_bytes + 1, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = ::read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return fail_errno("cannot read");
    }
    if (n == 0) {
      break;
    }
    size += static_cast<std::size_t>(n);
  }
  if (size > max_file_bytes) {
    return fail("larger than " + std::to_string(max_file_bytes) + " bytes");
  }
  text.resize(size);
  return text;
}

std::string describe(const controller::eviction_policy& p) {
  const auto count = [](std::uint32_t n) {
    return n == 0 ? std::string("unlimited") : std::to_string(n);
  };
  std::string out = p.dry_run ? "dry-run on" : "dry-run off";
  if (p.mode == controller::eviction_mode::evict) {
    out += ", evictionMode Evict, fallback ";
    out += p.fallback_after.count() > 0 ? "after " + base::format_duration(p.fallback_after)
                                        : std::string("never");
  }
  const auto& r = p.rate_limit;
  if (r.evictions_per_second > 0) {
    out += ", rate limit " + format_number(r.evictions_per_second) + "/s burst " +
           (r.burst == 0 ? std::string("auto") : std::to_string(r.burst));
  } else {
    out += ", no rate limit";
  }
  out += ", in flight per node " + count(r.max_in_flight_per_node) + ", per namespace " +
         count(r.max_in_flight_per_namespace);
  const auto& b = p.storm_breaker;
  if (b.enabled()) {
    out += ", storm breaker above " + format_number(b.max_tainted_nodes_percent) +
           "% of nodes tainted (at least " + std::to_string(b.min_tainted_nodes) +
           " nodes), closing below " +
           format_number(b.max_tainted_nodes_percent - b.hysteresis_percent) + "%";
    if (b.taint_keys.empty()) {
      out += ", any NoExecute taint";
    } else {
      out += ", taint keys " + join(b.taint_keys, ",");
    }
    if (b.settle_seconds > 0) {
      out += ", settling " + std::to_string(b.settle_seconds) + "s";
    }
  } else {
    out += ", storm breaker off";
  }
  const auto& ex = p.exclude;
  if (ex.empty()) {
    out += ", no exclusions";
  } else {
    std::vector<std::string> parts;
    for (const auto& [on, part] :
         {std::pair{!ex.namespaces.empty(), "namespaces " + join(ex.namespaces, ",")},
          std::pair{!ex.pod_selector.empty(), std::string("pods matching the selector")},
          std::pair{ex.mirror_pods, std::string("mirror pods")},
          std::pair{ex.terminal_pods, std::string("terminal pods")},
          std::pair{ex.daemon_set_pods, std::string("DaemonSet pods")}}) {
      if (on) {
        parts.push_back(part);
      }
    }
    out += ", excluded: " + join(parts, ", ");
  }
  if (p.max_hold != controller::eviction_policy{}.max_hold) {
    out += ", maxHold " + base::format_duration(p.max_hold);
  }
  if (p.taints.empty()) {
    out += ", no taint rules";
  } else {
    out += ", taint rules";
    for (std::size_t i = 0; i < p.taints.size(); ++i) {
      const auto& t = p.taints[i];
      out += (i == 0 ? " " : "; ") + t.key + (t.prefix ? "*" : "") + " " +
             (t.action == controller::taint_action::ignore ? "Ignore" : "Evict");
      if (t.min_toleration_seconds > 0) {
        out += " min " + std::to_string(t.min_toleration_seconds) + "s";
      }
      if (t.max_toleration_seconds > 0) {
        out += " max " + std::to_string(t.max_toleration_seconds) + "s";
      }
      if (t.fallback_after) {
        out += " fallback " + (t.fallback_after->count() > 0
                                   ? "after " + base::format_duration(*t.fallback_after)
                                   : std::string("never"));
      }
    }
  }
  // Only when set: the line of a policy without deny mode reads as before.
  const auto& a = p.admission;
  if (a.deny_mode()) {
    out += ", admission denies taints";
    if (a.deny_evicting_more_than) {
      out += " evicting more than " + std::to_string(*a.deny_evicting_more_than) + " pods";
    }
    if (a.deny_if_breaker_opens) {
      out += std::string(a.deny_evicting_more_than ? " or" : "") + " opening the storm breaker";
    }
    out += " unless acknowledged";
  }
  return out;
}

}  // namespace tec::policy
