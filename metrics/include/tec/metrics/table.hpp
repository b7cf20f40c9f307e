#pragma once

// What a library counts, published as a table its owner hands to the registry
// (registry::publish): one row per metric family, with its name, help, kind, label and the
// reader the registry calls at every scrape. A library declares a metric once, beside what
// counts it, and the exposition follows: a new counter is a `count` member (its row comes with
// it) and the increment where the thing happens (STYLE.md 21; upstream declares its two
// metrics beside the taint manager and increments them in place).
//
// Nothing here knows Prometheus: the controller and the writers publish tables without the
// registry's library (metrics.hpp renders them).

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tec::metrics {

/// Counters never go down (the registry keeps an exposed counter from falling, see publish());
/// gauges go up and down.
enum class kind : std::uint8_t { counter, gauge };

/// One time series of a row: its label's value (empty for an unlabelled row) and its value.
struct sample {
  std::string label_value;
  double value = 0;
};

/// A metric family read at scrape time. The reader runs on the scraping thread, possibly on
/// two at once: it must be thread-safe, must not call into the registry, and must return one
/// sample (label value empty) for an unlabelled row, one per child for a labelled one (none: the
/// family is not exposed).
struct row {
  /// Without the daemon's prefix ("taint_eviction_controller_"); the registry adds it.
  std::string name;
  /// Empty: this row adds to the family another row of that name declares (same kind and
  /// label), e.g. a count two libraries share; their samples are summed by label value.
  std::string help;
  metrics::kind kind = metrics::kind::counter;
  /// The label's name; empty for an unlabelled row.
  std::string label;
  std::function<std::vector<sample>()> read;
};

using table = std::vector<row>;

/// An unlabelled row reading one number.
row counter_row(std::string name, std::string help, std::function<double()> read);
row gauge_row(std::string name, std::string help, std::function<double()> read);
/// A labelled counter: `read` gives one sample per child.
row counter_row_by(std::string label, std::string name, std::string help,
                   std::function<std::vector<sample>()> read);

/// A total a library keeps itself, declared with its row: `count c{tbl, "x_total", "X."}`
/// appends the row that reads it to `tbl`. Lock-free; inc() and value() from any thread.
/// Must outlive every copy of the table (a library's member, published by its owner).
class count {
public:
  count(table& t, std::string name, std::string help);
  count(const count&) = delete;
  count& operator=(const count&) = delete;

  void inc(std::uint64_t n = 1) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

private:
  std::atomic<std::uint64_t> v_{0};
};

/// The value a table's row `name` reads now (of its child `label_value` for a labelled row);
/// nullopt when there is no such row or child. Rows that add to one family are summed. For
/// tests and the daemon's own log lines; the registry renders every row at scrape.
[[nodiscard]] std::optional<double> read(const table& t, std::string_view name,
                                         std::string_view label_value = {});

}  // namespace tec::metrics
