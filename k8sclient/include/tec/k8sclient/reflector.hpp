#pragma once

// A list/watch reflector: keeps a store in sync with one resource of the API server (client-go's
// Reflector, generic over a ListerWatcher and a Store; here over a codec and a store).
//
// The codec names the resource and turns its bytes into objects. Its static members:
//   using object_type;                     // a value type with a `resource_version` string
//   static constexpr const char* path;     // the collection, e.g. "/api/v1/pods"
//   static constexpr const char* kind;     // for logs, e.g. "pods"
//   static result<watch_event<object_type>> decode_event(std::string_view line);
//   static result<api_status> decode_status(std::string_view body);
//   static auto make_list_decoder(std::size_t max_item_bytes, std::size_t max_page_bytes);
// where the list decoder has feed(bytes, on_item(object_type&&), on_skip(const error&)) -> bool
// and finish() -> result<list_page<object_type>>. Errors of code errc::unexpected_shape are
// objects to skip; any other decoding error fails the page or the watch.
// The store: upsert(const object_type&) and erase(const object_type&) return the previous
// object (std::optional); replace_all(std::vector<object_type>) returns {upserted: (old, new)
// pairs of what changed, removed: what is gone}. A store may also offer relist_begin(),
// relist_add(std::vector<object_type>) and relist_end() (a replace_all in steps, each returning
// the same pairs): the reflector then hands it the listed objects in batches as they are
// decoded, instead of holding the whole list.
//
// One coroutine per reflector runs the session: a paginated LIST (resourceVersion=0, limit=500,
// following `continue`; an expired continue token -> paging again from the start, once), then
// WATCH from the list's resourceVersion with bookmarks and a random timeoutSeconds in
// [300, 600). A watch that ends cleanly is re-opened from the last resourceVersion seen (event
// or bookmark). 410 Gone (status or ERROR event) or 504 "too large resource version" -> LIST
// again at the last resourceVersion, and if that is 410 too, at resourceVersion="". After a
// relist the objects missing from the new list are delivered as deletions. 429, refused
// connections, 5xx, malformed events and very short empty watches -> re-watch from the last
// resourceVersion (no relist). Every restart waits for one jittered backoff first (0.8 s
// doubling to 30 s, reset after 2 minutes without one; client-go's backoff manager), 410 Gone
// included, except two that re-watch at once: a watch that ends cleanly and a timeout (no byte
// for `idle_timeout`, or no headers within the client's request timeout). Restarts are logged
// at most once a minute and counted by reason in reflector_stats.
//
// LIST pages are decoded as they stream: memory holds the records, never the body. One LIST is
// bounded in bytes, objects and time (reflector_options); past a bound it fails with
// errc::response_too_large or errc::timeout (a backoff, as any failed list), and the latest
// failure is current_list_error() until a LIST succeeds. A first LIST at resourceVersion=0 that
// is too large is followed by LISTs from etcd (resourceVersion=""), whose pages the server does
// bound (the watch cache answers one page with every object). An object that is valid JSON of
// the wrong shape is skipped, counted in reflector_stats::decode_errors and logged at most every
// 10 s (the server would send it again each time); malformed JSON fails the page or the watch.
//
// Deviation from client-go, on purpose: after a watch failure other than 429/refused client-go
// relists; we resume the watch from the last resourceVersion (the server answers 410 if it
// cannot), which spares the API server a full LIST. Unchanged objects in a relist are not
// delivered as updates.
//
// Threading and ownership: the reflector borrows the client and the store (both must outlive
// it). run() is co_spawned on the client's executor; handlers are called on that executor,
// synchronously, in event order, after the store was updated: they must be quick and must not
// throw. has_synced(), stats() and stop() may be called from any thread. Time comes from the
// client's clock (client::clock()), so tests with a manual clock drive the backoff, the
// short-watch test and the idle guard.

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/backoff.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/line_splitter.hpp"
#include "tec/k8sclient/watch.hpp"

namespace tec::k8sclient {

struct reflector_options {
  std::size_t page_size = 500;
  /// No byte on a watch for this long -> re-watch (the idle guard).
  std::chrono::milliseconds idle_timeout{120'000};
  /// timeoutSeconds of each watch is drawn uniformly from [min, max).
  std::chrono::seconds min_watch_timeout{300};
  std::chrono::seconds max_watch_timeout{600};
  base::backoff_policy backoff;
  /// Bound on one watch event line, and on one item of a LIST page.
  std::size_t max_line_bytes = line_splitter::default_max_line_bytes;
  /// Bound on one LIST response (streamed: memory holds the records, never the body). The
  /// watch cache answers resourceVersion=0 with every object in one response (1.2 GB of
  /// protobuf for 150,000 pods, BENCHMARKS.md); 16 GiB is more than etcd's largest quota
  /// (8 GiB) holds, even as JSON, and stops a body that never ends.
  std::size_t max_list_bytes = std::size_t{16} << 30U;
  /// Bound on the objects of one LIST (all its pages): what a LIST costs in memory. 300,000 is
  /// twice the pods of the largest supported cluster; at about 280 B a pod record
  /// (BENCHMARKS.md) some 85 MB, which fits the Deployment's 256 MiB.
  std::size_t max_list_objects = 300'000;
  /// Bound on each LIST request, headers and body: a body trickling a byte a minute never
  /// trips the idle guard. 5 minutes is 6x the slowest LIST measured (46 s, 150,000 pods,
  /// BENCHMARKS.md) and etcd's default compaction period. 0 = no bound.
  std::chrono::milliseconds list_timeout{300'000};
  /// A LIST request still running after this logs one warning (bytes and objects so far), so a
  /// slow or trickling body is not silent until list_timeout; 0 = never.
  std::chrono::milliseconds slow_list_warning{60'000};
  /// A watch that ends with no event sooner than this counts as a failure (backoff), so a
  /// server that closes watches at once does not make us spin (client-go: 1 s).
  std::chrono::milliseconds short_watch{1'000};
  /// resourceVersion of the first LIST: "0" (the default, as client-go) is served from the
  /// API server's watch cache, which ignores the page limit; "" reads etcd in pages (tests of
  /// paging against a real server use it).
  std::string first_list_resource_version = "0";
  /// Query parameters added to every LIST and WATCH (escaped, without a leading '&'), e.g.
  /// "fieldSelector=reason%3DTaintManagerEviction"; empty: none.
  std::string query;
  /// The Accept header of every LIST and WATCH. The codec tells JSON from protobuf by the first
  /// bytes, so asking for protobuf with JSON as a fallback works.
  std::string accept = "application/json";
  /// Seed for the watch timeouts and the backoff jitter; 0 = random.
  std::uint64_t seed = 0;
  /// Called once, on the executor, right after the first LIST was applied to the store
  /// (has_synced() has just turned true; no watch event handled yet). Quick, must not throw.
  std::function<void()> on_synced;
  /// Called on the executor after each failed LIST, before the backoff wait, with why it
  /// failed (as last_list_error()) and the wait. Returning true means it logged the failure
  /// itself (e.g. which RBAC rule a 403 lacks) and the reflector's warning is left out.
  /// Quick, must not throw.
  std::function<bool(const base::error& why, std::chrono::milliseconds retry_in)> on_list_failed;
};

/// Counters, for metrics and tests. `relists` excludes the initial list.
struct reflector_stats {
  std::uint64_t lists = 0;           ///< Completed LISTs, including the first.
  std::uint64_t relists = 0;         ///< LISTs after the first (410 or too large RV).
  std::uint64_t watches = 0;         ///< WATCH requests opened.
  std::uint64_t watch_restarts = 0;  ///< Watches re-opened (any reason).
  std::uint64_t idle_timeouts = 0;   ///< Watches dropped by the idle guard.
  std::uint64_t events = 0;          ///< ADDED/MODIFIED/DELETED events applied.
  std::uint64_t errors = 0;          ///< Failed requests, error events, malformed events.
  std::uint64_t decode_errors = 0;   ///< Undecodable objects skipped (watch events, list items).
  /// Restarts that waited for the backoff, by reason (not a clean watch end or idle timeout).
  std::uint64_t backoffs = 0;        ///< All of them: gone + watch_failures + list_failures.
  std::uint64_t gone = 0;            ///< 410 Gone or too large resourceVersion: relist.
  std::uint64_t watch_failures = 0;  ///< 429, 5xx, refused, malformed, closed at once.
  std::uint64_t list_failures = 0;   ///< Any failed LIST (status, transport, bound, deadline).
};

/// Keeps a store in sync with the API server and reports every change.
template <class Codec, class Store>
class reflector {
public:
  using object_type = typename Codec::object_type;
  using store_type = Store;
  /// (old, new): old is null on an add, new is null on a delete. Pointers are valid only
  /// during the call.
  using handler = std::function<void(const object_type* old_object, const object_type* new_object)>;

  reflector(client& api, store_type& store, handler on_change, reflector_options options = {});
  ~reflector();
  reflector(const reflector&) = delete;
  reflector& operator=(const reflector&) = delete;

  /// The list/watch session; completes after stop() (or client shutdown). Run it once, on
  /// the client's executor.
  boost::asio::awaitable<void> run();

  /// Asks run() to finish. It wakes a backoff wait at once; a watch in progress ends at its
  /// next byte or idle timeout (client::shutdown() ends it at once). Any thread.
  void stop();

  /// True once the first LIST has been applied to the store.
  [[nodiscard]] bool has_synced() const noexcept { return synced_.load(); }

  [[nodiscard]] reflector_stats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  /// The last resourceVersion seen (list, event or bookmark). Any thread.
  [[nodiscard]] std::string resource_version() const {
    std::lock_guard lock(mutex_);
    return rv_;
  }

  /// Why the last failed LIST failed (empty before any failure). Any thread.
  [[nodiscard]] base::error last_list_error() const {
    std::lock_guard lock(mutex_);
    return last_error_;
  }

  /// Why listing fails now: the latest LIST's error if none has succeeded since, else empty
  /// (unlike last_list_error(), a success clears it). Any thread.
  [[nodiscard]] base::error current_list_error() const {
    std::lock_guard lock(mutex_);
    return current_error_;
  }

private:
  struct list_outcome;
  struct watch_outcome;
  boost::asio::awaitable<list_outcome> list(const std::string& resource_version);
  [[nodiscard]] std::string list_target(const std::string& resource_version,
                                        const std::string& continue_token, bool unpaged) const;
  /// The request for one page of list(), begun at `began` (its deadline: the list's timeout).
  [[nodiscard]] request page_request(const std::string& resource_version,
                                     const std::string& continue_token, bool unpaged,
                                     std::chrono::steady_clock::time_point began) const;
  /// The continue token expired: list() pages again from the start (`out` emptied).
  void restart_paging(list_outcome& out);
  /// A page that could not be read (stopped, too many objects, a transport failure or the
  /// list's deadline): fills `out` and returns true.
  bool page_unread(const base::result<response>& res, bool too_many, std::uint64_t received,
                   std::size_t objects, std::chrono::steady_clock::time_point deadline,
                   list_outcome& out);
  /// A page the server refused (gone, or a status other than 200): fills `out`, returns true.
  bool page_refused(const response& res, bool first_page, list_outcome& out);
  boost::asio::awaitable<watch_outcome> watch(const std::string& resource_version,
                                              std::chrono::seconds timeout);
  bool apply_line(std::string_view line, watch_outcome& out);
  /// run()'s state from one list/watch round to the next, and its steps (on the executor).
  struct session;
  /// Counts a restart for `reason`, reports it and sets the session's backoff wait.
  void restart(session& s, std::uint64_t reflector_stats::*reason, const std::string& why,
               bool warning, const std::function<bool(std::chrono::milliseconds)>& report = {});
  /// Applies a finished LIST; false when it failed or was gone (the round starts again).
  bool take_list(session& s, list_outcome&& listed);
  void list_failed(session& s, const list_outcome& listed);
  /// What a watch's end means for the next round (a backoff, a relist, nothing).
  void take_watch(session& s, const watch_outcome& watched, const std::string& from,
                  std::chrono::steady_clock::time_point started);
  void skipped_undecodable(const base::error& e);
  /// Logs a restart that waits `retry_in`, at most one line per detail::restart_log_period
  /// (then a warning with the count left out); `warning` picks the level of a line about this
  /// restart alone (a lone 410 is routine: info). True when it reported this restart alone.
  bool report_restart(const std::string& why, std::chrono::milliseconds retry_in, bool warning);
  void apply_list(std::vector<object_type> items);
  /// Calls the handler for what a replace_all (or a step of one) changed.
  template <class Changes>
  void deliver(const Changes& changes);
  void set_resource_version(const std::string& rv);
  template <class F>
  void count(F&& update) {
    std::lock_guard lock(mutex_);
    update(stats_);
  }

  client& api_;
  store_type& store_;
  handler on_change_;
  reflector_options options_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;  // guards stats_, rv_, last_error_, current_error_, wake_
  reflector_stats stats_;
  std::string rv_;
  base::error last_error_;
  base::error current_error_;
  std::function<void()> wake_;
  // On the executor only: the rate limit of the log line for skipped objects.
  std::chrono::steady_clock::time_point next_decode_log_{};
  std::uint64_t unlogged_decode_errors_ = 0;
  // On the executor only: a list came back in pages (no watch cache), so relists keep the limit.
  bool paginated_ = false;
  // On the executor only: the rate limit of restart lines (report_restart), and whether the
  // latest restart was left out of the log (then the relist it leads to is logged at debug).
  std::chrono::steady_clock::time_point next_restart_log_{};
  std::chrono::steady_clock::time_point last_restart_log_{};
  std::uint64_t unlogged_restarts_ = 0;
  bool quiet_restart_ = false;
};

}  // namespace tec::k8sclient
