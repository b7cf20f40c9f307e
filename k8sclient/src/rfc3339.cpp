#include "tec/k8sclient/rfc3339.hpp"

#include <array>
#include <cstdio>
#include <ctime>

namespace tec::k8sclient {

std::string format_rfc3339(std::chrono::system_clock::time_point t, bool microseconds) {
  using namespace std::chrono;
  const auto since_epoch = t.time_since_epoch();
  auto secs = duration_cast<seconds>(since_epoch);
  auto micros = duration_cast<std::chrono::microseconds>(since_epoch - secs).count();
  if (micros < 0) {  // Before 1970: floor, not truncate.
    secs -= seconds{1};
    micros += 1'000'000;
  }
  const auto tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::array<char, 40> buf{};
  std::size_t n = std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf.data(), n);
  if (microseconds) {
    n = static_cast<std::size_t>(
        std::snprintf(buf.data(), buf.size(), ".%06lld", static_cast<long long>(micros)));
    out.append(buf.data(), n);
  }
  out += 'Z';
  return out;
}

}  // namespace tec::k8sclient
