#include "tec/metrics/table.hpp"

#include <utility>

namespace tec::metrics {

namespace {

row one_value(std::string name, std::string help, kind k, std::function<double()> read) {
  return {.name = std::move(name),
          .help = std::move(help),
          .kind = k,
          .label = {},
          .read = [read = std::move(read)] {
            return std::vector<sample>{{{}, read()}};
          }};
}

}  // namespace

row counter_row(std::string name, std::string help, std::function<double()> read) {
  return one_value(std::move(name), std::move(help), kind::counter, std::move(read));
}

row gauge_row(std::string name, std::string help, std::function<double()> read) {
  return one_value(std::move(name), std::move(help), kind::gauge, std::move(read));
}

row counter_row_by(std::string label, std::string name, std::string help,
                   std::function<std::vector<sample>()> read) {
  return {.name = std::move(name),
          .help = std::move(help),
          .kind = kind::counter,
          .label = std::move(label),
          .read = std::move(read)};
}

count::count(table& t, std::string name, std::string help) {
  t.push_back(counter_row(std::move(name), std::move(help),
                          [this] { return static_cast<double>(value()); }));
}

std::optional<double> read(const table& t, std::string_view name, std::string_view label_value) {
  std::optional<double> sum;
  for (const auto& r : t) {
    if (r.name != name) {
      continue;
    }
    for (const auto& s : r.read()) {
      if (s.label_value == label_value) {
        sum = sum.value_or(0) + s.value;
      }
    }
  }
  return sum;
}

}  // namespace tec::metrics
