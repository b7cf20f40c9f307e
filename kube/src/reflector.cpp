// List/watch sessions for Pods and Nodes. See informer.hpp for the contract.

#include "tec/k8s/informer.hpp"

#include <spdlog/logger.h>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <random>
#include <type_traits>
#include <utility>

#include "tec/k8s/decode.hpp"
#include "tec/k8s/line_splitter.hpp"

// GCC 12 reports a false -Wmismatched-new-delete on Asio's awaitable frame allocator (its
// operator new/delete pair is matched; GCC mixes up the inlined frames of the coroutines
// instantiated here). Only this diagnostic, only this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace tec::k8s {

namespace {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

const std::shared_ptr<spdlog::logger>& watch_log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("watch");
    return existing ? existing : spdlog::default_logger()->clone("watch");
  }();
  return logger;
}

result<pod_event> decode_event(std::string_view line, std::type_identity<pod_record>) {
  return decode_pod_event(line);
}
result<node_event> decode_event(std::string_view line, std::type_identity<node_record>) {
  return decode_node_event(line);
}

std::optional<pod_record> erase_from(pod_store& store, const pod_record& r) {
  return store.erase(r.pod.namespace_, r.pod.name);
}
std::optional<node_record> erase_from(node_store& store, const node_record& r) {
  return store.erase(r.node.name);
}

/// Percent-encodes a query parameter value (continue tokens are base64 with '=' and '/').
std::string query_escape(std::string_view value) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4U]);
      out.push_back(hex[c & 0x0FU]);
    }
  }
  return out;
}

/// A short description of an error response for logs (the Status message, else the status),
/// clipped and escaped: it is the server's text.
std::string describe_status(const response& res) {
  std::string text = "HTTP " + std::to_string(res.status);
  if (auto st = decode_status(res.body); st && !st->message.empty()) {
    text += ": " + printable(st->message);
  }
  return text;
}

/// How often a skipped, undecodable object is logged (the rest are counted in between).
constexpr auto decode_error_log_period = std::chrono::seconds{10};

/// 504 "Too large resource version": the watch cache is behind the resourceVersion we asked
/// for (client-go treats it like 410 and relists).
bool too_large_resource_version(const response& res) {
  if (res.status != 504) {
    return false;
  }
  auto st = decode_status(res.body);
  if (!st) {
    return false;
  }
  std::string message = st->message;
  std::transform(message.begin(), message.end(), message.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return message.find("too large resource version") != std::string::npos;
}

}  // namespace

template <class Record>
struct informer<Record>::list_outcome {
  enum class kind { ok, gone, failed, stopped } what = kind::failed;
  std::vector<Record> items;
  std::string resource_version;
  std::string why;
  error err;  ///< For kind::failed, when the failure has a code (e.g. response_too_large).
};

template <class Record>
struct informer<Record>::watch_outcome {
  enum class kind { ended, gone, idle, failed, stopped } what = kind::ended;
  bool decided = false;  ///< Set by the sink: the stream was stopped for `what`.
  std::uint64_t bytes = 0;
  std::uint64_t events = 0;
  std::string why;
};

template <class Record>
informer<Record>::informer(client& api, store_type& store, handler on_change,
                           informer_options options)
    : api_(api), store_(store), on_change_(std::move(on_change)), options_(std::move(options)) {
  if (options_.max_watch_timeout <= options_.min_watch_timeout) {
    options_.max_watch_timeout = options_.min_watch_timeout + std::chrono::seconds{1};
  }
  if (options_.page_size == 0) {
    options_.page_size = 500;
  }
}

template <class Record>
informer<Record>::~informer() = default;

template <class Record>
template <class F>
void informer<Record>::count(F&& update) {
  std::lock_guard lock(mutex_);
  update(stats_);
}

template <class Record>
informer_stats informer<Record>::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

template <class Record>
error informer<Record>::last_list_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

template <class Record>
std::string informer<Record>::resource_version() const {
  std::lock_guard lock(mutex_);
  return rv_;
}

template <class Record>
void informer<Record>::set_resource_version(const std::string& rv) {
  if (rv.empty()) {
    return;
  }
  std::lock_guard lock(mutex_);
  rv_ = rv;
}

template <class Record>
void informer<Record>::stop() {
  stopping_ = true;
  std::lock_guard lock(mutex_);
  if (wake_) {
    wake_();
  }
}

template <class Record>
asio::awaitable<typename informer<Record>::list_outcome> informer<Record>::list(
    const std::string& resource_version) {
  using kind = typename list_outcome::kind;
  list_outcome out;
  std::string continue_token;
  bool restarted = false;  // paging began again after an expired continue token
  const list_limits limits{options_.max_line_bytes, api_.max_response_bytes()};
  for (;;) {
    std::string target = std::string(informer_traits<Record>::path) +
                         "?limit=" + std::to_string(options_.page_size) + "&";
    if (!continue_token.empty()) {
      // The API server refuses resourceVersion together with continue.
      target += "continue=" + query_escape(continue_token);
    } else {
      target += "resourceVersion=" + query_escape(resource_version);
    }
    request req;
    req.target = std::move(target);
    req.idempotent = true;
    // The page is decoded as it streams: items are kept as compact records, never the body.
    list_decoder<Record> decoder(limits);
    auto sink = [&](std::string_view bytes) {
      if (stopping_) {
        return false;
      }
      return decoder.feed(
          bytes, [&](Record&& item) { out.items.push_back(std::move(item)); },
          [&](const error& e) { skipped_undecodable(e); });
    };
    auto res = co_await api_.stream(std::move(req), sink, options_.idle_timeout);
    if (stopping_) {
      out.what = kind::stopped;
      co_return out;
    }
    if (!res) {
      out.what =
          res.err().code == make_error_code(errc::shutting_down) ? kind::stopped : kind::failed;
      out.why = res.err().message;
      out.err = res.err();
      co_return out;
    }
    if (res->status == 410 && !continue_token.empty() && !restarted) {
      // client-go's pager lists once more without a limit; a page that size may exceed our
      // page bound on a big cluster, so we page again from the start instead (once per
      // list(); a second expiry backs off like any failed list).
      watch_log()->info("{}: continue token expired while listing; paging again from the start",
                        informer_traits<Record>::kind);
      restarted = true;
      continue_token.clear();
      out.items.clear();
      continue;
    }
    if ((res->status == 410 && continue_token.empty()) || too_large_resource_version(res.value())) {
      out.what = kind::gone;
      out.why = describe_status(res.value());
      co_return out;
    }
    if (res->status != 200) {
      out.what = kind::failed;
      out.why = describe_status(res.value());
      if (res->status == 410) {
        out.why += " (the continue token expired twice)";
      }
      co_return out;
    }
    auto page = decoder.finish();
    if (!page) {
      out.what = kind::failed;
      out.why = "bad list page: " + page.err().message;
      out.err = page.err();
      co_return out;
    }
    if (page->continue_token.empty()) {
      out.resource_version = std::move(page->resource_version);
      out.what = kind::ok;
      co_return out;
    }
    continue_token = std::move(page->continue_token);
  }
}

template <class Record>
void informer<Record>::skipped_undecodable(const error& e) {
  count([](informer_stats& s) { ++s.decode_errors; });
  const auto now = steady::now();
  if (now < next_decode_log_) {
    ++unlogged_decode_errors_;
    return;
  }
  next_decode_log_ = now + decode_error_log_period;
  const auto unlogged = std::exchange(unlogged_decode_errors_, 0);
  watch_log()->warn(
      "{}: skipped an object that does not decode{}: {}", informer_traits<Record>::kind,
      unlogged == 0 ? std::string()
                    : " (and " + std::to_string(unlogged) + " more since the last report)",
      printable(e.message));
}

template <class Record>
void informer<Record>::apply_list(std::vector<Record> items) {
  auto changes = store_.replace_all(std::move(items));
  for (const auto& [old, cur] : changes.upserted) {
    if (old && *old == cur) {
      continue;  // unchanged since we last saw it
    }
    if (on_change_) {
      on_change_(old ? &*old : nullptr, &cur);
    }
  }
  for (const auto& gone : changes.deleted) {
    if (on_change_) {
      on_change_(&gone, nullptr);
    }
  }
}

template <class Record>
bool informer<Record>::apply_line(std::string_view line, watch_outcome& out) {
  using kind = typename watch_outcome::kind;
  auto ev = decode_event(line, std::type_identity<Record>{});
  if (!ev && ev.err().code == make_error_code(errc::unexpected_shape)) {
    // Valid JSON we cannot use (a wrong type, a missing uid): failing the watch would only
    // bring the same object back on the next one, forever. Skip it and go on.
    skipped_undecodable(ev.err());
    return true;
  }
  if (!ev) {
    out.what = kind::failed;
    out.decided = true;
    out.why = "malformed watch event: " + ev.err().message;
    return false;
  }
  switch (ev->type) {
    case event_type::added:
    case event_type::modified: {
      auto old = store_.upsert(ev->object);
      set_resource_version(ev->object.resource_version);
      ++out.events;
      if (on_change_) {
        on_change_(old ? &*old : nullptr, &ev->object);
      }
      return true;
    }
    case event_type::deleted: {
      auto old = erase_from(store_, ev->object);
      set_resource_version(ev->object.resource_version);
      ++out.events;
      if (on_change_) {
        // The cached version is the last state the handlers saw; fall back to the event's.
        on_change_(old ? &*old : &ev->object, nullptr);
      }
      return true;
    }
    case event_type::bookmark:
      set_resource_version(ev->object.resource_version);
      return true;
    case event_type::error:
      out.decided = true;
      out.why = "error event: code " + std::to_string(ev->status.code) + " " +
                printable(ev->status.reason, 64) + ": " + printable(ev->status.message);
      out.what = ev->status.code == 410 ? kind::gone : kind::failed;
      return false;
  }
  return true;
}

template <class Record>
asio::awaitable<typename informer<Record>::watch_outcome> informer<Record>::watch(
    const std::string& resource_version, std::chrono::seconds timeout) {
  using kind = typename watch_outcome::kind;
  watch_outcome out;
  request req;
  req.target =
      std::string(informer_traits<Record>::path) +
      "?watch=1&allowWatchBookmarks=true&resourceVersion=" + query_escape(resource_version) +
      "&timeoutSeconds=" + std::to_string(timeout.count());
  req.idempotent = true;
  line_splitter splitter(options_.max_line_bytes);
  std::uint64_t applied = 0;
  auto sink = [&](std::string_view bytes) {
    out.bytes += bytes.size();
    if (stopping_) {
      out.what = kind::stopped;
      out.decided = true;
      return false;
    }
    bool keep = true;
    splitter.feed(
        bytes,
        [&](std::string_view line) {
          if (keep) {
            keep = apply_line(line, out);
          }
        },
        [&](const error& e) {
          if (keep) {
            out.what = kind::failed;
            out.decided = true;
            out.why = e.message;
            keep = false;
          }
        });
    if (out.events != applied) {
      count([&](informer_stats& s) { s.events += out.events - applied; });
      applied = out.events;
    }
    return keep;
  };
  auto res = co_await api_.stream(std::move(req), sink, options_.idle_timeout);
  if (out.decided) {
    co_return out;
  }
  if (stopping_) {
    out.what = kind::stopped;
    co_return out;
  }
  if (!res) {
    if (res.err().code == make_error_code(errc::shutting_down)) {
      out.what = kind::stopped;
    } else if (res.err().code == make_error_code(errc::timeout)) {
      out.what = kind::idle;
    } else {
      out.what = kind::failed;
    }
    out.why = res.err().message;
    co_return out;
  }
  if (res->status == 410 || too_large_resource_version(res.value())) {
    out.what = kind::gone;
    out.why = describe_status(res.value());
  } else if (res->status < 200 || res->status >= 300) {
    out.what = kind::failed;
    out.why = describe_status(res.value());
  } else {
    out.what = kind::ended;
    if (splitter.has_partial_line()) {
      watch_log()->warn("{}: watch ended in the middle of an event; resuming from {}",
                        informer_traits<Record>::kind, resource_version);
    }
  }
  co_return out;
}

template <class Record>
asio::awaitable<void> informer<Record>::run() {
  const char* const what = informer_traits<Record>::kind;
  auto ex = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(ex);
  {
    std::lock_guard lock(mutex_);
    wake_ = [ex, timer] { asio::post(ex, [timer] { timer->cancel(); }); };
  }
  const std::uint64_t seed = options_.seed != 0 ? options_.seed : std::random_device{}();
  std::mt19937_64 rng(seed);
  backoff delays(options_.backoff, {}, seed + 1);
  std::uniform_int_distribution<std::int64_t> watch_seconds(options_.min_watch_timeout.count(),
                                                            options_.max_watch_timeout.count() - 1);

  auto pause = [&](const std::string& why) -> std::chrono::milliseconds {
    const auto d = delays.next();
    watch_log()->warn("{}: {}; retrying in {} ms", what, why, d.count());
    count([](informer_stats& s) { ++s.errors; });
    return d;
  };

  std::string list_rv = options_.first_list_resource_version;
  bool need_list = true;
  bool listed_once = false;
  bool watched_once = false;
  std::chrono::milliseconds wait{0};

  while (!stopping_) {
    if (wait > std::chrono::milliseconds::zero()) {
      timer->expires_after(wait);
      co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
      wait = std::chrono::milliseconds::zero();
      continue;
    }
    if (need_list) {
      auto listed = co_await list(list_rv);
      using lkind = typename list_outcome::kind;
      if (listed.what == lkind::stopped) {
        break;
      }
      if (listed.what == lkind::gone && !list_rv.empty()) {
        watch_log()->info("{}: list at resourceVersion {} is gone ({}); listing the latest", what,
                          list_rv, listed.why);
        list_rv.clear();
        continue;
      }
      if (listed.what != lkind::ok) {
        {
          std::lock_guard lock(mutex_);
          last_error_ = listed.err ? listed.err : make_error(errc::http_status, listed.why);
        }
        wait = pause("list failed: " + listed.why);
        if (listed.err.code == make_error_code(errc::response_too_large) && list_rv == "0") {
          // resourceVersion=0 is served from the watch cache in one response whatever the
          // limit (1.20), so a big cluster's first LIST can pass the page bound; etcd honours
          // the limit: page from there (a consistent read) after the backoff.
          watch_log()->info("{}: listing from etcd in pages of {} instead (resourceVersion=\"\")",
                            what, options_.page_size);
          list_rv.clear();
        }
        continue;
      }
      const auto n = listed.items.size();
      apply_list(std::move(listed.items));
      set_resource_version(listed.resource_version);
      count([&](informer_stats& s) {
        ++s.lists;
        if (listed_once) {
          ++s.relists;
        }
      });
      watch_log()->info("{}: listed {} at resourceVersion {}", what, n, listed.resource_version);
      listed_once = true;
      need_list = false;
      synced_ = true;
    }

    const std::string from = resource_version();
    const auto started = steady::now();
    count([&](informer_stats& s) {
      ++s.watches;
      if (watched_once) {
        ++s.watch_restarts;
      }
    });
    watched_once = true;
    auto watched = co_await watch(from, std::chrono::seconds{watch_seconds(rng)});
    using wkind = typename watch_outcome::kind;
    switch (watched.what) {
      case wkind::stopped:
        break;
      case wkind::ended:
        if (watched.bytes == 0 && steady::now() - started < options_.short_watch) {
          wait = pause("watch closed at once with nothing in it");
        }
        break;
      case wkind::gone:
        watch_log()->info("{}: resourceVersion {} is too old ({}); relisting", what, from,
                          watched.why);
        need_list = true;
        list_rv = resource_version();
        break;
      case wkind::idle:
        watch_log()->warn("{}: watch silent for {} ms ({}); re-watching from {}", what,
                          options_.idle_timeout.count(), watched.why, resource_version());
        count([](informer_stats& s) { ++s.idle_timeouts; });
        break;
      case wkind::failed:
        wait = pause("watch failed: " + watched.why);
        break;
    }
    if (watched.what == wkind::stopped) {
      break;
    }
  }
  std::lock_guard lock(mutex_);
  wake_ = nullptr;
}

template class informer<pod_record>;
template class informer<node_record>;

}  // namespace tec::k8s
