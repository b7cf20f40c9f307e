#include "tec/metrics/process_metrics.hpp"

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>
#include <unistd.h>
#include <atomic>
#include <charconv>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>
#include "tec/base/logger.hpp"

namespace tec::metrics {
namespace {

base::result<std::string> read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    return base::make_error(base::errc::not_found, "cannot read " + p.string());
  }
  if (text.empty()) {
    return base::make_error(base::errc::not_found, "cannot read " + p.string() + " (empty)");
  }
  return text;
}

base::error malformed(const std::filesystem::path& p, std::string_view what) {
  return base::make_error(base::errc::unexpected_shape,
                          "malformed " + p.string() + ": " + std::string(what));
}

bool parse_number(std::string_view s, double& out) {
  unsigned long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return false;
  }
  out = static_cast<double>(v);
  return true;
}

}  // namespace

base::result<process_sample> read_process_sample(const std::filesystem::path& proc,
                                                 const std::string& pid, double ticks_per_second,
                                                 double page_size) {
  process_sample s;
  const auto stat_path = proc / pid / "stat";
  auto stat = read_text(stat_path);
  if (!stat) {
    return stat.error();
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields are counted
  // from the last ')'; the field after it is field 3.
  const auto close = stat->rfind(')');
  if (close == std::string::npos) {
    return malformed(stat_path, "no ')'");
  }
  std::istringstream fields(stat->substr(close + 1));
  std::vector<std::string> f{"", "", ""};  // f[n] is field n; 1 and 2 are before the ')'
  for (std::string word; fields >> word;) {
    f.push_back(std::move(word));
  }
  double utime = 0;
  double stime = 0;
  double start_ticks = 0;
  double vsize = 0;
  double rss_pages = 0;
  if (f.size() < 25 || !parse_number(f[14], utime) || !parse_number(f[15], stime) ||
      !parse_number(f[22], start_ticks) || !parse_number(f[23], vsize) ||
      !parse_number(f[24], rss_pages)) {
    return malformed(stat_path, "fields 14, 15, 22, 23 or 24 missing or not numbers");
  }
  s.cpu_seconds = (utime + stime) / ticks_per_second;
  s.virtual_bytes = vsize;
  s.resident_bytes = rss_pages * page_size;

  const auto boot_path = proc / "stat";
  auto boot = read_text(boot_path);
  if (!boot) {
    return boot.error();
  }
  std::istringstream lines(*boot);
  double btime = -1;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("btime ", 0) == 0 && !parse_number(std::string_view(line).substr(6), btime)) {
      return malformed(boot_path, "btime is not a number");
    }
  }
  if (btime < 0) {
    return malformed(boot_path, "no btime line");
  }
  s.start_time_seconds = btime + start_ticks / ticks_per_second;

  const auto limits_path = proc / pid / "limits";
  auto limits = read_text(limits_path);
  if (!limits) {
    return limits.error();
  }
  std::istringstream limit_lines(*limits);
  bool found = false;
  for (std::string line; std::getline(limit_lines, line);) {
    constexpr std::string_view key = "Max open files";
    if (line.rfind(key, 0) != 0) {
      continue;
    }
    std::istringstream words(line.substr(key.size()));
    std::string soft;
    words >> soft;
    found = soft == "unlimited" || parse_number(soft, s.max_fds);
    if (!found) {
      return malformed(limits_path, "Max open files is not a number");
    }
  }
  if (!found) {
    return malformed(limits_path, "no Max open files line");
  }

  std::error_code ec;
  std::filesystem::directory_iterator it(proc / pid / "fd", ec);
  if (ec) {
    return base::make_error(base::errc::not_found,
                            "cannot list " + (proc / pid / "fd").string() + ": " + ec.message());
  }
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) {
      break;
    }
    s.open_fds += 1;
  }
  return s;
}

namespace {

class process_collectable final : public prometheus::Collectable {
public:
  explicit process_collectable(std::filesystem::path proc)
      : proc_(std::move(proc)),
        ticks_(static_cast<double>(::sysconf(_SC_CLK_TCK))),
        page_(static_cast<double>(::sysconf(_SC_PAGESIZE))) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    auto s = read_process_sample(proc_, "self", ticks_, page_);
    if (!s) {
      if (!failing_.exchange(true)) {
        base::named_logger("metrics")->warn("process metrics left out: {}", s.error().message);
      }
      return {};
    }
    failing_.store(false);
    using prometheus::MetricType;
    return {
        family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
               MetricType::Counter, s->cpu_seconds),
        family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
               s->max_fds),
        family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
               s->open_fds),
        family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
               s->resident_bytes),
        family("process_start_time_seconds",
               "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
               s->start_time_seconds),
        family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
               s->virtual_bytes),
    };
  }

private:
  static prometheus::MetricFamily family(const char* name, const char* help,
                                         prometheus::MetricType type, double value) {
    prometheus::MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = type;
    prometheus::ClientMetric m;
    if (type == prometheus::MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    f.metric.push_back(std::move(m));
    return f;
  }

  std::filesystem::path proc_;
  double ticks_;
  double page_;
  mutable std::atomic<bool> failing_{false};
};

}  // namespace

void register_process_metrics(registry& r, std::filesystem::path proc) {
  r.add_collectable(std::make_shared<process_collectable>(std::move(proc)),
                    {"process_cpu_seconds_total", "process_max_fds", "process_open_fds",
                     "process_resident_memory_bytes", "process_start_time_seconds",
                     "process_virtual_memory_bytes"});
}

}  // namespace tec::metrics
