#pragma once

// A small Prometheus metrics registry: counters, gauges and histograms, optionally with
// labels, rendered in the text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
//
// Hot path: updating a metric is one or two relaxed atomic operations. Looking a labelled
// child up by its label values takes the family's mutex and a map lookup without allocating
// (allocation only the first time a label combination is seen); callers on a hot path look a
// child up once and keep the reference, which stays valid as long as the registry.
//
// Defining a metric wrongly (invalid name, duplicate name, unsorted buckets, wrong number of
// label values) is a programming error, not a runtime condition: the definitions are
// constants in the daemon, and the first test that builds the registry fails. Those calls
// throw std::invalid_argument rather than return an error value (an assert would vanish in
// release builds and leave an exposition Prometheus rejects).

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tec::ops {

/// The Content-Type of render()'s output.
inline constexpr std::string_view metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// A monotonically increasing value. Thread-safe; lock-free on x86-64.
class counter {
public:
  struct config {};
  counter() = default;
  explicit counter(const config& /*unused*/) {}
  counter(const counter&) = delete;
  counter& operator=(const counter&) = delete;

  /// Adds `v` (default 1). A negative or NaN `v` is ignored: counters never go down.
  void inc(double v = 1) noexcept;
  [[nodiscard]] double value() const noexcept { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<double> value_{0};
};

/// A value that goes up and down. Thread-safe; lock-free on x86-64.
class gauge {
public:
  struct config {};
  gauge() = default;
  explicit gauge(const config& /*unused*/) {}
  gauge(const gauge&) = delete;
  gauge& operator=(const gauge&) = delete;

  void set(double v) noexcept { value_.store(v, std::memory_order_relaxed); }
  void inc(double v = 1) noexcept;
  void dec(double v = 1) noexcept { inc(-v); }
  [[nodiscard]] double value() const noexcept { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<double> value_{0};
};

/// Observations counted into buckets with upper bounds `le` (a value equal to a bound counts
/// in that bucket), plus their sum and count. Thread-safe; observe() is lock-free on x86-64.
///
/// A scrape concurrent with observe() may see an observation in the buckets and the count
/// but not yet in the sum (or the reverse); buckets and count are always consistent with each
/// other, because the count is the total of the bucket counts.
class histogram {
public:
  struct config {
    /// Finite, strictly increasing upper bounds; +Inf is implicit.
    std::shared_ptr<const std::vector<double>> bounds;
  };
  /// `cfg.bounds` must be valid (validated by registry::add_histogram; nullptr means none).
  explicit histogram(const config& cfg);
  histogram(const histogram&) = delete;
  histogram& operator=(const histogram&) = delete;

  /// Records one observation. NaN is ignored.
  void observe(double v) noexcept;

  /// Consistent-enough copy for tests and rendering: per-bucket (not cumulative) counts, the
  /// last one for +Inf.
  struct snapshot_t {
    std::vector<std::uint64_t> counts;
    double sum = 0;
    std::uint64_t count = 0;
  };
  [[nodiscard]] snapshot_t snapshot() const;
  [[nodiscard]] const std::vector<double>& bounds() const noexcept { return *bounds_; }

private:
  std::shared_ptr<const std::vector<double>> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // bounds_->size() + 1 (+Inf)
  std::atomic<double> sum_{0};
};

namespace detail {

// What the registry needs from a family of any type.
class family_base {
public:
  family_base(std::string name, std::string help, std::vector<std::string> label_names);
  virtual ~family_base() = default;
  family_base(const family_base&) = delete;
  family_base& operator=(const family_base&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const std::vector<std::string>& label_names() const noexcept {
    return label_names_;
  }
  // Appends "# HELP", "# TYPE" and every child's samples; nothing if there are no children.
  virtual void render(std::string& out) const = 0;

protected:
  // `name{labels}` pairs rendered once per child: name="value",... (escaped), or empty.
  [[nodiscard]] std::string render_labels(std::span<const std::string_view> values) const;
  void check_label_count(std::size_t n) const;

  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
};

// Orders label-value vectors and lets them be looked up by views without allocating.
struct label_values_less {
  using is_transparent = void;
  bool operator()(std::span<const std::string> a, std::span<const std::string> b) const;
  bool operator()(std::span<const std::string> a, std::span<const std::string_view> b) const;
  bool operator()(std::span<const std::string_view> a, std::span<const std::string> b) const;
};

void render_samples(std::string& out, const std::string& name, const std::string& labels,
                    const counter& c);
void render_samples(std::string& out, const std::string& name, const std::string& labels,
                    const gauge& g);
void render_samples(std::string& out, const std::string& name, const std::string& labels,
                    const histogram& h);
const char* type_name(const counter*);
const char* type_name(const gauge*);
const char* type_name(const histogram*);

}  // namespace detail

/// All the time series of one metric name, one child per combination of label values.
///
/// Thread/ownership: owned by its registry; every member may be called from any thread.
/// References returned by with() stay valid as long as the registry.
template <class Metric>
class metric_family final : public detail::family_base {
public:
  metric_family(std::string name, std::string help, std::vector<std::string> label_names,
                typename Metric::config cfg)
      : family_base(std::move(name), std::move(help), std::move(label_names)),
        config_(std::move(cfg)) {}

  /// The child for these label values (in label_names() order), created on first use.
  /// Throws std::invalid_argument when the number of values differs from the label names.
  Metric& with(std::span<const std::string_view> values) {
    check_label_count(values.size());
    const std::lock_guard lock(mutex_);
    auto it = children_.find(values);
    if (it == children_.end()) {
      std::vector<std::string> key(values.begin(), values.end());
      it = children_
               .emplace(std::move(key),
                        child{render_labels(values), std::make_unique<Metric>(config_)})
               .first;
    }
    return *it->second.metric;
  }
  Metric& with(std::initializer_list<std::string_view> values) {
    return with(std::span<const std::string_view>(values.begin(), values.size()));
  }

  void render(std::string& out) const override;

private:
  struct child {
    std::string labels;
    std::unique_ptr<Metric> metric;
  };
  typename Metric::config config_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, child, detail::label_values_less> children_;
};

// Instantiated once, in metrics.cpp.
extern template class metric_family<counter>;
extern template class metric_family<gauge>;
extern template class metric_family<histogram>;

using counter_family = metric_family<counter>;
using gauge_family = metric_family<gauge>;
using histogram_family = metric_family<histogram>;

/// The set of metric families one process exposes.
///
/// Thread/ownership: owns its families; add_* and render() may be called from any thread
/// (each takes the registry's mutex briefly). Families live as long as the registry.
class registry {
public:
  registry() = default;
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  /// Registers a family. Names must match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
  /// [a-zA-Z_][a-zA-Z0-9_]* without a leading "__" (and not "le" for histograms), unique.
  /// A family without labels has its one child created now (it renders 0 from the start).
  /// Throws std::invalid_argument on a violation (see the file comment).
  counter_family& add_counter(std::string name, std::string help,
                              std::vector<std::string> label_names = {});
  gauge_family& add_gauge(std::string name, std::string help,
                          std::vector<std::string> label_names = {});
  /// `bounds`: finite and strictly increasing; a trailing +Inf is dropped (it is implicit).
  histogram_family& add_histogram(std::string name, std::string help, std::vector<double> bounds,
                                  std::vector<std::string> label_names = {});

  /// The whole registry in the text format 0.0.4: families sorted by name, children sorted by
  /// label values, families without children left out.
  [[nodiscard]] std::string render() const;

private:
  template <class Metric>
  metric_family<Metric>& add(std::string name, std::string help,
                             std::vector<std::string> label_names, typename Metric::config cfg);

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<detail::family_base>, std::less<>> families_;
};

/// Upstream's bucket bounds for taint_eviction_controller_pod_deletion_duration_seconds.
std::vector<double> pod_deletion_duration_buckets();

/// The daemon's metrics, registered by register_standard_metrics(). Plain references into the
/// registry: copy freely, valid as long as the registry.
struct standard_metrics {
  /// Pods deleted (upstream's taint_eviction_controller_pod_deletions_total).
  counter& pod_deletions;
  /// From when an eviction became due to the successful DELETE, in seconds (upstream's
  /// histogram, which records the wrong unit; ours is seconds).
  histogram& pod_deletion_duration;
  /// Evictions scheduled (a pod became due for eviction at some time).
  counter& scheduled_evictions;
  /// Scheduled evictions cancelled before they ran (taint removed, toleration added, pod gone).
  counter& cancelled_evictions;
  /// Failed deletion attempts, by reason (e.g. "conflict", "forbidden", "timeout").
  counter_family& pod_deletion_failures;
  /// Deletion attempts retried after a failure.
  counter& pod_deletion_retries;
  /// Nodes that currently carry at least one NoExecute taint.
  gauge& tainted_nodes;
  /// Watches restarted (connection lost, timeout, expired), by resource ("pods", "nodes").
  counter_family& watch_restarts;
  /// Full re-LISTs (after 410 Gone or a restart without a usable resourceVersion), by resource.
  counter_family& relists;
  /// API requests by verb (GET, LIST, WATCH, POST, PUT, PATCH, DELETE) and HTTP code
  /// ("<error>" when there was no response).
  counter_family& api_requests;
  /// API request latency in seconds, by verb (to the response headers for watches).
  histogram_family& api_request_duration;
  /// Pod events by result: "sent" (a new Event), "updated" (an existing Event's count raised),
  /// "aggregated" (into a "combined from similar events" Event), "failed" (given up),
  /// "dropped_spam" (per-object spam filter), "dropped_full" (queue full), "dropped_stopped"
  /// (at or after shutdown).
  counter_family& events;
  /// Evictions that failed at least 5 times in a row and are still being retried.
  gauge& stuck_evictions;
  /// DisruptionTarget patches that failed permanently (403, 422, 404), by reason; the DELETE
  /// went ahead without the condition.
  counter_family& disruption_condition_failures;
  /// Undecodable objects skipped in watch events and LIST pages, by resource.
  counter_family& watch_decode_errors;
  /// 1 while this process holds the leader lease, else 0.
  gauge& is_leader;
  /// Always 1, labelled with the version.
  gauge& build_info;
};

/// Registers the daemon's standard metrics in `r` (once per registry) and returns them.
/// Throws std::invalid_argument if `r` already holds one of the names.
standard_metrics register_standard_metrics(registry& r, std::string_view version);

}  // namespace tec::ops
