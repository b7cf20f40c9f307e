// Peak memory of reading the hostile policy files of issue 29, at start (load_policy_file, what
// --policy does) and on reload (reloader::poll after the file changed): each runs in a child
// process of its own, whose peak resident set (wait4's ru_maxrss) must stay under the issue's
// 64 MB. Before the walk budget the 13 KB file took 575 MB and 28 s here.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy/support/hostile.hpp"
#include "policy/support/load.hpp"
#include "tec/policy/policy_file.hpp"
#include "tec/policy/reloader.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEC_POLICY_MEMORY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TEC_POLICY_MEMORY_SANITIZED 1
#endif
#endif

namespace tec::policy {
namespace {

using test::load_policy_file;

constexpr long peak_limit_kib = 64L * 1024;

/// Runs `work` in a child process and returns its peak resident set in KiB, or -1 when the
/// child failed (its exit status is not 0). The child first resets its high-water mark (which
/// fork copies from this process) to what it shares with this process (clear_refs 5; without
/// it the number is this process's peak, an upper bound), and cannot take more than 512 MiB of
/// address space, so that a regression fails quickly instead of swapping a shared machine.
long peak_rss_kib_of(const std::function<bool()>& work) {
  ::malloc_trim(0);  // what earlier tests of this process freed is not the child's
  const pid_t pid = ::fork();
  if (pid == 0) {
    const rlimit as{512UL << 20U, 512UL << 20U};
    ::setrlimit(RLIMIT_AS, &as);
    std::ofstream("/proc/self/clear_refs") << "5";
    bool ok = false;
    try {
      ok = work();
    } catch (...) {  // std::bad_alloc under the limit: the child's failure, reported by status
      ok = false;
    }
    std::_Exit(ok ? 0 : 1);
  }
  if (pid < 0) {
    return -1;
  }
  int status = 0;
  rusage usage{};
  if (::wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return -1;
  }
  return usage.ru_maxrss;
}

class policy_memory : public ::testing::Test {
protected:
  void SetUp() override {
#ifdef TEC_POLICY_MEMORY_SANITIZED
    GTEST_SKIP() << "a sanitizer's shadow memory and quarantine are not the daemon's";
#endif
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
  }

  [[nodiscard]] std::string write(const std::string& text) const {
    const auto path = (dir_ / "policy.yaml").string();
    std::ofstream(path) << text;
    return path;
  }

  /// Peak RSS of reading `text` as the file --policy names at start: rejected, one error.
  [[nodiscard]] long at_start(const std::string& text) const {
    const auto path = write(text);
    return peak_rss_kib_of([&] {
      const auto r = load_policy_file(path);
      return !r && r.errors.size() == 1 && r.summary().size() <= 2 * max_error_bytes;
    });
  }

  /// Peak RSS of a reload finding `text` where a valid policy was: rejected, one error, the
  /// policy in force kept.
  [[nodiscard]] long on_reload(const std::string& text) const {
    const auto path = write(std::string(test::policy_header) + "dryRun: true\n");
    return peak_rss_kib_of([&] {
      controller::eviction_policy start;
      start.dry_run = true;
      reloader r(path, start);
      if (r.poll().what != reload_result::kind::unchanged) {
        return false;
      }
      std::ofstream(path) << text;
      const auto polled = r.poll();
      return polled.what == reload_result::kind::rejected && polled.errors.size() == 1 &&
             polled.summary().size() <= 2 * max_error_bytes && r.in_force() == start;
    });
  }

private:
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() /
                               ("tec-policy-memory-" + std::to_string(::getpid()) + "-" +
                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
};

TEST_F(policy_memory, aliased_unknown_keys_at_start) {
  const long kib = at_start(test::aliased_unknown_keys());
  ASSERT_GT(kib, 0) << "the child failed (wrong result, or over 512 MiB of address space)";
  EXPECT_LT(kib, peak_limit_kib);
  RecordProperty("peak_rss_kib", std::to_string(kib));
}

TEST_F(policy_memory, aliased_unknown_keys_on_reload) {
  const long kib = on_reload(test::aliased_unknown_keys());
  ASSERT_GT(kib, 0) << "the child failed (wrong result, or over 512 MiB of address space)";
  EXPECT_LT(kib, peak_limit_kib);
  RecordProperty("peak_rss_kib", std::to_string(kib));
}

TEST_F(policy_memory, aliased_valid_selector_at_start) {
  const long kib = at_start(test::aliased_valid_selector());
  ASSERT_GT(kib, 0) << "the child failed (wrong result, or over 512 MiB of address space)";
  EXPECT_LT(kib, peak_limit_kib);
  RecordProperty("peak_rss_kib", std::to_string(kib));
}

TEST_F(policy_memory, aliased_valid_selector_on_reload) {
  const long kib = on_reload(test::aliased_valid_selector());
  ASSERT_GT(kib, 0) << "the child failed (wrong result, or over 512 MiB of address space)";
  EXPECT_LT(kib, peak_limit_kib);
  RecordProperty("peak_rss_kib", std::to_string(kib));
}

TEST_F(policy_memory, the_densest_valid_file_at_the_size_limit) {
  // No alias: one-byte list items, about two bytes of file each, filling the largest file the
  // reader takes. yaml-cpp's nodes cost ~240 bytes per byte of such a file: the size limit,
  // not the alias budget, is what bounds this one.
  std::string values;
  while (values.size() + 256 < max_file_bytes) {
    values += "a,";
  }
  const auto path = write(std::string(test::policy_header) +
                          "exclude:\n  podSelector:\n    matchExpressions: [{key: k, operator: "
                          "In, values: [" +
                          values + "a]}]\n");
  ASSERT_LE(std::filesystem::file_size(path), max_file_bytes);
  const long kib = peak_rss_kib_of([&] { return static_cast<bool>(load_policy_file(path)); });
  ASSERT_GT(kib, 0) << "the child failed (wrong result, or over 512 MiB of address space)";
  EXPECT_LT(kib, peak_limit_kib);
  RecordProperty("peak_rss_kib", std::to_string(kib));
}

}  // namespace
}  // namespace tec::policy
