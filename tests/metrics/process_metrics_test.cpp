#include "tec/metrics/process_metrics.hpp"
#include <gtest/gtest.h>
#include <unistd.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include "tec/metrics/metrics.hpp"

namespace tec::metrics {
namespace {

namespace fs = std::filesystem;

// A fake proc filesystem: <dir>/stat and <dir>/42/{stat,limits,fd/}.
class process_metrics_test : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tec-proc-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "42" / "fd");
    write("stat", "cpu  1 2 3 4\nbtime 1700000000\nprocesses 9\n");
    // comm holds a space and parentheses; fields 14/15 utime/stime = 250/150 ticks, 22
    // starttime = 1000 ticks, 23 vsize, 24 rss = 3 pages.
    write("42/stat",
          "42 (tec (x) y) S 1 42 42 0 -1 4194560 10 0 0 0 250 150 0 0 20 0 9 0 1000 "
          "123456789 3 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n");
    write("42/limits",
          "Limit                     Soft Limit           Hard Limit           Units\n"
          "Max cpu time              unlimited            unlimited            seconds\n"
          "Max open files            1048576              1048576              files\n");
    for (const char* fd : {"0", "1", "2", "7"}) {
      write(std::string("42/fd/") + fd, "");
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }

  fs::path dir_;
};

TEST_F(process_metrics_test, reads_every_figure_from_a_proc_filesystem) {
  auto s = read_process_sample(dir_, "42", 100, 4096);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_DOUBLE_EQ(s->cpu_seconds, 4.0);  // (250 + 150) / 100
  EXPECT_DOUBLE_EQ(s->resident_bytes, 3 * 4096.0);
  EXPECT_DOUBLE_EQ(s->virtual_bytes, 123456789.0);
  EXPECT_DOUBLE_EQ(s->start_time_seconds, 1700000000.0 + 10.0);  // btime + 1000 / 100
  EXPECT_DOUBLE_EQ(s->open_fds, 4.0);
  EXPECT_DOUBLE_EQ(s->max_fds, 1048576.0);
}

TEST_F(process_metrics_test, unlimited_open_files_is_zero) {
  write("42/limits", "Max open files            unlimited            unlimited            files\n");
  auto s = read_process_sample(dir_, "42", 100, 4096);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_DOUBLE_EQ(s->max_fds, 0.0);
}

TEST_F(process_metrics_test, a_malformed_file_is_an_error_naming_it) {
  write("42/stat", "42 (tec) S 1 2 3\n");  // truncated
  auto s = read_process_sample(dir_, "42", 100, 4096);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("42/stat"), std::string::npos) << s.error().message;

  SetUp();
  write("stat", "cpu 1 2 3\n");  // no btime
  s = read_process_sample(dir_, "42", 100, 4096);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("no btime"), std::string::npos) << s.error().message;

  SetUp();
  write("42/limits", "Max open files            lots                 lots                 files\n");
  s = read_process_sample(dir_, "42", 100, 4096);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("limits"), std::string::npos) << s.error().message;

  s = read_process_sample(dir_, "43", 100, 4096);  // no such process
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("43/stat"), std::string::npos) << s.error().message;
}

TEST(process_metrics, this_process_renders_its_figures) {
  registry r;
  register_process_metrics(r);
  const std::string text = r.render();
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_start_time_seconds",
                           "process_open_fds", "process_max_fds"}) {
    EXPECT_NE(text.find(std::string("\n") + name + " "), std::string::npos) << name << "\n" << text;
  }
  auto s = read_process_sample("/proc", "self", 100, 4096);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_GT(s->open_fds, 2.0);  // stdin, stdout, stderr at least
  EXPECT_GT(s->resident_bytes, 0.0);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(s->start_time_seconds, now + 5);  // boot time has whole seconds
  EXPECT_GT(s->start_time_seconds, 1.0e9);
}

TEST(process_metrics, the_names_are_reserved) {
  registry r;
  register_process_metrics(r);
  EXPECT_THROW(r.add_gauge("process_open_fds", "again"), std::invalid_argument);
}

}  // namespace
}  // namespace tec::metrics
