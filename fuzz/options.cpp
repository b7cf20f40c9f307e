// Fuzz target: the daemon's command line (cmd/options.hpp: parse_options).
//
// Input: the arguments, one per line (without the program name). The environment has no
// POD_NAMESPACE and the service-account namespace file holds "fuzz-ns", so nothing outside the
// input matters. Whatever the arguments, parse_options either exits (0 with text for stdout:
// --help or --version; 2 with a reason on stderr) or returns options that satisfy every check
// it promises: positive durations that client-go's leader election accepts, numbers in range,
// valid names and bind addresses, a known log level, the policy of the --policy file (an
// injected reader: "fuzz.yaml" holds a valid policy, every other path is missing).

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "support.hpp"
#include "tec/base/result.hpp"
#include "tec/serving/http_endpoints.hpp"

namespace {

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 253 || s.front() == '-' || s.front() == '.' || s.back() == '-' ||
      s.back() == '.') {
    return false;
  }
  for (const char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) {
      return false;
    }
  }
  return true;
}

void check_options(const tec::cmd::options& o, const std::string& args) {
  TEC_FUZZ_CHECK(o.lease_duration.count() > 0, args);
  TEC_FUZZ_CHECK(o.renew_deadline.count() > 0, args);
  TEC_FUZZ_CHECK(o.retry_period.count() > 0, args);
  if (o.leader_elect) {
    TEC_FUZZ_CHECK(o.lease_duration > o.renew_deadline, args);
    TEC_FUZZ_CHECK(static_cast<double>(o.renew_deadline.count()) >
                       1.2 * static_cast<double>(o.retry_period.count()),
                   args);
  }
  TEC_FUZZ_CHECK(std::isfinite(o.kube_api_qps) && o.kube_api_qps >= 0, args);
  TEC_FUZZ_CHECK(o.kube_api_qps == 0 || o.kube_api_burst >= 1, args);
  TEC_FUZZ_CHECK(o.kube_api_connections >= 3 && o.kube_api_connections <= 1024, args);
  TEC_FUZZ_CHECK(o.workers >= 1 && o.workers <= 1024, args);
  TEC_FUZZ_CHECK(o.context.empty() || !o.kubeconfig.empty(), args);
  TEC_FUZZ_CHECK(valid_name(o.lease_namespace), args);
  TEC_FUZZ_CHECK(valid_name(o.lease_name), args);
  TEC_FUZZ_CHECK(tec::serving::parse_bind_address(o.metrics_bind_address).has_value(), args);
  TEC_FUZZ_CHECK(tec::serving::parse_bind_address(o.health_probe_bind_address).has_value(), args);
  bool level_ok = false;
  for (const char* level :
       {"trace", "debug", "info", "warn", "warning", "error", "critical", "off"}) {
    level_ok = level_ok || o.log_level == level;
  }
  TEC_FUZZ_CHECK(level_ok, args);
  TEC_FUZZ_CHECK(o.policy_file.empty() ? o.policy == tec::cmd::options{}.policy
                                       : o.policy.rate_limit.evictions_per_second == 5,
                 args);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input = tec::fuzz::as_text(data, size);
  std::vector<std::string> args;
  while (!input.empty()) {
    const std::size_t end = input.find('\n');
    args.emplace_back(input.substr(0, end));
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + 1);
  }
  const std::string shown(tec::fuzz::as_text(data, size));

  const auto env = [](const std::string& /*name*/) -> std::optional<std::string> {
    return std::nullopt;
  };
  const auto read_file = [](const std::string& path) -> std::optional<std::string> {
    TEC_FUZZ_CHECK(path == tec::cmd::service_account_namespace_file, "read " + path);
    return std::string("fuzz-ns\n");
  };
  // --policy: "fuzz.yaml" is a valid policy, any other path is missing (no real file is read).
  const auto read_policy = [](const std::string& path) -> tec::base::result<std::string> {
    if (path != "fuzz.yaml") {
      return tec::base::make_error(tec::base::errc::config_invalid, path + ": no such file");
    }
    return std::string(
        "apiVersion: taint-eviction-controller/v1alpha1\nkind: EvictionPolicy\n"
        "rateLimit: {evictionsPerSecond: 5}\n");
  };
  const tec::cmd::parse_result r =
      tec::cmd::parse_options(args, "0.0.0-fuzz", env, read_file, read_policy);
  if (r.opts) {
    TEC_FUZZ_CHECK(r.exit_code == 0 && r.err.empty() && r.out.empty(), shown);
    check_options(*r.opts, shown);
  } else if (r.exit_code == 0) {
    TEC_FUZZ_CHECK(!r.out.empty() && r.err.empty(), shown);  // --help or --version
  } else {
    TEC_FUZZ_CHECK(r.exit_code == 2 && !r.err.empty(), shown);
  }
  return 0;
}
