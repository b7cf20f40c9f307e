#pragma once

#include <filesystem>
#include "tec/base/result.hpp"
#include "tec/metrics/metrics.hpp"

namespace tec::metrics {

/// The standard process figures every Prometheus client library exports (the Go client's
/// process collector), read from a proc filesystem at scrape time.
struct process_sample {
  double cpu_seconds = 0;         ///< user + system time (stat fields 14, 15)
  double resident_bytes = 0;      ///< RSS (stat field 24, pages)
  double virtual_bytes = 0;       ///< VSZ (stat field 23)
  double start_time_seconds = 0;  ///< Unix time: boot time (stat's btime) + field 22
  double open_fds = 0;            ///< entries of fd/
  double max_fds = 0;             ///< limits' "Max open files" soft limit (0: unlimited)
};

/// Reads `proc`/`pid`/{stat,limits,fd} and `proc`/stat. `ticks_per_second` and `page_size`
/// are sysconf's _SC_CLK_TCK and _SC_PAGESIZE (tests give their own with a fake `proc`).
/// An unreadable or malformed file is an error naming it (nothing is half-read).
base::result<process_sample> read_process_sample(const std::filesystem::path& proc,
                                                 const std::string& pid, double ticks_per_second,
                                                 double page_size);

/// Registers process_cpu_seconds_total, process_resident_memory_bytes,
/// process_virtual_memory_bytes, process_start_time_seconds, process_open_fds and
/// process_max_fds (no prefix: the names every dashboard expects), read from `proc`/self at
/// every render. A read that fails renders none of them (logged once per failure streak).
void register_process_metrics(registry& r, std::filesystem::path proc = "/proc");

}  // namespace tec::metrics
