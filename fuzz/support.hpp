#pragma once

// What every fuzz target shares: the entry points, an invariant check that aborts (so that
// libFuzzer and the corpus replayer both report it as a crash, with the input saved), and a
// small reader that lets the fuzzer choose parameters from the first bytes of its input.
//
// The checks do not use assert(): the replayers are built with NDEBUG (RelWithDebInfo).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

// libFuzzer's entry point; the replayer (replay_main.cpp) calls it too. Targets set themselves
// up on their first input (no LLVMFuzzerInitialize).
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace tec::fuzz {

/// Prints what was violated, with `detail` (clipped, control and non-ASCII bytes as \xHH),
/// and aborts.
[[noreturn]] inline void invariant_failed(const char* file, int line, const char* condition,
                                          std::string_view detail) {
  constexpr std::size_t max_detail = 4096;
  std::fprintf(stderr, "%s:%d: invariant violated: %s\n", file, line, condition);
  for (const char c : detail.substr(0, max_detail)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || (u >= 0x20 && u < 0x7f)) {
      std::fputc(c, stderr);
    } else {
      std::fprintf(stderr, "\\x%02x", u);
    }
  }
  std::fputs(detail.size() > max_detail ? "...\n" : "\n", stderr);
  std::fflush(stderr);
  std::abort();
}

/// The input as text.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) noexcept {
  return {reinterpret_cast<const char*>(data), size};  // NOLINT: bytes as chars
}

/// Takes parameters from the front of the input; past the end it yields zeros.
class input_reader {
public:
  explicit input_reader(std::string_view input) noexcept : rest_(input) {}

  std::uint8_t byte() noexcept {
    if (rest_.empty()) {
      return 0;
    }
    const auto b = static_cast<std::uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return b;
  }

  /// Up to `n` bytes.
  std::string_view bytes(std::size_t n) noexcept {
    const std::string_view out = rest_.substr(0, n);
    rest_.remove_prefix(out.size());
    return out;
  }

  [[nodiscard]] std::string_view rest() const noexcept { return rest_; }

private:
  std::string_view rest_;
};

}  // namespace tec::fuzz

/// Aborts with `detail` (anything convertible to std::string_view) when `cond` is false.
#define TEC_FUZZ_CHECK(cond, detail)                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      ::tec::fuzz::invariant_failed(__FILE__, __LINE__, #cond, (detail)); \
    }                                                                     \
  } while (false)
