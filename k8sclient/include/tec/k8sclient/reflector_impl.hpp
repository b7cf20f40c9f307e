#pragma once

// The definitions of reflector<Codec, Store> (reflector.hpp). Include this only where the
// reflector is instantiated, once per codec (e.g. `template class reflector<pod_codec,
// pod_store>;` in one .cpp), and declare those instantiations `extern template` next to the
// codec, so that the coroutines are compiled once.

#include <spdlog/logger.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cassert>
#include <cctype>
#include <memory>
#include <random>
#include <utility>

#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/frame_splitter.hpp"
#include "tec/k8sclient/line_splitter.hpp"
#include "tec/k8sclient/paths.hpp"
#include "tec/k8sclient/reflector.hpp"

namespace tec::k8sclient {

namespace detail {

/// The "watch" logger.
const std::shared_ptr<spdlog::logger>& watch_log();

/// A short description of an error response for logs (the Status message, else the status),
/// clipped and escaped: it is the server's text. `status` is the body decoded as a Status.
std::string describe_status(const response& res, const base::result<api_status>& status);

/// How often a skipped, undecodable object is logged (the rest are counted in between).
constexpr auto decode_error_log_period = std::chrono::seconds{10};

/// How often a restart of the list/watch loop is logged (the rest are counted in between):
/// a relist storm is one line a minute, not one per request (issue 29).
constexpr auto restart_log_period = std::chrono::seconds{60};

/// True for the Status of a 504 "Too large resource version": the watch cache is behind the
/// resourceVersion we asked for (client-go treats it like 410 and relists).
bool too_large_resource_version(const base::result<api_status>& status);

/// A store that takes a relist in steps (reflector.hpp).
template <class Store, class Object>
concept relisted_in_steps = requires(Store& s, std::vector<Object> batch) {
  s.relist_begin();
  s.relist_add(std::move(batch));
  s.relist_end();
};

/// How many decoded objects are handed to such a store at once.
constexpr std::size_t relist_batch = 256;

template <class Codec>
std::string describe_status(const response& res) {
  return describe_status(res, Codec::decode_status(res.body));
}

template <class Codec>
bool too_large_resource_version(const response& res) {
  return res.status == 504 && too_large_resource_version(Codec::decode_status(res.body));
}

}  // namespace detail

template <class Codec, class Store>
struct reflector<Codec, Store>::list_outcome {
  enum class kind { ok, gone, failed, stopped } what = kind::failed;
  std::vector<object_type> items;  ///< Not yet handed to the store.
  std::size_t added = 0;           ///< Handed to a relisted_in_steps store already.
  std::string resource_version;
  std::string why;
  base::error err;  ///< For kind::failed, when the failure has a code (e.g. response_too_large).
};

template <class Codec, class Store>
struct reflector<Codec, Store>::watch_outcome {
  enum class kind { ended, gone, idle, failed, stopped } what = kind::ended;
  bool decided = false;  ///< Set by the sink: the stream was stopped for `what`.
  std::uint64_t bytes = 0;
  std::uint64_t events = 0;
  std::string why;
};

template <class Codec, class Store>
reflector<Codec, Store>::reflector(client& api, store_type& store, handler on_change,
                                   reflector_options options)
    : api_(api), store_(store), on_change_(std::move(on_change)), options_(std::move(options)) {
  if (options_.max_watch_timeout <= options_.min_watch_timeout) {
    options_.max_watch_timeout = options_.min_watch_timeout + std::chrono::seconds{1};
  }
  if (options_.page_size == 0) {
    options_.page_size = 500;
  }
}

template <class Codec, class Store>
reflector<Codec, Store>::~reflector() = default;

template <class Codec, class Store>
void reflector<Codec, Store>::set_resource_version(const std::string& rv) {
  if (rv.empty()) {
    return;
  }
  std::lock_guard lock(mutex_);
  rv_ = rv;
}

template <class Codec, class Store>
void reflector<Codec, Store>::stop() {
  stopping_ = true;
  std::lock_guard lock(mutex_);
  if (wake_) {
    wake_();
  }
}

template <class Codec, class Store>
std::string reflector<Codec, Store>::list_target(const std::string& resource_version,
                                                 const std::string& continue_token,
                                                 bool unpaged) const {
  std::string target = std::string(Codec::path) + "?";
  if (!unpaged) {
    target += "limit=" + std::to_string(options_.page_size) + "&";
  }
  if (!options_.query.empty()) {
    target += options_.query + "&";
  }
  if (!continue_token.empty()) {
    // The API server refuses resourceVersion together with continue.
    target += "continue=" + escape_path_segment(continue_token);
  } else {
    target += "resourceVersion=" + escape_path_segment(resource_version);
  }
  return target;
}

template <class Codec, class Store>
bool reflector<Codec, Store>::page_unread(const base::result<response>& res, bool too_many,
                                          std::uint64_t received, std::size_t objects,
                                          std::chrono::steady_clock::time_point deadline,
                                          list_outcome& out) {
  using kind = typename list_outcome::kind;
  if (stopping_) {
    out.what = kind::stopped;
    return true;
  }
  if (too_many) {
    out.what = kind::failed;
    out.why = "the LIST has more than " + std::to_string(options_.max_list_objects) +
              " objects (reflector_options::max_list_objects; " + std::to_string(received) +
              " bytes of this response read); dropped";
    out.err = base::make_error(base::errc::response_too_large, out.why);
    return true;
  }
  if (res) {
    return false;
  }
  out.what =
      res.error().code == make_error_code(base::errc::shutting_down) ? kind::stopped : kind::failed;
  out.why = res.error().message;
  out.err = res.error();
  if (res.error().code == make_error_code(base::errc::timeout) && api_.clock().now() >= deadline) {
    out.why = "the LIST was not complete within " + std::to_string(options_.list_timeout.count()) +
              " ms (reflector_options::list_timeout): " + std::to_string(received) + " bytes, " +
              std::to_string(objects) + " objects received";
    out.err.message = out.why;
  }
  return true;
}

template <class Codec, class Store>
bool reflector<Codec, Store>::page_refused(const response& res, bool first_page,
                                           list_outcome& out) {
  using kind = typename list_outcome::kind;
  if ((res.status == 410 && first_page) || detail::too_large_resource_version<Codec>(res)) {
    out.what = kind::gone;
    out.why = detail::describe_status<Codec>(res);
    return true;
  }
  if (res.status == 200) {
    return false;
  }
  out.what = kind::failed;
  out.why = detail::describe_status<Codec>(res);
  if (res.status == 410) {
    out.why += " (the continue token expired twice)";
  }
  out.err = base::error{make_error_code(errc_for_status(res.status)), out.why,
                        static_cast<int>(res.status)};
  return true;
}

template <class Codec, class Store>
request reflector<Codec, Store>::page_request(const std::string& resource_version,
                                              const std::string& continue_token, bool unpaged,
                                              std::chrono::steady_clock::time_point began) const {
  request req;
  req.target = list_target(resource_version, continue_token, unpaged);
  req.idempotent = true;
  req.accept = options_.accept;
  if (options_.list_timeout > std::chrono::milliseconds::zero()) {
    req.deadline = began + options_.list_timeout;
  }
  return req;
}

template <class Codec, class Store>
void reflector<Codec, Store>::restart_paging(list_outcome& out) {
  // client-go's pager lists once more without a limit; a page that size may exceed our page
  // bound on a big cluster, so we page again from the start instead.
  detail::watch_log()->info("{}: continue token expired while listing; paging again from the start",
                            Codec::kind);
  out.items.clear();
  out.added = 0;
  if constexpr (detail::relisted_in_steps<Store, object_type>) {
    store_.relist_begin();  // the objects of the expired snapshot count for nothing
  }
}

template <class Codec, class Store>
boost::asio::awaitable<typename reflector<Codec, Store>::list_outcome>
reflector<Codec, Store>::list(const std::string& resource_version) {
  using kind = typename list_outcome::kind;
  auto ex = co_await boost::asio::this_coro::executor;
  auto& clock = api_.clock();
  list_outcome out;
  std::string continue_token;
  bool restarted = false;  // paging began again after an expired continue token
  constexpr bool in_steps = detail::relisted_in_steps<Store, object_type>;
  // Hands the decoded objects to a store that takes the relist in steps.
  auto add_items = [&] {
    if constexpr (in_steps) {
      out.added += out.items.size();
      deliver(store_.relist_add(std::exchange(out.items, {})));
    }
  };
  if constexpr (in_steps) {
    store_.relist_begin();
  }
  // As client-go's reflector: a relist at the version a watch reached asks for no limit, so
  // the watch cache answers with objects at least that fresh (with a limit, etcd answers at
  // exactly that version, which after an API server restart is "too old" to watch from
  // again). A server that answered in pages before (no watch cache) keeps getting the limit.
  const bool unpaged = !resource_version.empty() && resource_version != "0" && !paginated_;
  for (;;) {
    // Bounded in time as a whole (a trickling body never trips the idle guard); a slow one
    // says so while it runs.
    const auto began = clock.now();
    request req = page_request(resource_version, continue_token, unpaged, began);
    std::uint64_t received = 0;
    bool too_many = false;
    const auto objects = [&] { return out.added + out.items.size(); };
    std::unique_ptr<base::alarm_clock::alarm> slow;
    if (options_.slow_list_warning > std::chrono::milliseconds::zero()) {
      slow = clock.at(ex, began + options_.slow_list_warning, [&] {
        detail::watch_log()->warn(
            "{}: LIST still running after {} ms: {} bytes, {} objects so far (given up after {} "
            "ms)",
            Codec::kind, options_.slow_list_warning.count(), received, objects(),
            options_.list_timeout.count());
      });
    }
    auto decoder = Codec::make_list_decoder(options_.max_line_bytes, options_.max_list_bytes);
    auto sink = [&](std::string_view bytes) {
      if (stopping_) {
        return false;
      }
      received += bytes.size();
      const bool keep = decoder.feed(
          bytes,
          [&](object_type&& item) {
            out.items.push_back(std::move(item));
            if (out.items.size() >= detail::relist_batch) {
              add_items();
            }
          },
          [&](const base::error& e) { skipped_undecodable(e); });
      if (objects() > options_.max_list_objects) {
        too_many = true;
        return false;
      }
      return keep;
    };
    const auto deadline = req.deadline;
    auto res = co_await api_.stream(std::move(req), sink, options_.idle_timeout);
    slow.reset();
    if (page_unread(res, too_many, received, objects(), deadline, out)) {
      co_return out;
    }
    if (res->status == 410 && !continue_token.empty() && !restarted) {
      restarted = true;  // once per list(); a second expiry backs off like any failed list
      continue_token.clear();
      restart_paging(out);
      continue;
    }
    if (page_refused(res.value(), continue_token.empty(), out)) {
      co_return out;
    }
    auto page = decoder.finish();
    if (!page) {
      out.what = kind::failed;
      out.why = "bad list page: " + page.error().message;
      out.err = page.error();
      co_return out;
    }
    add_items();
    if (page->continue_token.empty()) {
      out.resource_version = std::move(page->resource_version);
      out.what = kind::ok;
      co_return out;
    }
    paginated_ = true;
    continue_token = std::move(page->continue_token);
  }
}

template <class Codec, class Store>
void reflector<Codec, Store>::skipped_undecodable(const base::error& e) {
  count([](reflector_stats& s) { ++s.decode_errors; });
  const auto now = api_.clock().now();
  if (now < next_decode_log_) {
    ++unlogged_decode_errors_;
    return;
  }
  next_decode_log_ = now + detail::decode_error_log_period;
  const auto unlogged = std::exchange(unlogged_decode_errors_, 0);
  detail::watch_log()->warn(
      "{}: skipped an object that does not decode{}: {}", Codec::kind,
      unlogged == 0 ? std::string()
                    : " (and " + std::to_string(unlogged) + " more since the last report)",
      base::printable(e.message));
}

template <class Codec, class Store>
bool reflector<Codec, Store>::report_restart(const std::string& why,
                                             std::chrono::milliseconds retry_in, bool warning) {
  const auto& log = detail::watch_log();
  const auto now = api_.clock().now();
  if (now < next_restart_log_) {
    ++unlogged_restarts_;
    log->debug("{}: {}; retrying in {} ms", Codec::kind, why, retry_in.count());
    return false;
  }
  const auto unlogged = std::exchange(unlogged_restarts_, 0);
  const auto since = std::chrono::duration_cast<std::chrono::seconds>(now - last_restart_log_);
  last_restart_log_ = now;
  next_restart_log_ = now + detail::restart_log_period;
  if (unlogged == 0) {
    log->log(warning ? spdlog::level::warn : spdlog::level::info, "{}: {}; retrying in {} ms",
             Codec::kind, why, retry_in.count());
    return true;
  }
  log->warn(
      "{}: {}; retrying in {} ms ({} more restarts in the {} s before, not logged: one line a "
      "minute)",
      Codec::kind, why, retry_in.count(), unlogged, since.count());
  return false;
}

template <class Codec, class Store>
void reflector<Codec, Store>::apply_list(std::vector<object_type> items) {
  if constexpr (detail::relisted_in_steps<Store, object_type>) {
    assert(items.empty());  // list() handed them over already
    deliver(store_.relist_end());
  } else {
    deliver(store_.replace_all(std::move(items)));
  }
}

template <class Codec, class Store>
template <class Changes>
void reflector<Codec, Store>::deliver(const Changes& changes) {
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

template <class Codec, class Store>
bool reflector<Codec, Store>::apply_line(std::string_view line, watch_outcome& out) {
  using kind = typename watch_outcome::kind;
  const auto& log = detail::watch_log();
  const bool tracing = log->should_log(spdlog::level::trace);
  auto ev = Codec::decode_event(line);
  if (tracing && ev) {
    log->trace("stage=decoded kind={} rv={} t_us={}", Codec::kind, ev->object.resource_version,
               detail::trace_us());
  }
  if (!ev && ev.error().code == make_error_code(base::errc::unexpected_shape)) {
    // Valid JSON we cannot use (a wrong type, a missing uid): failing the watch would only
    // bring the same object back on the next one, forever. Skip it and go on.
    skipped_undecodable(ev.error());
    return true;
  }
  if (!ev) {
    out.what = kind::failed;
    out.decided = true;
    out.why = "malformed watch event: " + ev.error().message;
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
      if (tracing) {
        log->trace("stage=handled kind={} rv={} t_us={}", Codec::kind, ev->object.resource_version,
                   detail::trace_us());
      }
      return true;
    }
    case event_type::deleted: {
      auto old = store_.erase(ev->object);
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
                base::printable(ev->status.reason, 64) + ": " + base::printable(ev->status.message);
      out.what = ev->status.code == 410 ? kind::gone : kind::failed;
      return false;
  }
  return true;
}

template <class Codec, class Store>
boost::asio::awaitable<typename reflector<Codec, Store>::watch_outcome>
reflector<Codec, Store>::watch(const std::string& resource_version, std::chrono::seconds timeout) {
  using kind = typename watch_outcome::kind;
  watch_outcome out;
  request req;
  req.target = std::string(Codec::path) + "?watch=1&allowWatchBookmarks=true&resourceVersion=" +
               escape_path_segment(resource_version) +
               "&timeoutSeconds=" + std::to_string(timeout.count());
  if (!options_.query.empty()) {
    req.target += "&" + options_.query;
  }
  req.idempotent = true;
  req.accept = options_.accept;
  watch_splitter splitter(options_.max_line_bytes);
  std::uint64_t applied = 0;
  auto sink = [&](std::string_view bytes) {
    out.bytes += bytes.size();
    if (detail::watch_log()->should_log(spdlog::level::trace)) {
      detail::watch_log()->trace("stage=watch_bytes kind={} bytes={} t_us={}", Codec::kind,
                                 bytes.size(), detail::trace_us());
    }
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
        [&](const base::error& e) {
          if (keep) {
            out.what = kind::failed;
            out.decided = true;
            out.why = e.message;
            keep = false;
          }
        });
    if (out.events != applied) {
      count([&](reflector_stats& s) { s.events += out.events - applied; });
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
    if (res.error().code == make_error_code(base::errc::shutting_down)) {
      out.what = kind::stopped;
    } else if (res.error().code == make_error_code(base::errc::timeout)) {
      out.what = kind::idle;
    } else {
      out.what = kind::failed;
    }
    out.why = res.error().message;
    co_return out;
  }
  if (res->status == 410 || detail::too_large_resource_version<Codec>(res.value())) {
    out.what = kind::gone;
    out.why = detail::describe_status<Codec>(res.value());
  } else if (res->status < 200 || res->status >= 300) {
    out.what = kind::failed;
    out.why = detail::describe_status<Codec>(res.value());
  } else {
    out.what = kind::ended;
    if (splitter.has_partial_line()) {
      detail::watch_log()->warn("{}: watch ended in the middle of an event; resuming from {}",
                                Codec::kind, resource_version);
    }
  }
  co_return out;
}

namespace detail {
/// The level of a relist's routine lines: debug while restarts are left out of the log.
inline spdlog::level::level_enum relist_level(bool quiet_restart) {
  return quiet_restart ? spdlog::level::debug : spdlog::level::info;
}
}  // namespace detail

/// What one run() carries from one list/watch round to the next. On the executor only.
template <class Codec, class Store>
struct reflector<Codec, Store>::session {
  session(const reflector_options& options, base::clock& clock, std::uint64_t seed)
      : rng(seed),
        delays(options.backoff, clock, seed + 1),
        watch_seconds(options.min_watch_timeout.count(), options.max_watch_timeout.count() - 1),
        list_rv(options.first_list_resource_version) {}

  std::mt19937_64 rng;
  base::backoff delays;
  std::uniform_int_distribution<std::int64_t> watch_seconds;
  std::string list_rv;
  /// A relist at a version that came back at that same version (etcd read it exactly): if the
  /// watch from there is too old too, the next list asks for the latest instead of looping.
  std::string exact_rv;
  bool need_list = true;
  bool listed_once = false;
  bool watched_once = false;
  std::chrono::milliseconds wait{0};
};

// 410 Gone waits for the backoff too: a 410 loop relisting at once took the whole QPS budget
// of the DELETEs (client-go backs off every ListAndWatch). `report`, when set, may log the
// failure itself (returning true) instead of report_restart().
template <class Codec, class Store>
void reflector<Codec, Store>::restart(
    session& s, std::uint64_t reflector_stats::*reason, const std::string& why, bool warning,
    const std::function<bool(std::chrono::milliseconds)>& report) {
  const auto d = s.delays.next();
  count([&](reflector_stats& st) {
    ++st.backoffs;
    ++(st.*reason);
    if (reason != &reflector_stats::gone) {
      ++st.errors;
    }
  });
  quiet_restart_ = !(report && report(d)) && !report_restart(why, d, warning);
  s.wait = d;
}

template <class Codec, class Store>
bool reflector<Codec, Store>::take_list(session& s, list_outcome&& listed) {
  using lkind = typename list_outcome::kind;
  const char* const what = Codec::kind;
  if (listed.what == lkind::gone && !s.list_rv.empty()) {
    detail::watch_log()->log(detail::relist_level(quiet_restart_),
                             "{}: list at resourceVersion {} is gone ({}); listing the latest",
                             what, s.list_rv, listed.why);
    s.list_rv.clear();
    return false;
  }
  if (listed.what != lkind::ok) {
    list_failed(s, listed);
    return false;
  }
  s.exact_rv = !s.list_rv.empty() && s.list_rv != "0" && listed.resource_version == s.list_rv
                   ? s.list_rv
                   : std::string();
  const auto n = listed.added + listed.items.size();
  apply_list(std::move(listed.items));
  set_resource_version(listed.resource_version);
  count([&](reflector_stats& st) {
    ++st.lists;
    if (s.listed_once) {
      ++st.relists;
    }
  });
  {
    std::lock_guard lock(mutex_);
    current_error_ = {};
  }
  detail::watch_log()->log(
      s.listed_once ? detail::relist_level(quiet_restart_) : spdlog::level::info,
      "{}: listed {} at resourceVersion {}", what, n, listed.resource_version);
  s.listed_once = true;
  s.need_list = false;
  if (!synced_.exchange(true) && options_.on_synced) {
    options_.on_synced();
  }
  return true;
}

template <class Codec, class Store>
void reflector<Codec, Store>::list_failed(session& s, const list_outcome& listed) {
  const base::error failure =
      listed.err ? listed.err : base::make_error(base::errc::http_status, listed.why);
  {
    std::lock_guard lock(mutex_);
    last_error_ = failure;
    current_error_ = failure;
  }
  std::function<bool(std::chrono::milliseconds)> report;
  if (options_.on_list_failed) {
    report = [&](std::chrono::milliseconds retry_in) {
      return options_.on_list_failed(failure, retry_in);
    };
  }
  restart(s, &reflector_stats::list_failures, "list failed: " + listed.why, true, report);
  if (listed.err.code == make_error_code(base::errc::response_too_large) && !s.list_rv.empty()) {
    // resourceVersion=0 (and a relist at a version, which has no limit) is served from the
    // watch cache in one response whatever the limit (1.20), so a big cluster's LIST can pass
    // the page bound; etcd honours the limit: page from there (a consistent read) after the
    // backoff.
    detail::watch_log()->log(detail::relist_level(quiet_restart_),
                             "{}: listing from etcd in pages of {} instead (resourceVersion=\"\")",
                             Codec::kind, options_.page_size);
    s.list_rv.clear();
  }
}

template <class Codec, class Store>
void reflector<Codec, Store>::take_watch(session& s, const watch_outcome& watched,
                                         const std::string& from,
                                         std::chrono::steady_clock::time_point started) {
  using wkind = typename watch_outcome::kind;
  const char* const what = Codec::kind;
  switch (watched.what) {
    case wkind::stopped:
      break;
    case wkind::ended:
      if (watched.bytes == 0 && api_.clock().now() - started < options_.short_watch) {
        restart(s, &reflector_stats::watch_failures, "watch closed at once with nothing in it",
                true);
      }
      break;
    case wkind::gone:
      restart(s, &reflector_stats::gone,
              "resourceVersion " + from + " is too old (" + watched.why + "); relisting", false);
      s.need_list = true;
      s.list_rv = resource_version();
      if (!s.exact_rv.empty() && s.list_rv == s.exact_rv) {
        detail::watch_log()->log(detail::relist_level(quiet_restart_),
                                 "{}: relisted at resourceVersion {} and it is too old to "
                                 "watch from; listing the latest",
                                 what, s.list_rv);
        s.list_rv.clear();
      }
      break;
    case wkind::idle:
      // The client's message names the limit that passed (idle guard or request timeout).
      detail::watch_log()->warn("{}: watch timed out ({}); re-watching from {}", what, watched.why,
                                resource_version());
      count([](reflector_stats& st) { ++st.idle_timeouts; });
      break;
    case wkind::failed:
      restart(s, &reflector_stats::watch_failures, "watch failed: " + watched.why, true);
      break;
  }
}

template <class Codec, class Store>
boost::asio::awaitable<void> reflector<Codec, Store>::run() {
  auto ex = co_await boost::asio::this_coro::executor;
  // Backoff waits: an alarm on the client's clock ends the wait on `timer`, as stop() does.
  auto timer = std::make_shared<boost::asio::steady_timer>(ex);
  auto& clock = api_.clock();
  {
    std::lock_guard lock(mutex_);
    wake_ = [ex, timer] { boost::asio::post(ex, [timer] { timer->cancel(); }); };
  }
  session s(options_, clock, options_.seed != 0 ? options_.seed : std::random_device{}());
  while (!stopping_) {
    if (s.wait > std::chrono::milliseconds::zero()) {
      timer->expires_at(std::chrono::steady_clock::time_point::max());
      auto ring = clock.at(ex, clock.now() + s.wait, [timer] { timer->cancel(); });
      co_await timer->async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
      s.wait = std::chrono::milliseconds::zero();
      continue;
    }
    if (s.need_list) {
      auto listed = co_await list(s.list_rv);
      if (listed.what == list_outcome::kind::stopped) {
        break;
      }
      if (!take_list(s, std::move(listed))) {
        continue;
      }
    }
    const std::string from = resource_version();
    const auto started = clock.now();
    count([&](reflector_stats& st) {
      ++st.watches;
      if (s.watched_once) {
        ++st.watch_restarts;
      }
    });
    s.watched_once = true;
    auto watched = co_await watch(from, std::chrono::seconds{s.watch_seconds(s.rng)});
    if (watched.what == watch_outcome::kind::stopped) {
      break;
    }
    take_watch(s, watched, from, started);
  }
  std::lock_guard lock(mutex_);
  wake_ = nullptr;
}

}  // namespace tec::k8sclient
