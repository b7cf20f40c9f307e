#include "tec/ops/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace tec::ops {

namespace {

void add_relaxed(std::atomic<double>& a, double v) noexcept {
  a.fetch_add(v, std::memory_order_relaxed);
}

bool valid_metric_name(std::string_view s) {
  if (s.empty()) {
    return false;
  }
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) {
      return false;
    }
  }
  return true;
}

bool valid_label_name(std::string_view s) {
  if (s.empty() || s.starts_with("__")) {
    return false;
  }
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) {
      return false;
    }
  }
  return true;
}

// Go's strconv.FormatFloat(v, 'g', -1, 64) spelling of the specials, shortest round-trip
// digits otherwise (what the Prometheus client libraries emit).
void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc{} ? end : buf);
}

void append_value(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc{} ? end : buf);
}

// Label values: backslash, double quote and line feed are escaped.
void append_label_value(std::string& out, std::string_view v) {
  for (const char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

// HELP text: backslash and line feed are escaped (double quotes are not).
void append_help(std::string& out, std::string_view v) {
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

// One sample line: name{labels[,extra]} value
template <class V>
void append_sample(std::string& out, std::string_view name, std::string_view suffix,
                   std::string_view labels, std::string_view extra_label, V value) {
  out += name;
  out += suffix;
  if (!labels.empty() || !extra_label.empty()) {
    out += '{';
    out += labels;
    if (!labels.empty() && !extra_label.empty()) {
      out += ',';
    }
    out += extra_label;
    out += '}';
  }
  out += ' ';
  append_value(out, value);
  out += '\n';
}

template <class A, class B>
bool lex_less(std::span<A> a, std::span<B> b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](std::string_view x, std::string_view y) { return x < y; });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// counter, gauge, histogram

void counter::inc(double v) noexcept {
  if (!(v >= 0)) {
    return;
  }
  add_relaxed(value_, v);
}

void gauge::inc(double v) noexcept {
  add_relaxed(value_, v);
}

histogram::histogram(const config& cfg)
    : bounds_(cfg.bounds ? cfg.bounds : std::make_shared<const std::vector<double>>()),
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_->size() + 1)) {}

void histogram::observe(double v) noexcept {
  if (std::isnan(v)) {
    return;
  }
  const auto& b = *bounds_;
  // The first bound >= v: a value equal to a bound belongs to that bucket (le semantics).
  const auto i = static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), v) - b.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  add_relaxed(sum_, v);
}

histogram::snapshot_t histogram::snapshot() const {
  snapshot_t s;
  s.counts.resize(bounds_->size() + 1);
  for (std::size_t i = 0; i < s.counts.size(); ++i) {
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
    s.count += s.counts[i];
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

// ---------------------------------------------------------------------------------------------
// families

namespace detail {

family_base::family_base(std::string name, std::string help, std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

std::string family_base::render_labels(std::span<const std::string_view> values) const {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    out += label_names_[i];
    out += "=\"";
    append_label_value(out, values[i]);
    out += '"';
  }
  return out;
}

void family_base::check_label_count(std::size_t n) const {
  if (n != label_names_.size()) {
    throw std::invalid_argument("metric " + name_ + ": " + std::to_string(n) +
                                " label values for " + std::to_string(label_names_.size()) +
                                " label names");
  }
}

bool label_values_less::operator()(std::span<const std::string> a,
                                   std::span<const std::string> b) const {
  return lex_less(a, b);
}
bool label_values_less::operator()(std::span<const std::string> a,
                                   std::span<const std::string_view> b) const {
  return lex_less(a, b);
}
bool label_values_less::operator()(std::span<const std::string_view> a,
                                   std::span<const std::string> b) const {
  return lex_less(a, b);
}

void render_samples(std::string& out, const std::string& name, const std::string& labels,
                    const counter& c) {
  append_sample(out, name, "", labels, "", c.value());
}

void render_samples(std::string& out, const std::string& name, const std::string& labels,
                    const gauge& g) {
  append_sample(out, name, "", labels, "", g.value());
}

void render_samples(std::string& out, const std::string& name, const std::string& labels,
                    const histogram& h) {
  const auto s = h.snapshot();
  const auto& bounds = h.bounds();
  std::uint64_t cumulative = 0;
  std::string le;
  for (std::size_t i = 0; i < s.counts.size(); ++i) {
    cumulative += s.counts[i];
    le = "le=\"";
    append_value(le, i < bounds.size() ? bounds[i] : std::numeric_limits<double>::infinity());
    le += '"';
    append_sample(out, name, "_bucket", labels, le, cumulative);
  }
  append_sample(out, name, "_sum", labels, "", s.sum);
  append_sample(out, name, "_count", labels, "", s.count);
}

const char* type_name(const counter* /*unused*/) {
  return "counter";
}
const char* type_name(const gauge* /*unused*/) {
  return "gauge";
}
const char* type_name(const histogram* /*unused*/) {
  return "histogram";
}

}  // namespace detail

template <class Metric>
void metric_family<Metric>::render(std::string& out) const {
  const std::lock_guard lock(mutex_);
  if (children_.empty()) {
    return;
  }
  out += "# HELP ";
  out += name_;
  out += ' ';
  append_help(out, help_);
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += detail::type_name(static_cast<const Metric*>(nullptr));
  out += '\n';
  for (const auto& [values, c] : children_) {
    detail::render_samples(out, name_, c.labels, *c.metric);
  }
}

template class metric_family<counter>;
template class metric_family<gauge>;
template class metric_family<histogram>;

// ---------------------------------------------------------------------------------------------
// registry

template <class Metric>
metric_family<Metric>& registry::add(std::string name, std::string help,
                                     std::vector<std::string> label_names,
                                     typename Metric::config cfg) {
  if (!valid_metric_name(name)) {
    throw std::invalid_argument("invalid metric name '" + name + "'");
  }
  for (std::size_t i = 0; i < label_names.size(); ++i) {
    const auto& l = label_names[i];
    if (!valid_label_name(l) || (std::is_same_v<Metric, histogram> && l == "le")) {
      throw std::invalid_argument("metric " + name + ": invalid label name '" + l + "'");
    }
    if (std::find(label_names.begin(), label_names.begin() + static_cast<std::ptrdiff_t>(i), l) !=
        label_names.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw std::invalid_argument("metric " + name + ": duplicate label name '" + l + "'");
    }
  }
  auto fam = std::make_unique<metric_family<Metric>>(name, std::move(help), std::move(label_names),
                                                     std::move(cfg));
  auto& ref = *fam;
  if (ref.label_names().empty()) {
    ref.with(std::span<const std::string_view>{});
  }
  const std::lock_guard lock(mutex_);
  if (!families_.emplace(std::move(name), std::move(fam)).second) {
    throw std::invalid_argument("metric " + ref.name() + " is already registered");
  }
  return ref;
}

counter_family& registry::add_counter(std::string name, std::string help,
                                      std::vector<std::string> label_names) {
  return add<counter>(std::move(name), std::move(help), std::move(label_names), {});
}

gauge_family& registry::add_gauge(std::string name, std::string help,
                                  std::vector<std::string> label_names) {
  return add<gauge>(std::move(name), std::move(help), std::move(label_names), {});
}

histogram_family& registry::add_histogram(std::string name, std::string help,
                                          std::vector<double> bounds,
                                          std::vector<std::string> label_names) {
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) {
    bounds.pop_back();
  }
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
      throw std::invalid_argument("metric " + name +
                                  ": bucket bounds must be finite and strictly increasing");
    }
  }
  histogram::config cfg{std::make_shared<const std::vector<double>>(std::move(bounds))};
  return add<histogram>(std::move(name), std::move(help), std::move(label_names), std::move(cfg));
}

std::string registry::render() const {
  std::string out;
  const std::lock_guard lock(mutex_);
  for (const auto& [name, fam] : families_) {
    fam->render(out);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// the daemon's set

std::vector<double> pod_deletion_duration_buckets() {
  return {0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240};
}

standard_metrics register_standard_metrics(registry& r, std::string_view version) {
  constexpr std::string_view p = "taint_eviction_controller_";
  const auto n = [p](std::string_view s) { return std::string(p) + std::string(s); };
  auto& build_info = r.add_gauge(n("build_info"),
                                 "Always 1; the version label is the running build.", {"version"});
  build_info.with({version}).set(1);
  return standard_metrics{
      .pod_deletions =
          r.add_counter(n("pod_deletions_total"), "Pods deleted by the taint eviction controller.")
              .with({}),
      .pod_deletion_duration =
          r.add_histogram(n("pod_deletion_duration_seconds"),
                          "Seconds from when a pod's eviction became due to its deletion.",
                          pod_deletion_duration_buckets())
              .with({}),
      .scheduled_evictions =
          r.add_counter(n("scheduled_evictions_total"), "Pod evictions scheduled.").with({}),
      .cancelled_evictions = r.add_counter(n("cancelled_evictions_total"),
                                           "Scheduled pod evictions cancelled before they ran.")
                                 .with({}),
      .pod_deletion_failures = r.add_counter(
          n("pod_deletion_failures_total"), "Failed pod deletion attempts, by reason.", {"reason"}),
      .pod_deletion_retries =
          r.add_counter(n("pod_deletion_retries_total"), "Pod deletion attempts retried.").with({}),
      .tainted_nodes =
          r.add_gauge(n("tainted_nodes"), "Nodes that carry at least one NoExecute taint.")
              .with({}),
      .watch_restarts =
          r.add_counter(n("watch_restarts_total"), "Watches restarted, by resource.", {"resource"}),
      .relists = r.add_counter(n("relists_total"), "Full re-LISTs, by resource.", {"resource"}),
      .api_requests =
          r.add_counter(n("api_requests_total"),
                        "Kubernetes API requests, by verb and HTTP status code.", {"verb", "code"}),
      .api_request_duration = r.add_histogram(
          n("api_request_duration_seconds"), "Kubernetes API request latency in seconds, by verb.",
          {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}, {"verb"}),
      .events = r.add_counter(
          n("events_total"),
          "Pod events (TaintManagerEviction, TaintEvictionFailed), by what became of them.",
          {"result"}),
      .stuck_evictions =
          r.add_gauge(n("stuck_evictions"),
                      "Evictions that failed at least 5 times in a row and are still retried.")
              .with({}),
      .disruption_condition_failures =
          r.add_counter(n("disruption_condition_failures_total"),
                        "DisruptionTarget condition patches that failed permanently (the "
                        "DELETE went ahead without the condition), by reason.",
                        {"reason"}),
      .watch_decode_errors = r.add_counter(
          n("watch_decode_errors_total"),
          "Objects in watch events or LIST pages that could not be decoded and were skipped, "
          "by resource.",
          {"resource"}),
      .is_leader = r.add_gauge(n("is_leader"),
                               "1 while this process holds the leader election lease, else 0.")
                       .with({}),
      .build_info = build_info.with({version}),
  };
}

}  // namespace tec::ops
