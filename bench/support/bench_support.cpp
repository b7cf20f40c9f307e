#include "bench_support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace tec::bench {

namespace {
// The running child, for the signal handler: a benchmark stopped with ^C or SIGTERM must not
// leave a controller running against the cluster.
volatile sig_atomic_t current_child = -1;

extern "C" void stop_child_and_exit(int sig) {
  if (current_child > 0) {
    ::kill(static_cast<pid_t>(current_child), SIGKILL);
  }
  ::_exit(128 + sig);
}
}  // namespace

void stop_children_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = stop_child_and_exit;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

namespace asio = boost::asio;
using namespace std::chrono_literals;

double seconds_since(steady::time_point start) {
  return std::chrono::duration<double>(steady::now() - start).count();
}

bool run_until(asio::io_context& io, const std::function<bool()>& done,
               steady::time_point deadline) {
  io.restart();
  while (!done()) {
    if (steady::now() >= deadline) {
      return false;
    }
    io.run_one_for(5ms);
  }
  return true;
}

void run_for(asio::io_context& io, std::chrono::milliseconds how_long) {
  run_until(
      io, [] { return false; }, steady::now() + how_long);
}

void shut_down(asio::io_context& io, k8sclient::client& api) {
  api.shutdown();
  run_for(io, 200ms);
}

base::result<k8sclient::response> call(asio::io_context& io, k8sclient::client& api,
                                       k8sclient::request request,
                                       std::chrono::milliseconds limit) {
  struct state {
    std::optional<base::result<k8sclient::response>> out;
    std::exception_ptr failure;
    bool done = false;
  };
  auto st = std::make_shared<state>();
  asio::co_spawn(
      io,
      [](k8sclient::client& c, k8sclient::request req,
         std::shared_ptr<state> s) -> asio::awaitable<void> {
        s->out.emplace(co_await c.send(std::move(req)));
      }(api, std::move(request), st),
      [st](std::exception_ptr e) {
        st->failure = std::move(e);
        st->done = true;
      });
  if (!run_until(
          io, [&] { return st->done; }, steady::now() + limit)) {
    return base::make_error(base::errc::timeout, "no answer within the benchmark's limit");
  }
  if (st->failure) {
    std::rethrow_exception(st->failure);
  }
  return std::move(*st->out);
}

std::string describe(const base::result<k8sclient::response>& res) {
  if (!res) {
    return res.error().message;
  }
  return "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 300);
}

bool ok(const base::result<k8sclient::response>& res) {
  return res && res->status >= 200 && res->status < 300;
}

base::result<long> count_objects(asio::io_context& io, k8sclient::client& api,
                                 const std::string& path) {
  auto res = call(io, api, k8sclient::request(boost::beast::http::verb::get, path + "?limit=1"));
  if (!res) {
    return res.error();
  }
  if (res->status != 200) {
    return base::make_error(base::errc::http_status, "listing " + path + ": " + describe(res),
                            static_cast<int>(res->status));
  }
  try {
    const auto doc = nlohmann::json::parse(res->body);
    long n = static_cast<long>(doc.at("items").size());
    const auto& meta = doc.at("metadata");
    if (meta.contains("remainingItemCount")) {
      n += meta.at("remainingItemCount").get<long>();
    }
    return n;
  } catch (const nlohmann::json::exception& e) {
    return base::make_error(base::errc::malformed_json, "listing " + path + ": " + e.what());
  }
}

namespace {

struct batch_state {
  std::function<std::vector<k8sclient::request>(long)> make;
  batch_options options;
  long count = 0;
  long next = 0;
  long workers_left = 0;
  tally t;

  void fail(std::string why) {
    ++t.failed;
    if (t.first_failure.empty()) {
      t.first_failure = std::move(why);
    }
  }
};

asio::awaitable<void> batch_worker(k8sclient::client& c, std::shared_ptr<batch_state> sh) {
  while (sh->next < sh->count) {
    const long i = sh->next++;
    bool tolerated = false;
    bool failed = false;
    for (auto& req : sh->make(i)) {
      auto res = co_await c.send(std::move(req));
      if (ok(res)) {
        continue;
      }
      const auto& accepted = sh->options.tolerated;
      if (res && std::find(accepted.begin(), accepted.end(), res->status) != accepted.end()) {
        tolerated = true;
        continue;
      }
      sh->fail(describe(res));
      failed = true;
      if (!res && res.error().code == base::make_error_code(base::errc::shutting_down)) {
        co_return;
      }
      break;
    }
    if (!failed) {
      ++(tolerated ? sh->t.tolerated : sh->t.ok);
    }
    if (sh->options.on_item_done) {
      sh->options.on_item_done(i);
    }
  }
}

}  // namespace

tally run_batch(asio::io_context& io, k8sclient::client& api, long count,
                const std::function<std::vector<k8sclient::request>(long)>& make,
                const batch_options& options) {
  auto s = std::make_shared<batch_state>();
  s->make = make;
  s->options = options;
  s->count = count;
  s->workers_left = std::min(options.concurrency, count);
  const auto start = steady::now();
  for (long w = 0, n = s->workers_left; w < n; ++w) {
    asio::co_spawn(io, batch_worker(api, s), [s](std::exception_ptr e) {
      --s->workers_left;
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          s->fail(ex.what());
        }
      }
    });
  }
  auto last_report = start;
  const bool finished = run_until(
      io,
      [&] {
        if (count >= 5'000 && steady::now() - last_report >= 10s) {
          last_report = steady::now();
          const long done = s->t.ok + s->t.tolerated + s->t.failed;
          std::printf("  %s: %ld/%ld (%.0f/s)\n", options.what, done, count,
                      static_cast<double>(done) / seconds_since(start));
          std::fflush(stdout);
        }
        return s->workers_left == 0;
      },
      options.deadline);
  if (!finished) {
    // Abandon the rest deliberately: shutdown() cancels the requests in flight, and the
    // workers end at their next send (shutting_down).
    api.shutdown();
    run_until(
        io, [&] { return s->workers_left == 0; }, steady::now() + 10s);
    s->t.timed_out = true;
    s->t.first_failure = "gave up at the deadline; " + s->t.first_failure;
  }
  return s->t;
}

std::optional<process_sample> sample_process(pid_t pid) {
  process_sample out;
  {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(in, text)) {
      return std::nullopt;
    }
    // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
    const auto close = text.rfind(')');
    if (close == std::string::npos) {
      return std::nullopt;
    }
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    double ticks = 0;
    for (int n = 3; n <= 15 && fields >> field; ++n) {
      if (n == 14 || n == 15) {
        ticks += std::strtod(field.c_str(), nullptr);
      }
    }
    out.cpu_seconds = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::error_code ec;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  double run_ns = 0;
  bool read_any = false;
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream stat(task.path() / "schedstat");
    double ns = 0;
    if (stat >> ns) {
      run_ns += ns;
      read_any = true;
    }
  }
  if (!ec && read_any) {
    out.run_seconds = run_ns / 1e9;
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      out.rss_bytes = std::strtoull(line.c_str() + 6, nullptr, 10) * 1024U;
    } else if (line.rfind("VmHWM:", 0) == 0) {
      out.rss_peak_bytes = std::strtoull(line.c_str() + 6, nullptr, 10) * 1024U;
    }
  }
  return out;
}

child_process::~child_process() {
  if (pid_ > 0 && running()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

bool child_process::start(const std::vector<std::string>& argv, const std::string& log_path,
                          std::string& error) {
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot open " + log_path + ": " + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fd, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));  // NOLINT: posix_spawn's signature
  }
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv.at(0).c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fd);
  if (rc != 0) {
    error = "cannot start " + argv.at(0) + ": " + std::strerror(rc);
    return false;
  }
  pid_ = pid;
  current_child = pid;
  exit_text_.clear();
  return true;
}

bool child_process::running() {
  if (pid_ <= 0) {
    return false;
  }
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) {
    return true;
  }
  if (current_child == pid_) {
    current_child = -1;
  }
  if (r == pid_) {
    exit_text_ = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                   : "signal " + std::to_string(WTERMSIG(status));
  }
  pid_ = -1;
  return false;
}

void child_process::stop(std::chrono::milliseconds grace) {
  if (!running()) {
    return;
  }
  ::kill(pid_, SIGTERM);
  const auto deadline = steady::now() + grace;
  while (running() && steady::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  if (running()) {
    ::kill(pid_, SIGKILL);
    while (running()) {
      std::this_thread::sleep_for(5ms);
    }
  }
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

}  // namespace tec::bench
