#pragma once

// The daemon's Prometheus metrics on prometheus-cpp's core library (its registry, metric types
// and text serializer, exposition format 0.0.4,
// https://prometheus.io/docs/instrumenting/exposition_formats/). Our own HTTP server
// (http_endpoints) serves the text; prometheus-cpp's civetweb `pull` server is not used.
//
// Two kinds of families:
// - Updated where the event happens (API requests, the deletion-duration histogram, leader
//   state): counter, gauge and histogram below, thin wrappers over prometheus-cpp's.
//   Updating one is a few atomic operations (a histogram takes a short mutex). Looking a
//   labelled child up by its label values takes the family's mutex and a map lookup without
//   allocating (only the first use of a label combination allocates); hot paths look a child
//   up once and keep the reference, which stays valid as long as the registry.
// - Read at scrape time: the tables the libraries publish (table.hpp: the controller, the
//   eviction sink, the informers, the event recorder each declare what they count, beside the
//   counting) are read when /metrics is scraped (registry::publish), nothing copied between
//   scrapes; prometheus::Collectable for the process figures.
//
// Defining a metric wrongly (invalid name, duplicate name, unsorted buckets, wrong number of
// label values) is a programming error, not a runtime condition: the definitions are
// constants in the daemon, and the first test that builds the registry fails. Those calls
// throw std::invalid_argument rather than return an error value (an assert would vanish in
// release builds and leave an exposition Prometheus rejects).

#include <prometheus/collectable.h>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tec/metrics/table.hpp"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
struct MetricFamily;
}  // namespace prometheus

namespace tec::metrics {

/// The Content-Type of render()'s output.
inline constexpr std::string_view metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// A monotonically increasing value. Thread-safe; lock-free on x86-64.
template <class Metric>
class metric_family;

class counter {
public:
  using impl_type = prometheus::Counter;
  struct config {};
  explicit counter(impl_type& c) noexcept : c_(&c) {}
  counter(const counter&) = delete;
  counter& operator=(const counter&) = delete;

  /// Adds `v` (default 1). A negative or NaN `v` is ignored: counters never go down (and
  /// prometheus-cpp would add a NaN).
  void inc(double v = 1) noexcept;
  [[nodiscard]] double value() const noexcept;

private:
  friend class metric_family<counter>;
  impl_type* c_;
};

/// A value that goes up and down. Thread-safe; lock-free on x86-64.
class gauge {
public:
  using impl_type = prometheus::Gauge;
  struct config {};
  explicit gauge(impl_type& g) noexcept : g_(&g) {}
  gauge(const gauge&) = delete;
  gauge& operator=(const gauge&) = delete;

  void set(double v) noexcept;
  void inc(double v = 1) noexcept;
  void dec(double v = 1) noexcept { inc(-v); }
  [[nodiscard]] double value() const noexcept;

private:
  friend class metric_family<gauge>;
  impl_type* g_;
};

/// Observations counted into buckets with upper bounds `le` (a value equal to a bound counts
/// in that bucket), plus their sum and count. Thread-safe (prometheus-cpp's histogram takes
/// a short mutex per observation, so a scrape sees buckets, sum and count consistent).
class histogram {
public:
  using impl_type = prometheus::Histogram;
  struct config {
    /// Finite, strictly increasing upper bounds; +Inf is implicit.
    std::shared_ptr<const std::vector<double>> bounds;
  };
  explicit histogram(impl_type& h) noexcept : h_(&h) {}
  histogram(const histogram&) = delete;
  histogram& operator=(const histogram&) = delete;

  /// Records one observation. NaN is ignored.
  void observe(double v) noexcept;

  /// A consistent copy for tests: per-bucket (not cumulative) counts, the last one for +Inf.
  struct snapshot_t {
    std::vector<std::uint64_t> counts;
    double sum = 0;
    std::uint64_t count = 0;
  };
  [[nodiscard]] snapshot_t snapshot_for_test() const;

private:
  friend class metric_family<histogram>;
  impl_type* h_;
};

namespace detail {

// What the registry needs from a family of any type.
class family_base {
public:
  family_base(std::string name, std::vector<std::string> label_names);
  virtual ~family_base() = default;
  family_base(const family_base&) = delete;
  family_base& operator=(const family_base&) = delete;

protected:
  void check_label_count(std::size_t n) const;

  std::string name_;
  std::vector<std::string> label_names_;
};

// Orders label-value vectors and lets them be looked up by views without allocating.
struct label_values_less {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                        std::less<std::string_view>());
  }
};

}  // namespace detail

/// All the time series of one metric name, one child per combination of label values.
///
/// Thread/ownership: owned by its registry; every member may be called from any thread.
/// References returned by with() stay valid as long as the registry.
template <class Metric>
class metric_family final : public detail::family_base {
public:
  metric_family(prometheus::Family<typename Metric::impl_type>& family, std::string name,
                std::vector<std::string> label_names, typename Metric::config cfg);
  ~metric_family() override;

  /// The child for these label values (in label_names() order), created on first use.
  /// Throws std::invalid_argument when the number of values differs from the label names.
  Metric& with(std::span<const std::string_view> values);
  Metric& with(std::initializer_list<std::string_view> values) {
    return with(std::span<const std::string_view>(values.begin(), values.size()));
  }
  /// Removes every child but the one with these label values (an info metric's change: the
  /// old series goes). References to the removed children must not be used afterwards.
  void keep_only(std::initializer_list<std::string_view> values);

private:
  prometheus::Family<typename Metric::impl_type>& family_;
  typename Metric::config config_;
  std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>, detail::label_values_less> children_;
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
/// Thread/ownership: owns its families and collectables; add_* and render() may be called from
/// any thread. Families live as long as the registry.
class registry {
public:
  registry();
  ~registry();
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  /// Registers a family. Names must match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
  /// [a-zA-Z_][a-zA-Z0-9_]* without a leading "__" (and not "le" for histograms), unique;
  /// the help text must not hold a backslash or a line feed (prometheus-cpp 1.0 writes HELP
  /// unescaped). A family without labels has its one child created now (it renders 0 from the
  /// start). Throws std::invalid_argument on a violation (see the file comment).
  counter_family& add_counter(std::string name, const std::string& help,
                              std::vector<std::string> label_names = {});
  gauge_family& add_gauge(std::string name, const std::string& help,
                          std::vector<std::string> label_names = {});
  /// `bounds`: finite and strictly increasing; a trailing +Inf is dropped (it is implicit).
  histogram_family& add_histogram(std::string name, const std::string& help,
                                  std::vector<double> bounds,
                                  std::vector<std::string> label_names = {});

  /// Adds families computed at every render() by `c`, which must produce only the families
  /// named in `names` (reserved here: a name used twice throws std::invalid_argument, as for
  /// add_*). `c->Collect()` runs on the scraping thread, possibly on two threads at once.
  void add_collectable(std::shared_ptr<const prometheus::Collectable> c,
                       const std::vector<std::string>& names);

  /// Adds a library's table: each row is a family named `prefix` + its name, read at every
  /// render(). A row with help declares its family (the name is reserved as for add_*); a row
  /// without help adds its samples to a family an earlier row declared (same kind and label),
  /// summed by label value. A counter never goes below what it last exposed: a total read
  /// lower than before (one derived from two counts read one after the other) is exposed as
  /// the last value until it catches up. Throws std::invalid_argument on an invalid or taken
  /// name, an invalid label name, a help text with a backslash or a line feed, or a row adding
  /// to a family not declared (or of another kind or label). Rows read what their library
  /// owns: it must outlive the registry's renders.
  void publish(const table& t, std::string_view prefix = "taint_eviction_controller_");

  /// The whole registry in the text format 0.0.4 (prometheus-cpp's TextSerializer): families
  /// sorted by name, children sorted by their labels, families without children left out.
  [[nodiscard]] std::string render() const;

private:
  template <class Metric>
  metric_family<Metric>& add(std::string name, const std::string& help,
                             std::vector<std::string> label_names, typename Metric::config cfg);
  void reserve_name(const std::string& name);
  // The published rows as families (render()).
  [[nodiscard]] std::vector<prometheus::MetricFamily> collect_rows() const;

  std::unique_ptr<prometheus::Registry> registry_;
  mutable std::mutex mutex_;  // Guards the members below.
  std::set<std::string, std::less<>> names_;
  std::vector<std::unique_ptr<detail::family_base>> families_;
  std::vector<std::shared_ptr<const prometheus::Collectable>> collectables_;
  // The published rows, full names; declared families first by name (publish checks).
  struct published_row {
    row r;
    std::string full_name;
  };
  std::vector<published_row> rows_;
  // Per counter series ("name\0label value"): the last value exposed (render() clamps).
  mutable std::mutex exposed_mutex_;
  mutable std::map<std::string, double, std::less<>> exposed_;
};

/// Upstream's bucket bounds for taint_eviction_controller_pod_deletion_duration_seconds.
std::vector<double> pod_deletion_duration_buckets();

/// Bucket bounds of taint_eviction_controller_eviction_wait_duration_seconds: a rate limit
/// spreads a mass eviction over minutes, a storm breaker may hold one for hours.
std::vector<double> eviction_wait_duration_buckets();

/// The daemon's metrics updated where things happen, registered by register_standard_metrics().
/// Plain references into the registry: copy freely, valid as long as the registry.
struct standard_metrics {
  /// From when an eviction became due to the successful DELETE, in seconds (upstream's
  /// histogram, which records the wrong unit; ours is seconds).
  histogram& pod_deletion_duration;
  /// API requests by HTTP method (GET, POST, PUT, PATCH, DELETE: a LIST and a WATCH are GETs,
  /// unlike client-go's verb label) and HTTP code ("<error>" when there was no response).
  counter_family& api_requests;
  /// API request latency in seconds, by HTTP method (to the response headers for watches).
  histogram_family& api_request_duration;
  /// 1 while this process holds the leader lease, else 0.
  gauge& is_leader;
  /// For evictions the policy held back (rate limit, in-flight caps, storm breaker): seconds
  /// from when they became due to when they started.
  histogram& eviction_wait_duration;
  /// Policy file changes rejected (invalid, unreadable, missing): the old policy stayed.
  counter& policy_reload_failures;
  /// 1 when the last load or reload of --policy's file succeeded (also without --policy), 0
  /// when the last change was rejected.
  gauge& policy_last_reload_successful;
  /// Unix time of the last successful load or reload (0: none yet).
  gauge& policy_last_reload_success_timestamp;
  /// One child, {sha256=<the policy file in force>}, set to 1 (the old child removed on change).
  gauge_family& policy_info;
  /// Always 1, labelled with the version and the source commit.
  gauge& build_info;
};

/// Shadow mode's metrics (registered only with --shadow; see register_shadow_metrics).
struct shadow_metrics {
  /// Settled pods by outcome: agreed, only_them, only_us, cancelled_both, ambiguous (every child
  /// exists from the start, at 0).
  counter_family& decisions;
  /// |their eviction time - ours| for agreed pods, in seconds.
  histogram& agreement_delay;
  /// Pods with a decision (ours or theirs) not yet settled.
  gauge& pending;
  /// Pods settled early, as a best guess, because too many were pending.
  counter& settled_early;
};

/// Bucket bounds of taint_eviction_controller_shadow_agreement_delay_seconds (10 ms to 60 s).
std::vector<double> shadow_agreement_delay_buckets();

/// Registers shadow mode's families in `r` (once). Throws std::invalid_argument if `r` already
/// holds one of the names.
shadow_metrics register_shadow_metrics(registry& r);

/// The running build, as build_info's labels (tec/version.hpp's version, commit and compiler).
/// Views: the strings must outlive the call only (the registry copies them).
struct build_labels {
  std::string_view version;
  std::string_view commit;
  std::string_view compiler;
};

/// Registers the daemon's own metrics in `r` (once per registry), those updated where things
/// happen, and returns them; what the libraries count they publish themselves (publish()).
/// Throws std::invalid_argument if `r` already holds one of the names.
standard_metrics register_standard_metrics(registry& r, const build_labels& build);

}  // namespace tec::metrics
