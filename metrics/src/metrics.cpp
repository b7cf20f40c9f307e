#include "tec/metrics/metrics.hpp"

#include <prometheus/check_names.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace tec::metrics {

namespace {

template <class Impl>
prometheus::Family<Impl>& build_family(prometheus::Registry& r, const std::string& name,
                                       const std::string& help) {
  return prometheus::detail::Builder<Impl>().Name(name).Help(help).Register(r);
}

[[noreturn]] void throw_bad_label(const std::string& metric, std::string_view problem,
                                  const std::string& label) {
  throw std::invalid_argument("metric " + metric + ": " + std::string(problem) + " label name '" +
                              label + "'");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// counter, gauge, histogram

void counter::inc(double v) noexcept {
  if (!(v >= 0)) {
    return;
  }
  c_->Increment(v);
}

double counter::value() const noexcept {
  return c_->Value();
}

void gauge::set(double v) noexcept {
  g_->Set(v);
}

void gauge::inc(double v) noexcept {
  g_->Increment(v);
}

double gauge::value() const noexcept {
  return g_->Value();
}

void histogram::observe(double v) noexcept {
  if (std::isnan(v)) {
    return;
  }
  h_->Observe(v);
}

histogram::snapshot_t histogram::snapshot_for_test() const {
  const auto m = h_->Collect();
  snapshot_t s;
  s.counts.reserve(m.histogram.bucket.size());
  std::uint64_t below = 0;
  for (const auto& b : m.histogram.bucket) {
    s.counts.push_back(b.cumulative_count - below);
    below = b.cumulative_count;
  }
  s.sum = m.histogram.sample_sum;
  s.count = m.histogram.sample_count;
  return s;
}

// ---------------------------------------------------------------------------------------------
// families

namespace detail {

family_base::family_base(std::string name, std::vector<std::string> label_names)
    : name_(std::move(name)), label_names_(std::move(label_names)) {}

void family_base::check_label_count(std::size_t n) const {
  if (n != label_names_.size()) {
    throw std::invalid_argument("metric " + name_ + ": " + std::to_string(n) +
                                " label values for " + std::to_string(label_names_.size()) +
                                " label names");
  }
}

}  // namespace detail

template <class Metric>
metric_family<Metric>::metric_family(prometheus::Family<typename Metric::impl_type>& family,
                                     std::string name, std::vector<std::string> label_names,
                                     typename Metric::config cfg)
    : family_base(std::move(name), std::move(label_names)),
      family_(family),
      config_(std::move(cfg)) {}

template <class Metric>
metric_family<Metric>::~metric_family() = default;

template <class Metric>
Metric& metric_family<Metric>::with(std::span<const std::string_view> values) {
  check_label_count(values.size());
  const std::lock_guard lock(mutex_);
  auto it = children_.find(values);
  if (it != children_.end()) {
    return *it->second;
  }
  prometheus::Labels labels;
  for (std::size_t i = 0; i < values.size(); ++i) {
    labels.emplace(label_names_[i], values[i]);
  }
  std::unique_ptr<Metric> child;
  if constexpr (std::is_same_v<Metric, histogram>) {
    child = std::make_unique<histogram>(family_.Add(labels, *config_.bounds));
  } else {
    child = std::make_unique<Metric>(family_.Add(labels));
  }
  std::vector<std::string> key(values.begin(), values.end());
  return *children_.emplace(std::move(key), std::move(child)).first->second;
}

template <class Metric>
void metric_family<Metric>::keep_only(std::initializer_list<std::string_view> values) {
  const std::span<const std::string_view> keep(values.begin(), values.size());
  check_label_count(keep.size());
  const std::lock_guard lock(mutex_);
  for (auto it = children_.begin(); it != children_.end();) {
    if (std::equal(it->first.begin(), it->first.end(), keep.begin(), keep.end())) {
      ++it;
      continue;
    }
    if constexpr (std::is_same_v<Metric, counter>) {
      family_.Remove(it->second->c_);
    } else if constexpr (std::is_same_v<Metric, gauge>) {
      family_.Remove(it->second->g_);
    } else {
      family_.Remove(it->second->h_);
    }
    it = children_.erase(it);
  }
}

template class metric_family<counter>;
template class metric_family<gauge>;
template class metric_family<histogram>;

// ---------------------------------------------------------------------------------------------
// registry

registry::registry()
    : registry_(
          std::make_unique<prometheus::Registry>(prometheus::Registry::InsertBehavior::Throw)) {}

registry::~registry() = default;

void registry::reserve_name(const std::string& name) {
  if (!names_.insert(name).second) {
    throw std::invalid_argument("metric " + name + " is already registered");
  }
}

template <class Metric>
metric_family<Metric>& registry::add(std::string name, const std::string& help,
                                     std::vector<std::string> label_names,
                                     typename Metric::config cfg) {
  if (!prometheus::CheckMetricName(name)) {
    throw std::invalid_argument("invalid metric name '" + name + "'");
  }
  if (help.find_first_of("\\\n") != std::string::npos) {
    throw std::invalid_argument("metric " + name + ": help text with a backslash or a line feed");
  }
  for (std::size_t i = 0; i < label_names.size(); ++i) {
    const auto& l = label_names[i];
    if (!prometheus::CheckLabelName(l) || (std::is_same_v<Metric, histogram> && l == "le")) {
      throw_bad_label(name, "invalid", l);
    }
    const auto before = label_names.begin() + static_cast<std::ptrdiff_t>(i);
    if (std::find(label_names.begin(), before, l) != before) {
      throw_bad_label(name, "duplicate", l);
    }
  }
  const bool unlabelled = label_names.empty();
  metric_family<Metric>* fam = nullptr;
  {
    const std::lock_guard lock(mutex_);
    reserve_name(name);
    auto& impl = build_family<typename Metric::impl_type>(*registry_, name, help);
    families_.push_back(std::make_unique<metric_family<Metric>>(
        impl, std::move(name), std::move(label_names), std::move(cfg)));
    fam = static_cast<metric_family<Metric>*>(families_.back().get());
  }
  if (unlabelled) {
    fam->with(std::span<const std::string_view>{});
  }
  return *fam;
}

counter_family& registry::add_counter(std::string name, const std::string& help,
                                      std::vector<std::string> label_names) {
  return add<counter>(std::move(name), help, std::move(label_names), {});
}

gauge_family& registry::add_gauge(std::string name, const std::string& help,
                                  std::vector<std::string> label_names) {
  return add<gauge>(std::move(name), help, std::move(label_names), {});
}

histogram_family& registry::add_histogram(std::string name, const std::string& help,
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
  return add<histogram>(std::move(name), help, std::move(label_names), std::move(cfg));
}

void registry::add_collectable(std::shared_ptr<const prometheus::Collectable> c,
                               const std::vector<std::string>& names) {
  const std::lock_guard lock(mutex_);
  for (const auto& n : names) {
    if (!prometheus::CheckMetricName(n)) {
      throw std::invalid_argument("invalid metric name '" + n + "'");
    }
    if (names_.contains(n)) {
      throw std::invalid_argument("metric " + n + " is already registered");
    }
  }
  names_.insert(names.begin(), names.end());
  collectables_.push_back(std::move(c));
}

void registry::publish(const table& t, std::string_view prefix) {
  const std::lock_guard lock(mutex_);
  std::vector<published_row> added;
  std::set<std::string, std::less<>> declared;
  for (const auto& r : t) {
    std::string name = std::string(prefix) + r.name;
    if (!prometheus::CheckMetricName(name)) {
      throw std::invalid_argument("invalid metric name '" + name + "'");
    }
    if (!r.label.empty() && !prometheus::CheckLabelName(r.label)) {
      throw_bad_label(name, "invalid", r.label);
    }
    if (r.help.find_first_of("\\\n") != std::string::npos) {
      throw std::invalid_argument("metric " + name + ": help text with a backslash or a line feed");
    }
    if (!r.read) {
      throw std::invalid_argument("metric " + name + ": no reader");
    }
    if (!r.help.empty()) {
      if (names_.contains(name) || !declared.insert(name).second) {
        throw std::invalid_argument("metric " + name + " is already registered");
      }
    } else {
      const auto same = [&](const published_row& p) {
        return p.full_name == name && !p.r.help.empty() && p.r.kind == r.kind &&
               p.r.label == r.label;
      };
      if (std::none_of(rows_.begin(), rows_.end(), same) &&
          std::none_of(added.begin(), added.end(), same)) {
        throw std::invalid_argument("metric " + name +
                                    ": adds to a family no earlier row declares with its kind "
                                    "and label");
      }
    }
    added.push_back({r, std::move(name)});
  }
  names_.insert(declared.begin(), declared.end());
  rows_.insert(rows_.end(), std::make_move_iterator(added.begin()),
               std::make_move_iterator(added.end()));
}

std::vector<prometheus::MetricFamily> registry::collect_rows() const {
  std::vector<published_row> rows;
  {
    const std::lock_guard lock(mutex_);
    rows = rows_;
  }
  // Declared families in publishing order; contributions summed into them by label value.
  std::vector<prometheus::MetricFamily> out;
  std::map<std::string, std::map<std::string, double>, std::less<>> values;
  for (const auto& p : rows) {
    if (!p.r.help.empty()) {
      prometheus::MetricFamily f;
      f.name = p.full_name;
      f.help = p.r.help;
      f.type = p.r.kind == kind::counter ? prometheus::MetricType::Counter
                                         : prometheus::MetricType::Gauge;
      out.push_back(std::move(f));
    }
    auto& v = values[p.full_name];
    for (auto& s : p.r.read()) {
      v[p.r.label.empty() ? std::string() : std::move(s.label_value)] += s.value;
    }
  }
  const std::lock_guard lock(exposed_mutex_);
  for (auto& f : out) {
    const auto& label = std::find_if(rows.begin(), rows.end(), [&](const published_row& p) {
                          return p.full_name == f.name;
                        })->r.label;
    for (const auto& [label_value, value] : values[f.name]) {
      prometheus::ClientMetric m;
      if (f.type == prometheus::MetricType::Counter) {
        auto& last = exposed_[f.name + '\0' + label_value];
        last = std::max(value, last);
        m.counter.value = last;
      } else {
        m.gauge.value = value;
      }
      if (!label.empty()) {
        m.label.push_back({label, label_value});
      }
      f.metric.push_back(std::move(m));
    }
  }
  std::erase_if(out, [](const auto& f) { return f.metric.empty(); });
  return out;
}

std::string registry::render() const {
  auto families = registry_->Collect();
  auto published = collect_rows();
  families.insert(families.end(), std::make_move_iterator(published.begin()),
                  std::make_move_iterator(published.end()));
  std::vector<std::shared_ptr<const prometheus::Collectable>> collectables;
  {
    const std::lock_guard lock(mutex_);
    collectables = collectables_;
  }
  for (const auto& c : collectables) {
    auto more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  // prometheus-cpp orders by type, then registration, and children by hash: sorted, the
  // exposition is stable from one scrape to the next (and readable in a diff).
  std::sort(families.begin(), families.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& f : families) {
    std::sort(f.metric.begin(), f.metric.end(),
              [](const auto& a, const auto& b) { return a.label < b.label; });
  }
  return prometheus::TextSerializer().Serialize(families);
}

// ---------------------------------------------------------------------------------------------
// the daemon's set

std::vector<double> pod_deletion_duration_buckets() {
  return {0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240};
}

std::vector<double> eviction_wait_duration_buckets() {
  return {0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
}

namespace {

constexpr std::string_view prefix = "taint_eviction_controller_";

// A family's full name.
std::string full_name(std::string_view name) {
  return std::string(prefix) + std::string(name);
}

}  // namespace

standard_metrics register_standard_metrics(registry& r, const build_labels& build) {
  auto& build_info = r.add_gauge(full_name("build_info"),
                                 "Always 1; the version, commit and compiler labels are the "
                                 "running build's.",
                                 {"version", "commit", "compiler"});
  build_info.with({build.version, build.commit, build.compiler}).set(1);
  // 1 until a reload fails: without --policy there is nothing to fail.
  auto& policy_ok =
      r.add_gauge(full_name("policy_last_reload_successful"),
                  "1 when the last load or reload of the policy file succeeded (or there is no "
                  "--policy), 0 when it was rejected and the previous policy stayed in force.")
          .with({});
  policy_ok.set(1);
  return standard_metrics{
      .pod_deletion_duration =
          r.add_histogram(full_name("pod_deletion_duration_seconds"),
                          "Seconds from when a pod's eviction became due to its deletion.",
                          pod_deletion_duration_buckets())
              .with({}),
      .api_requests =
          r.add_counter(full_name("api_requests_total"),
                        "Kubernetes API requests, by verb and HTTP status code.", {"verb", "code"}),
      .api_request_duration =
          r.add_histogram(full_name("api_request_duration_seconds"),
                          "Kubernetes API request latency in seconds, by verb.",
                          {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}, {"verb"}),
      .is_leader = r.add_gauge(full_name("is_leader"),
                               "1 while this process holds the leader election lease, else 0.")
                       .with({}),
      .eviction_wait_duration =
          r.add_histogram(full_name("eviction_wait_duration_seconds"),
                          "Seconds an eviction the eviction policy held back waited from when "
                          "it was due to when it started.",
                          eviction_wait_duration_buckets())
              .with({}),
      .policy_reload_failures =
          r.add_counter(full_name("policy_reload_failures_total"),
                        "Policy file changes rejected (invalid, unreadable or missing); the "
                        "policy in force stayed.")
              .with({}),
      .policy_last_reload_successful = policy_ok,
      .policy_last_reload_success_timestamp =
          r.add_gauge(full_name("policy_last_reload_success_timestamp_seconds"),
                      "Unix time the policy file was last loaded or reloaded successfully (0: "
                      "never, or no --policy).")
              .with({}),
      .policy_info =
          r.add_gauge(full_name("policy_info"),
                      "Always 1; sha256 is the SHA-256 of the policy file in force.", {"sha256"}),
      .build_info = build_info.with({build.version, build.commit, build.compiler}),
  };
}

std::vector<double> shadow_agreement_delay_buckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

shadow_metrics register_shadow_metrics(registry& r) {
  auto& decisions = r.add_counter(
      full_name("shadow_decisions_total"),
      "Shadow mode: pods settled by outcome (agreed, only_them, only_us, cancelled_both, "
      "ambiguous).",
      {"outcome"});
  for (const std::string_view outcome :
       {"agreed", "only_them", "only_us", "cancelled_both", "ambiguous"}) {
    decisions.with({outcome});
  }
  return shadow_metrics{
      .decisions = decisions,
      .agreement_delay =
          r.add_histogram(full_name("shadow_agreement_delay_seconds"),
                          "Shadow mode: seconds between the built-in taint manager's eviction "
                          "and ours, for agreed pods.",
                          shadow_agreement_delay_buckets())
              .with({}),
      .pending = r.add_gauge(full_name("shadow_pending"),
                             "Shadow mode: pods with a decision (ours or theirs) not yet settled.")
                     .with({}),
      .settled_early =
          r.add_counter(full_name("shadow_settled_early_total"),
                        "Shadow mode: pods settled early, as their best guess, because too many "
                        "were pending.")
              .with({}),
  };
}

}  // namespace tec::metrics
