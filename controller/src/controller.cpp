#include "tec/controller/controller.hpp"
#include "tec/base/logger.hpp"
#include "tec/base/rfc3339.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace tec::controller {

std::string_view to_string(decision_kind kind) noexcept {
  switch (kind) {
    case decision_kind::scheduled:
      return "scheduled";
    case decision_kind::would_delete:
      return "would_delete";
    case decision_kind::cancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string_view to_string(cancel_reason reason) noexcept {
  switch (reason) {
    case cancel_reason::none:
      return "none";
    case cancel_reason::untainted:
      return "untainted";
    case cancel_reason::pod_gone:
      return "pod_gone";
    case cancel_reason::replaced:
      return "replaced";
  }
  return "unknown";
}

std::string_view to_string(skip_reason reason) noexcept {
  switch (reason) {
    case skip_reason::annotation:
      return "annotation";
    case skip_reason::namespace_annotation:
      return "namespace_annotation";
    case skip_reason::namespace_:
      return "namespace";
    case skip_reason::pod_selector:
      return "pod_selector";
    case skip_reason::mirror:
      return "mirror";
    case skip_reason::terminal:
      return "terminal";
    case skip_reason::daemon_set:
      return "daemonset";
    case skip_reason::taint_ignored:
      return "taint_ignored";
  }
  return "unknown";
}

std::uint32_t fnv1a_32(std::string_view s) noexcept {
  std::uint32_t h = 2166136261U;
  for (const char c : s) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 16777619U;
  }
  return h;
}

std::size_t shard_of(std::string_view node_name, std::size_t workers) noexcept {
  return workers == 0 ? 0 : static_cast<std::size_t>(fnv1a_32(node_name) % workers);
}

std::vector<taint> no_execute_taints(const std::vector<taint>& taints) {
  std::vector<taint> out;
  for (const taint& t : taints) {
    if (t.effect == taint_effect::no_execute) {
      out.push_back(t);
    }
  }
  return out;
}

std::string event_detail(std::string_view text) {
  constexpr std::string_view ellipsis = "...";
  std::string out;
  const bool clipped = text.size() > max_event_detail;
  if (clipped) {
    // Cut at a UTF-8 character boundary: never before a continuation byte (10xxxxxx).
    std::size_t cut = max_event_detail - ellipsis.size();
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) {
      --cut;
    }
    text = text.substr(0, cut);
  }
  out.reserve(text.size() + (clipped ? ellipsis.size() : 0));
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20U || u == 0x7FU ? ' ' : c);
  }
  if (clipped) {
    out.append(ellipsis);
  }
  return out;
}

namespace {

using timedqueue::time_point;

// Equality of the NoExecute subsequences, without copying.
bool same_no_execute(const std::vector<taint>& a, const std::vector<taint>& b) {
  auto ia = a.begin();
  auto ib = b.begin();
  const auto skip = [](auto& it, const auto end) {
    while (it != end && it->effect != taint_effect::no_execute) {
      ++it;
    }
  };
  for (;;) {
    skip(ia, a.end());
    skip(ib, b.end());
    if (ia == a.end() || ib == b.end()) {
      return ia == a.end() && ib == b.end();
    }
    if (!(*ia == *ib)) {
      return false;
    }
    ++ia;
    ++ib;
  }
}

std::pair<std::string_view, std::string_view> split_key(std::string_view key) {
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) {
    return {std::string_view{}, key};
  }
  return {key.substr(0, slash), key.substr(slash + 1)};
}

// The taint whose toleration set a pod's time of `seconds`: the first of `taints` whose first
// matching toleration has that tolerationSeconds (the smallest, which decide() took); the
// first taint when none has (not for a decision decide() made from these taints).
const taint& setting_taint(const std::vector<taint>& taints,
                           const std::vector<toleration>& tolerations, std::int64_t seconds) {
  for (const taint& t : taints) {
    const auto tol =
        std::find_if(tolerations.begin(), tolerations.end(),
                     [&](const toleration& candidate) { return tolerates(candidate, t); });
    if (tol != tolerations.end() && tol->seconds == seconds) {
      return t;
    }
  }
  return taints.front();
}

// A duration for messages: "20s", or "20.3s" when not whole seconds (tenths, rounded down).
std::string seconds_text(std::chrono::nanoseconds d) {
  const auto tenths = std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 100;
  std::string out = std::to_string(tenths / 10);
  if (tenths % 10 != 0) {
    out += '.';
    out += static_cast<char>('0' + tenths % 10);
  }
  out += 's';
  return out;
}

// An entry's state and why it waits, as eviction_view names them. Only the storm breaker
// pauses the queue (set_paused), and the groups are {node, namespace} (schedule()).
std::pair<std::string_view, std::string_view> state_of(const timedqueue::entry_info& e) {
  switch (e.state) {
    case timedqueue::entry_state::pending:
      return {"pending", ""};
    case timedqueue::entry_state::running:
      return {"running", ""};
    case timedqueue::entry_state::backoff:
      return {"retrying", "backoff"};
    case timedqueue::entry_state::held:
      break;
  }
  switch (e.hold) {
    case timedqueue::hold_reason::paused:
      return {"waiting", "storm_breaker"};
    case timedqueue::hold_reason::group_limit:
      return {"waiting", e.hold_group == 0 ? "in_flight_limit_node" : "in_flight_limit_namespace"};
    case timedqueue::hold_reason::rate_limit:
    case timedqueue::hold_reason::none:
      break;
  }
  return {"waiting", "rate_limit"};
}

/// The steady clock in microseconds (CLOCK_MONOTONIC: comparable between the processes of one
/// machine), for the trace-level stage lines of a single eviction's latency (issue 16).
long long trace_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The controller's counters (read by stats() from any thread).
struct counters {
  std::atomic<std::uint64_t> node_updates{0};
  std::atomic<std::uint64_t> pod_updates{0};
  std::atomic<std::uint64_t> ignored{0};
  std::atomic<std::uint64_t> coalesced{0};
  std::atomic<std::uint64_t> decisions{0};
  std::atomic<std::uint64_t> scheduled{0};
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> attempts{0};
  std::atomic<std::uint64_t> succeeded{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> skipped{0};
  std::atomic<std::uint64_t> terminating{0};
  std::atomic<std::uint64_t> cancellations{0};
  std::atomic<std::uint64_t> stale{0};
  std::atomic<std::uint64_t> dry_run{0};
  std::atomic<std::uint64_t> from_taint_time{0};
  std::array<std::atomic<std::uint64_t>, skip_reason_count> skipped_by{};
  std::atomic<std::uint64_t> overrides{0};
  std::atomic<std::uint64_t> fallbacks{0};
  std::atomic<std::uint64_t> blocked{0};
  std::function<void(std::chrono::nanoseconds)> on_deleted;
};

void bump(std::atomic<std::uint64_t>& c) {
  c.fetch_add(1, std::memory_order_relaxed);
}

// Lets the tainted table (and the stuck table) be searched by string_view.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

// Records about queue entries, by key; each belongs to one entry (its generation) and goes
// when that entry's eviction ends. Thread-safe; size() reads without the lock.
template <class Record>
class entry_records {
public:
  // The eviction of `key` with `generation` is over (done, or nothing to do). The record it
  // may remove was made by an earlier attempt of the same entry, which completed before this
  // one started: the shortcut on an empty table cannot miss it.
  void done(std::string_view key, std::uint64_t generation) {
    if (count_.load() == 0) {
      return;
    }
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it != entries_.end() && it->second.generation == generation) {
      entries_.erase(it);
      count_.store(entries_.size());
    }
  }

  // The queue entry of `key` was cancelled (whatever its generation): true when it had a
  // record. Always takes the lock (no shortcut on an empty table): an attempt may be between
  // its cancelled() check and its insert.
  bool cancelled(std::string_view key) {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) {
      return false;
    }
    entries_.erase(it);
    count_.store(entries_.size());
    return true;
  }

  [[nodiscard]] std::size_t size() const { return count_.load(); }

protected:
  // The record of `key` for `generation`, made (or replaced, for another generation) with
  // `fresh`; requires mu_. Second: whether it is new.
  std::pair<Record&, bool> upsert(std::string_view key, std::uint64_t generation,
                                  const Record& fresh) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      it = entries_.emplace(std::string(key), fresh).first;
      count_.store(entries_.size());
      return {it->second, true};
    }
    if (it->second.generation != generation) {
      it->second = fresh;
      return {it->second, true};
    }
    return {it->second, false};
  }

  mutable std::mutex mu_;
  std::unordered_map<std::string, Record, string_hash, std::equal_to<>> entries_;
  std::atomic<std::size_t> count_{0};  // entries_.size(), readable without the lock
};

struct stuck_record {
  std::uint64_t generation = 0;
  time_point last_report;
};

// The evictions that failed `stuck_after` times in a row and are still retried.
class stuck_table : public entry_records<stuck_record> {
public:
  // A failed attempt `attempt` of the eviction of `key` (generation `generation`) at `now`.
  // Returns true when a stuck report (event + warning) is due: on its `stuck_after`-th
  // failure in a row, then once `interval` passed since the last report. `cancelled` is
  // checked under the lock, so a cancel (which forgets the key after cancelling the entry)
  // never leaves a record behind.
  bool failed(std::string_view key, std::uint64_t generation, std::uint32_t attempt,
              std::uint32_t stuck_after, time_point now, timedqueue::duration interval,
              const std::function<bool()>& cancelled) {
    if (attempt < stuck_after) {
      return false;
    }
    std::lock_guard lock(mu_);
    if (cancelled()) {
      return false;
    }
    auto [rec, fresh] = upsert(key, generation, stuck_record{generation, now});
    if (fresh) {
      return true;
    }
    if (now - rec.last_report >= interval) {
      rec.last_report = now;
      return true;
    }
    return false;
  }
};

struct blocked_record {
  std::uint64_t generation = 0;
  time_point since;                       // the first refusal
  std::optional<time_point> fallback_at;  // when the pod is deleted anyway; none: never
  bool fell_back = false;                 // its fallback delete was announced
};

// Evict mode: the evictions the Eviction API refuses (a disruption budget).
class blocked_table : public entry_records<blocked_record> {
public:
  // A refusal at `now`; `fallback` is the fallbackAfter that applies now (0: never). Returns
  // the record and whether it is the eviction's first refusal. `cancelled` is checked under
  // the lock (see stuck_table::failed).
  std::pair<blocked_record, bool> refused(std::string_view key, std::uint64_t generation,
                                          time_point now, std::chrono::milliseconds fallback,
                                          const std::function<bool()>& cancelled) {
    std::lock_guard lock(mu_);
    if (cancelled()) {
      return {blocked_record{generation, now, std::nullopt, false}, false};
    }
    auto [rec, first] =
        upsert(key, generation, blocked_record{generation, now, std::nullopt, false});
    // Worked out at each refusal: a taint added since (out-of-service) may shorten it.
    rec.fallback_at =
        fallback.count() > 0 ? std::optional<time_point>(rec.since + fallback) : std::nullopt;
    return {rec, first};
  }

  [[nodiscard]] std::optional<blocked_record> find(std::string_view key,
                                                   std::uint64_t generation) const {
    auto rec = lookup(key);
    if (rec && rec->generation != generation) {
      return std::nullopt;
    }
    return rec;
  }

  // The record of `key` whatever its generation (for evictions()).
  [[nodiscard]] std::optional<blocked_record> lookup(std::string_view key) const {
    if (count_.load() == 0) {
      return std::nullopt;
    }
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) {
      return std::nullopt;
    }
    return it->second;
  }

  // The eviction of `key` (`generation`) falls back to a delete: true the first time only, so
  // a fallback delete that fails and is retried is announced once.
  bool fall_back_once(std::string_view key, std::uint64_t generation) {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(key);
    if (it == entries_.end() || it->second.generation != generation || it->second.fell_back) {
      return false;
    }
    it->second.fell_back = true;
    return true;
  }
};

// One waiting pod update: "<node>/<namespace>/<name>" (node names contain no '/').
struct pod_item {
  std::string combined;
  std::size_t node_len = 0;

  [[nodiscard]] std::string_view node() const {
    return std::string_view(combined).substr(0, node_len);
  }
  [[nodiscard]] std::string_view key() const {
    return std::string_view(combined).substr(node_len + 1);
  }
};

// One waiting node update: its latest NoExecute taints (nullopt = deleted), and whether the
// replay at activation is among the updates merged into it.
struct node_pending {
  std::optional<std::vector<taint>> taints;
  bool replay = false;
};

struct work_item {
  bool is_node = false;
  std::string node;
  node_pending update;  // Node items.
  pod_item pod;
};

struct worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> node_order;
  std::unordered_map<std::string, node_pending> node_latest;
  std::deque<pod_item> pod_order;
  std::unordered_set<std::string> pod_waiting;

  // The tainted table for the nodes of this shard. Written only by this worker (under
  // table_mu, for readers on other threads); read by this worker without the lock.
  mutable std::mutex table_mu;
  std::unordered_map<std::string, std::vector<taint>, string_hash, std::equal_to<>> tainted;

  std::thread thread;

  [[nodiscard]] bool has_work() const { return !node_order.empty() || !pod_order.empty(); }

  // Node updates first (docs/behaviour.md §2). Caller holds mu and has checked has_work().
  void pop(work_item& out) {
    if (!node_order.empty()) {
      out.is_node = true;
      out.node = std::move(node_order.front());
      node_order.pop_front();
      auto it = node_latest.find(out.node);
      out.update = std::move(it->second);
      node_latest.erase(it);
      return;
    }
    out.is_node = false;
    out.pod = std::move(pod_order.front());
    pod_order.pop_front();
    pod_waiting.erase(out.pod.combined);
  }
};

constexpr std::size_t key_lock_count = 64;

timedqueue::admission_limits admission_of(const rate_limit_policy& r) {
  timedqueue::admission_limits a;
  a.starts_per_second = r.evictions_per_second;
  a.burst = r.burst;
  a.max_running_per_group = {r.max_in_flight_per_node, r.max_in_flight_per_namespace};
  return a;
}

/// The storm breaker's view of the cluster: every node it was told of, and those carrying a
/// NoExecute taint it counts. Guarded by its mutex.
struct breaker {
  std::mutex mu;
  storm_breaker_policy cfg;
  std::unordered_set<std::string, string_hash, std::equal_to<>> nodes;
  std::unordered_set<std::string, string_hash, std::equal_to<>> tainted;
  bool open = false;

  /// Whether `taints` (all of a node's taints) hold a NoExecute taint the breaker counts.
  [[nodiscard]] bool counts(const std::vector<taint>& taints) const {
    for (const taint& t : taints) {
      if (t.effect != taint_effect::no_execute) {
        continue;
      }
      if (cfg.taint_keys.empty() ||
          std::find(cfg.taint_keys.begin(), cfg.taint_keys.end(), t.key) != cfg.taint_keys.end()) {
        return true;
      }
    }
    return false;
  }

  /// Opens above the threshold (with at least min_tainted_nodes), closes below the threshold
  /// minus the hysteresis. `fresh` (a new policy): decides as if closed, so that raising the
  /// threshold above the current share releases an open breaker at once. Returns whether the
  /// state changed.
  bool evaluate(bool fresh = false) {
    bool want = false;
    if (cfg.enabled()) {
      const double share = nodes.empty() ? 0.0
                                         : 100.0 * static_cast<double>(tainted.size()) /
                                               static_cast<double>(nodes.size());
      if (!open || fresh) {
        want = share > cfg.max_tainted_nodes_percent && tainted.size() >= cfg.min_tainted_nodes;
      } else {
        want = share >= cfg.max_tainted_nodes_percent - cfg.hysteresis_percent;
      }
    }
    if (want == open) {
      return false;
    }
    open = want;
    return true;
  }
};

}  // namespace

struct controller::impl {
  impl(const pod_index& pods, eviction_sink& sink, timedqueue::driver& drv,
       controller_options options)
      : pods_(pods),
        sink_(sink),
        drv_(drv),
        threaded_(options.threaded),
        stuck_after_(std::max<std::uint32_t>(options.stuck_after, 1)),
        stuck_event_interval_(options.stuck_event_interval),
        log_(base::named_logger("controller")),
        ctr_(std::make_shared<counters>()),
        queue_(
            drv,
            [this](const timedqueue::run_info& info, timedqueue::completion done) {
              run_eviction(info, std::move(done));
            },
            options.retry) {
    ctr_->on_deleted = std::move(options.on_deleted);
    on_waited_ = std::move(options.on_waited);
    on_breaker_ = std::move(options.on_breaker);
    on_decision_ = std::move(options.on_decision);
    deadlines_from_taint_time_ = options.deadlines_from_taint_time;
    scheduled_events_ = options.scheduled_events;
    wall_clock_ = std::move(options.wall_clock);
    namespace_opted_out_ = std::move(options.namespace_opted_out);
    apply_policy(options.policy);
    const std::size_t n = std::max<std::size_t>(options.workers, 1);
    workers_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      workers_.push_back(std::make_unique<worker>());
    }
  }

  // --- intake (any thread) ---

  bool enqueue_node(std::string name, std::optional<std::vector<taint>> taints, bool replay) {
    worker& w = *workers_[shard_of(name, workers_.size())];
    if (log_->should_log(spdlog::level::trace)) {
      log_->trace("stage=enqueued node=\"{}\" t_us={}", name, trace_us());
    }
    bool fresh = false;
    {
      std::lock_guard lock(w.mu);
      if (stopping_.load()) {
        return false;
      }
      auto [it, inserted] = w.node_latest.try_emplace(name);
      it->second.taints = std::move(taints);
      it->second.replay = it->second.replay || replay;  // the pods are still to be replayed
      if (inserted) {
        w.node_order.push_back(std::move(name));
        outstanding_.fetch_add(1);
        fresh = true;
      }
    }
    enqueued(w, ctr_->node_updates, fresh);
    return true;
  }

  // Every tainted node decided again (a policy change, a namespace's opt-out changed). A node
  // with an update already waiting is left alone: that update decides its pods anyway, with
  // taints newer than the table's.
  void redecide_all() {
    for (const auto& wp : workers_) {
      worker& w = *wp;
      std::vector<std::pair<std::string, std::vector<taint>>> nodes;
      {
        std::lock_guard table(w.table_mu);
        nodes.reserve(w.tainted.size());
        for (const auto& [name, taints] : w.tainted) {
          nodes.emplace_back(name, taints);
        }
      }
      for (auto& [name, taints] : nodes) {
        bool fresh = false;
        {
          std::lock_guard lock(w.mu);
          if (stopping_.load()) {
            return;
          }
          auto [it, inserted] = w.node_latest.try_emplace(name);
          if (inserted) {
            it->second.taints = std::move(taints);
            w.node_order.push_back(name);
            outstanding_.fetch_add(1);
            fresh = true;
          }
        }
        enqueued(w, ctr_->node_updates, fresh);
      }
    }
  }

  bool enqueue_pod(std::string_view node, std::string_view ns, std::string_view name) {
    pod_item item;
    item.combined.reserve(node.size() + ns.size() + name.size() + 2);
    item.combined.append(node).push_back('/');
    item.combined.append(ns).push_back('/');
    item.combined.append(name);
    item.node_len = node.size();
    worker& w = *workers_[shard_of(node, workers_.size())];
    bool fresh = false;
    {
      std::lock_guard lock(w.mu);
      if (stopping_.load()) {
        return false;
      }
      if (w.pod_waiting.insert(item.combined).second) {
        w.pod_order.push_back(std::move(item));
        outstanding_.fetch_add(1);
        fresh = true;
      }
    }
    enqueued(w, ctr_->pod_updates, fresh);
    return true;
  }

  // After an update was put on (fresh) or merged into (coalesced) worker w's queue, outside
  // its lock: count it and wake the worker only when there is something new to do.
  void enqueued(worker& w, std::atomic<std::uint64_t>& counter, bool fresh) {
    bump(counter);
    if (fresh) {
      w.cv.notify_one();
    } else {
      bump(ctr_->coalesced);
    }
  }

  // --- workers ---

  void worker_loop(worker& w) {
    for (;;) {
      work_item item;
      {
        std::unique_lock lock(w.mu);
        w.cv.wait(lock, [&] { return stopping_.load() || w.has_work(); });
        if (stopping_.load()) {
          return;
        }
        w.pop(item);
      }
      handle(w, item);
      finish_item();
    }
  }

  void handle(worker& w, work_item& item) {
    try {
      if (item.is_node) {
        handle_node(w, item.node, std::move(item.update.taints), item.update.replay);
      } else {
        handle_pod(w, item.pod.node(), item.pod.key());
      }
    } catch (const std::exception& e) {
      // A throwing pod_index or sink (or bad_alloc) must not kill the worker. The update is
      // lost; the next update for the same node or pod decides again from the latest state.
      log_->error("failed to handle {} update {}: {}", item.is_node ? "node" : "pod",
                  item.is_node ? item.node : item.pod.combined, e.what());
    }
  }

  void finish_item() {
    if (outstanding_.fetch_sub(1) == 1) {
      std::lock_guard lock(idle_mu_);
      idle_cv_.notify_all();
    }
  }

  // Section 4.
  void handle_node(worker& w, const std::string& name, std::optional<std::vector<taint>> taints,
                   bool replay) {
    if (log_->should_log(spdlog::level::trace)) {
      log_->trace("stage=worker node=\"{}\" t_us={}", name, trace_us());
    }
    if (!taints || taints->empty()) {
      std::lock_guard lock(w.table_mu);
      if (w.tainted.erase(name) > 0) {
        tainted_count_.fetch_sub(1);
      }
    } else {
      std::lock_guard lock(w.table_mu);
      auto [it, inserted] = w.tainted.insert_or_assign(name, *taints);
      if (inserted) {
        tainted_count_.fetch_add(1);
      }
    }
    if (!taints) {
      log_->debug("node deleted node=\"{}\"", name);
      return;  // Upstream keeps the evictions already scheduled for its pods.
    }
    const std::vector<pod_view> on_node = pods_.pods_on_node(name);
    if (on_node.empty()) {
      return;
    }
    const std::vector<taint>* current = taints->empty() ? nullptr : &*taints;
    const time_point now = drv_.now();
    std::string& key = key_buffer();
    for (const pod_view& p : on_node) {
      set_key(key, p.namespace_, p.name);
      std::lock_guard key_guard(key_lock(key));
      // The snapshot is used as is unless an entry made for another UID shows it may be
      // stale; then the pod is read again (under the key lock) and decided from that.
      if (p.node_name != name ||
          decide_locked(key, p, current, true, now, false, replay) == verdict::reread) {
        reconcile_locked(key, p.namespace_, p.name, name, current, true, now, replay);
      }
    }
  }

  // Section 5.
  void handle_pod(worker& w, std::string_view node, std::string_view key) {
    const auto [ns, name] = split_key(key);
    const std::vector<taint>* taints = nullptr;
    const auto it = w.tainted.find(node);
    if (it != w.tainted.end()) {
      taints = &it->second;
    }
    std::lock_guard key_guard(key_lock(key));
    reconcile_locked(key, ns, name, node, taints, false, drv_.now());
  }

  std::mutex& key_lock(std::string_view key) {
    return key_locks_[std::hash<std::string_view>{}(key) % key_lock_count];
  }

  // A per-thread buffer for "namespace/name", so the hot path does not allocate keys.
  static std::string& key_buffer() {
    thread_local std::string buffer;
    return buffer;
  }
  static void set_key(std::string& key, std::string_view ns, std::string_view name) {
    key.assign(ns).push_back('/');
    key.append(name);
  }

  // Decides for the pod known under `key` as seen from `node` (the item's node), with
  // `taints` that node's NoExecute taints (null: not tainted), reading the pod's current
  // state. `from_node`: called for a node update, where an untainted node cancels its pods'
  // evictions (docs/behaviour.md §4); for a pod update an untainted node does nothing
  // (docs/behaviour.md §5). Caller holds the key lock.
  void reconcile_locked(std::string_view key, std::string_view ns, std::string_view name,
                        std::string_view node, const std::vector<taint>* taints, bool from_node,
                        time_point now, bool replay = false) {
    const std::optional<pod_view> pod = pods_.get_pod(ns, name);
    if (!pod) {
      // Section 5.1, upstream's event included (it names the UID the eviction was for).
      const auto entry = queue_.lookup(key);
      if (entry && cancel_entry(key)) {
        bump(ctr_->cancellations);
        pod_ref ref{std::string(ns), std::string(name), entry->payload};
        record_event(ref, event_kind::cancelling_deletion);
        log_->info("cancelled eviction of deleted pod pod=\"{}\" uid={}", key, entry->payload);
        note_cancelled(std::move(ref), cancel_reason::pod_gone, entry->fire_at);
      }
      return;
    }
    if (pod->node_name.empty() || pod->node_name != node) {
      // A stale item: the item for its current node decides. An entry left by a pod that had
      // this name before is dropped here all the same.
      const auto entry = queue_.lookup(key);
      if (entry && entry->payload != pod->uid) {
        drop_foreign(key, entry->payload, pod->uid);
      }
      return;
    }
    decide_locked(key, *pod, taints, from_node, now, true, replay);
  }

  enum class verdict : std::uint8_t { done, reread };

  // Sections 4.3 and 6 for `pod`, which is on the node whose taints are `taints`. `verified`:
  // `pod` was read under the key lock, so an entry for another UID is stale and is dropped;
  // otherwise (a pods_on_node snapshot) such an entry asks the caller to read the pod again.
  // Caller holds the key lock.
  verdict decide_locked(std::string_view key, const pod_view& pod, const std::vector<taint>* taints,
                        bool from_node, time_point now, bool verified, bool replay = false) {
    std::optional<pod_decision> d;
    std::shared_ptr<const eviction_policy> scope;
    const taint* overridden = nullptr;
    const taint_rule* rule = nullptr;
    if (taints != nullptr) {
      bump(ctr_->decisions);
      if (scoped_.load(std::memory_order_acquire)) {
        std::lock_guard lock(policy_mu_);
        scope = scope_;
      }
      if (const auto skip = skipped(pod, scope.get())) {
        note_skip(key, *skip);
        d = pod_decision{false, toleration_time::never()};
      } else if (scope && !scope->taints.empty()) {
        const ruled_decision rd = decide(*taints, pod.tolerations, scope->taints);
        if (rd.all_ignored) {
          note_skip(key, skip_reason::taint_ignored);
        }
        d = rd.decision;
        overridden = rd.overridden;
        rule = rd.rule;
      } else {
        d = decide(*taints, pod.tolerations);
      }
    }
    if (!d || (!d->untolerated && d->time.is_forever())) {
      const auto entry = queue_.lookup(key);
      if (!entry) {
        return verdict::done;
      }
      if (entry->payload != pod.uid) {
        if (!verified) {
          return verdict::reread;
        }
        drop_foreign(key, entry->payload, pod.uid);
        return verdict::done;
      }
      if (d || from_node) {
        cancel_with_event(key, pod, cancel_reason::untainted);
      }
      // Otherwise docs/behaviour.md §5: a pod update on an untainted node cancels nothing.
      return verdict::done;
    }
    // A dry run (shadow mode included) decides a terminating pod as upstream does: it deletes
    // nothing, so the pod is terminating because someone else deleted it (in shadow mode, the
    // built-in taint manager, usually first), and what it reports is our decision as if we
    // were the only one acting.
    if (pod.terminating && !dry_run_.load(std::memory_order_relaxed)) {
      return leave_terminating(key, pod, verified);
    }
    // Section 6: schedule first; only when an entry already exists is it looked at.
    time_point created_at = now;
    time_point fire_at = d->untolerated ? now : now + d->time.delay();
    std::optional<countdown> resumed;
    if (replay && deadlines_from_taint_time_ && !d->untolerated && !d->time.is_now()) {
      resumed = resume_countdown(
          pod, *taints, now, created_at, fire_at,
          scope ? std::span<const taint_rule>(scope->taints) : std::span<const taint_rule>());
    }
    if (schedule(key, pod, created_at, fire_at, *taints)) {
      note_resumed(key, pod, resumed, now, fire_at);
      note_override(key, pod, overridden, rule, now, fire_at);
      announce(pod, *taints, resumed ? resumed->time : d->time, now, fire_at, overridden);
      return verdict::done;
    }
    const auto entry = queue_.lookup(key);
    if (!entry) {
      return verdict::done;  // It completed just now: the pod was evicted, or shut down.
    }
    if (entry->payload != pod.uid) {
      if (!verified) {
        return verdict::reread;
      }
      drop_foreign(key, entry->payload, pod.uid);
      if (schedule(key, pod, created_at, fire_at, *taints)) {
        note_resumed(key, pod, resumed, now, fire_at);
        note_override(key, pod, overridden, rule, now, fire_at);
        announce(pod, *taints, resumed ? resumed->time : d->time, now, fire_at, overridden);
      }
      return verdict::done;
    }
    // An eviction of this very pod exists and keeps its fire time, unless the pod is no
    // longer tolerated and it is still waiting for a later time: then cancel and evict now.
    // One already due, running or retrying is left alone (no duplicate eviction).
    if (d->untolerated && entry->state == timedqueue::entry_state::pending &&
        entry->fire_at > now) {
      // No note for this cancel: the scheduled note that follows replaces the old due time.
      cancel_with_event(key, pod, cancel_reason::none);
      schedule(key, pod, now, now, *taints);
    }
    return verdict::done;
  }

  // `pod` would be evicted, but it is terminating already (a deletionTimestamp: ours, taken
  // before a restart or a failover, or someone else's): a second DELETE would change nothing
  // for it and take a rate-limit token, so nothing is scheduled, and an eviction of it still
  // waiting (pending, held, backing off) is cancelled, with upstream's event when it was
  // pending or held, or blocked by a budget (cancel_entry's answer; as for a pod deleted before
  // its time, docs/behaviour.md §5.1). An attempt running is left to finish: its own DELETE is
  // what usually made the pod terminating.
  // Caller holds the key lock; `verified` as for decide_locked.
  verdict leave_terminating(std::string_view key, const pod_view& pod, bool verified) {
    const auto entry = queue_.lookup(key);
    if (entry && entry->payload != pod.uid) {
      if (!verified) {
        return verdict::reread;
      }
      drop_foreign(key, entry->payload, pod.uid);
    } else if (entry && entry->state == timedqueue::entry_state::running) {
      return verdict::done;
    } else if (entry) {
      if (cancel_entry(key)) {
        bump(ctr_->cancellations);
        pod_ref ref{pod.namespace_, pod.name, pod.uid};
        record_event(ref, event_kind::cancelling_deletion);
        note_cancelled(std::move(ref), cancel_reason::pod_gone, entry->fire_at);
      }
      bump(ctr_->terminating);
      log_->info("cancelled eviction of terminating pod pod=\"{}\" uid={}", key, pod.uid);
      return verdict::done;
    }
    bump(ctr_->terminating);
    if (log_->should_log(spdlog::level::debug)) {
      log_->debug("not evicting pod=\"{}\" uid={} reason=terminating", key, pod.uid);
    }
    return verdict::done;
  }

  // True when an eviction of `pod` (its UID) waits in the queue and has not started: then the
  // update that makes it terminating is decided (leave_terminating), not ignored.
  [[nodiscard]] bool eviction_waits(const pod_view& pod) const {
    std::string key;
    set_key(key, pod.namespace_, pod.name);
    const auto entry = queue_.lookup(key);
    return entry && entry->payload == pod.uid && entry->state != timedqueue::entry_state::running;
  }

  // The replay found `pod` on a node with `taints` and no eviction scheduled: when its
  // countdown started before now (countdown_since), moves `created_at` and `fire_at` back to
  // where an uninterrupted controller would have them (a fire time already past fires at
  // once). nullopt (and nothing moved) when it counts from now.
  std::optional<countdown> resume_countdown(const pod_view& pod, const std::vector<taint>& taints,
                                            time_point now, time_point& created_at,
                                            time_point& fire_at,
                                            std::span<const taint_rule> rules) const {
    const auto wall = wall_clock_ ? wall_clock_() : std::chrono::system_clock::now();
    const std::int64_t now_unix =
        std::chrono::duration_cast<std::chrono::seconds>(wall.time_since_epoch()).count();
    std::optional<countdown> c =
        countdown_since(taints, pod.tolerations, pod.bound_unix, now_unix, rules);
    if (!c || c->start_unix >= now_unix) {
      return std::nullopt;
    }
    const auto elapsed = std::chrono::duration_cast<timedqueue::duration>(
        wall - std::chrono::system_clock::time_point(std::chrono::seconds(c->start_unix)));
    created_at = now - elapsed;
    fire_at = created_at + c->time.delay();
    return c;
  }

  void note_resumed(std::string_view key, const pod_view& pod, const std::optional<countdown>& c,
                    time_point now, time_point fire_at) {
    if (!c) {
      return;
    }
    bump(ctr_->from_taint_time);
    const auto due_in = std::chrono::duration_cast<std::chrono::milliseconds>(fire_at - now);
    log_->info(
        "eviction deadline from taint time pod=\"{}\" uid={} taint=\"{}\" counted_from={} "
        "toleration={}s due_in={}ms",
        key, pod.uid, c->started_by != nullptr ? c->started_by->key : std::string(), c->start_unix,
        c->time.seconds.count(), std::max<std::int64_t>(due_in.count(), 0));
  }

  // Why `pod` is left alone whatever its tolerations say, if it is (the opt-out annotations,
  // then the policy's exclude rules in `scope`, which may be null).
  [[nodiscard]] std::optional<skip_reason> skipped(const pod_view& pod,
                                                   const eviction_policy* scope) const {
    if (pod.opted_out) {
      return skip_reason::annotation;
    }
    if (namespace_opted_out_ && namespace_opted_out_(pod.namespace_)) {
      return skip_reason::namespace_annotation;
    }
    if (scope == nullptr) {
      return std::nullopt;
    }
    const exclude_policy& ex = scope->exclude;
    if (std::find(ex.namespaces.begin(), ex.namespaces.end(), pod.namespace_) !=
        ex.namespaces.end()) {
      return skip_reason::namespace_;
    }
    if (ex.mirror_pods && pod.mirror) {
      return skip_reason::mirror;
    }
    if (ex.terminal_pods && (pod.phase == pod_phase::succeeded || pod.phase == pod_phase::failed)) {
      return skip_reason::terminal;
    }
    if (ex.daemon_set_pods && pod.owner_kind == "DaemonSet") {
      return skip_reason::daemon_set;
    }
    if (selects(ex.pod_selector, pod.labels)) {
      return skip_reason::pod_selector;
    }
    return std::nullopt;
  }

  void note_skip(std::string_view key, skip_reason reason) {
    bump(ctr_->skipped_by[static_cast<std::size_t>(reason)]);
    if (log_->should_log(spdlog::level::debug)) {
      log_->debug("not evicting pod=\"{}\" reason={}", key, to_string(reason));
    }
  }

  // A taint rule's floor or cap set the time of the eviction just scheduled: a deviation from
  // the pod's spec, logged once per scheduled eviction.
  void note_override(std::string_view key, const pod_view& pod, const taint* t, const taint_rule* r,
                     time_point now, time_point fire_at) {
    if (t == nullptr || r == nullptr) {
      return;
    }
    bump(ctr_->overrides);
    const auto it = std::find_if(pod.tolerations.begin(), pod.tolerations.end(),
                                 [&](const toleration& tol) { return tolerates(tol, *t); });
    std::string own = "untolerated";
    if (it != pod.tolerations.end()) {
      own = it->seconds ? std::to_string(*it->seconds) + "s" : std::string("forever");
    }
    const auto due_in = std::chrono::duration_cast<std::chrono::milliseconds>(fire_at - now);
    log_->info(
        "eviction time set by policy, not by the pod's toleration pod=\"{}\" uid={} taint=\"{}\" "
        "rule=\"{}{}\" toleration={} minTolerationSeconds={} maxTolerationSeconds={} "
        "due_in={}ms",
        key, pod.uid, t->key, r->key, r->prefix ? "*" : "", own, r->min_toleration_seconds,
        r->max_toleration_seconds, std::max<std::int64_t>(due_in.count(), 0));
  }

  // A new entry for `pod` fires at `fire_at` after the pod's toleration of `time` on a node
  // with `taints`: when that is later than `now`, a TaintEvictionScheduled event says when and
  // why (controller_options::scheduled_events).
  // `set_by`: the taint a policy rule set the time for (named in the event), else null.
  void announce(const pod_view& pod, const std::vector<taint>& taints, const toleration_time& time,
                time_point now, time_point fire_at, const taint* set_by = nullptr) {
    if (!scheduled_events_ || fire_at <= now || time.what != toleration_time::kind::after) {
      return;
    }
    const auto wall = wall_clock_ ? wall_clock_() : std::chrono::system_clock::now();
    const auto due =
        wall + std::chrono::duration_cast<std::chrono::system_clock::duration>(fire_at - now);
    const taint& t =
        set_by != nullptr ? *set_by : setting_taint(taints, pod.tolerations, time.seconds.count());
    record_event(pod_ref{pod.namespace_, pod.name, pod.uid}, event_kind::eviction_scheduled,
                 scheduled_event_detail(due, t, time.seconds.count()));
  }

  void drop_foreign(std::string_view key, std::string_view old_uid, std::string_view uid) {
    std::optional<timedqueue::entry_info> entry;
    if (on_decision_) {
      entry = queue_.lookup(key);
    }
    if (cancel_entry(key) && entry) {
      const auto [ns, name] = split_key(key);
      note_cancelled(pod_ref{std::string(ns), std::string(name), std::string(old_uid)},
                     cancel_reason::replaced, entry->fire_at);
    }
    bump(ctr_->stale);
    log_->info("dropped eviction made for replaced pod pod=\"{}\" old_uid={} uid={}", key, old_uid,
               uid);
  }

  // Returns true when a new entry was created (false also after shutdown, when the queue
  // holds nothing).
  bool schedule(std::string_view key, const pod_view& pod, time_point created_at,
                time_point fire_at, const std::vector<taint>& taints) {
    if (log_->should_log(spdlog::level::trace)) {
      log_->trace("stage=decided pod=\"{}\" t_us={}", key, trace_us());
    }
    // Groups for the in-flight caps: the pod's node and namespace.
    const auto r =
        queue_.schedule(key, created_at, fire_at, pod.uid, {pod.node_name, pod.namespace_});
    if (r != timedqueue::schedule_result::scheduled) {
      return false;
    }
    bump(ctr_->scheduled);
    if (on_decision_) {
      decision_note note;
      note.kind = decision_kind::scheduled;
      note.pod = pod_ref{pod.namespace_, pod.name, pod.uid};
      note.node = pod.node_name;
      note.taints = taints;
      note.at = created_at;
      note.due = fire_at;
      on_decision_(note);
    }
    if (log_->should_log(spdlog::level::debug)) {
      log_->debug(
          "scheduled eviction pod=\"{}\" uid={} in={}ms", key, pod.uid,
          std::chrono::duration_cast<std::chrono::milliseconds>(fire_at - created_at).count());
    }
    return true;
  }

  // Every cancel goes through here: the entry's eviction also leaves the stuck table.
  bool cancel_entry(std::string_view key) {
    const bool was_pending = queue_.cancel(key);
    stuck_.cancelled(key);
    // A blocked eviction is still to happen, as far as the pod's events tell: its cancel gets
    // the "Cancelling deletion" event a pending one gets.
    const bool was_blocked = blocked_.cancelled(key);
    return was_pending || was_blocked;
  }

  // `reason` none: no note (the caller reschedules at once).
  void cancel_with_event(std::string_view key, const pod_view& pod, cancel_reason reason) {
    std::optional<timedqueue::entry_info> entry;
    if (on_decision_ && reason != cancel_reason::none) {
      entry = queue_.lookup(key);
    }
    if (cancel_entry(key)) {
      bump(ctr_->cancellations);
      pod_ref ref{pod.namespace_, pod.name, pod.uid};
      record_event(ref, event_kind::cancelling_deletion);
      log_->info("cancelled eviction pod=\"{}\"", key);
      if (entry) {
        note_cancelled(std::move(ref), reason, entry->fire_at);
      }
    }
  }

  // Tells the decision observer (if any) that the eviction of `pod`, due at `due`, was
  // cancelled.
  void note_cancelled(pod_ref pod, cancel_reason reason, time_point due) {
    if (!on_decision_) {
      return;
    }
    decision_note note;
    note.kind = decision_kind::cancelled;
    note.pod = std::move(pod);
    note.at = drv_.now();
    note.due = due;
    note.reason = reason;
    on_decision_(note);
  }

  /// Events go to the sink, except in dry-run mode, which writes nothing.
  void record_event(const pod_ref& pod, event_kind kind, std::string_view detail = {}) {
    if (!dry_run_.load(std::memory_order_relaxed)) {
      sink_.record_event(pod, kind, detail);
    }
  }

  // The NoExecute taints of `node` in the tainted table; nullopt when it is not tainted.
  std::optional<std::vector<taint>> node_taints(std::string_view node) const {
    const worker& w = *workers_[shard_of(node, workers_.size())];
    std::lock_guard lock(w.table_mu);
    const auto it = w.tainted.find(node);
    if (it == w.tainted.end()) {
      return std::nullopt;
    }
    return it->second;
  }

  // --- policy ---

  void apply_policy(const eviction_policy& p) {
    bool rescope = false;
    {
      std::lock_guard lock(policy_mu_);
      rescope = !(policy_.exclude == p.exclude) || policy_.taints != p.taints;
      policy_ = p;
      const bool scoped = !p.exclude.empty() || !p.taints.empty();
      scope_ = scoped ? std::make_shared<const eviction_policy>(p) : nullptr;
      scoped_.store(scoped, std::memory_order_release);
    }
    dry_run_.store(p.dry_run);
    evict_mode_.store(p.mode == eviction_mode::evict);
    queue_.set_admission(admission_of(p.rate_limit));
    bool changed = false;
    {
      std::lock_guard lock(breaker_.mu);
      const bool recount = breaker_.cfg.taint_keys != p.storm_breaker.taint_keys;
      const bool cfg_changed = !(breaker_.cfg == p.storm_breaker);
      breaker_.cfg = p.storm_breaker;
      if (recount) {
        // Which taints count changed: recount from the tainted table.
        breaker_.tainted.clear();
        for (const auto& w : workers_) {
          std::lock_guard table(w->table_mu);
          for (const auto& [node, taints] : w->tainted) {
            if (breaker_.counts(taints) && breaker_.nodes.contains(node)) {
              breaker_.tainted.insert(node);
            }
          }
        }
      }
      changed = breaker_.evaluate(/*fresh=*/cfg_changed);
      if (changed) {
        queue_.set_paused(breaker_.open);
      }
    }
    if (changed) {
      breaker_changed();
    }
    if (rescope && !workers_.empty()) {
      log_->info("scoping rules changed: deciding every pod on a tainted node again");
      redecide_all();
    }
  }

  /// Intake of a node update for the breaker (before the workers decide its pods, so a storm
  /// pauses evictions as soon as it is seen). Any thread.
  void breaker_node(const node_view* old_node, const node_view* new_node) {
    bool changed = false;
    {
      std::lock_guard lock(breaker_.mu);
      const node_view& n = new_node != nullptr ? *new_node : *old_node;
      if (new_node == nullptr) {
        breaker_.nodes.erase(n.name);
        breaker_.tainted.erase(n.name);
      } else {
        if (old_node == nullptr) {
          breaker_.nodes.insert(n.name);
        }
        if (breaker_.counts(n.taints) && breaker_.nodes.contains(n.name)) {
          breaker_.tainted.insert(n.name);
        } else {
          breaker_.tainted.erase(n.name);
        }
      }
      changed = breaker_.evaluate();
      if (changed) {
        queue_.set_paused(breaker_.open);
      }
    }
    if (changed) {
      breaker_changed();
    }
  }

  void breaker_changed() {
    bool open = false;
    std::size_t tainted = 0;
    std::size_t nodes = 0;
    {
      std::lock_guard lock(breaker_.mu);
      open = breaker_.open;
      tainted = breaker_.tainted.size();
      nodes = breaker_.nodes.size();
    }
    if (open) {
      log_->warn(
          "storm breaker OPEN: {} of {} nodes carry NoExecute taints; every eviction waits "
          "until the share falls or the policy is changed ({} held)",
          tainted, nodes, queue_.stats().held);
    } else {
      log_->warn("storm breaker closed: {} of {} nodes tainted; held evictions resume", tainted,
                 nodes);
    }
    if (on_breaker_) {
      on_breaker_(open, tainted, nodes);
    }
  }

  // --- the timed queue's work (driver thread) ---

  struct pending_done {
    explicit pending_done(timedqueue::completion c) : done(std::move(c)) {}
    timedqueue::completion done;
    std::atomic<bool> called{false};
  };

  void run_eviction(const timedqueue::run_info& info, timedqueue::completion done) {
    if (log_->should_log(spdlog::level::trace)) {
      log_->trace("stage=fired pod=\"{}\" t_us={}", info.key, trace_us());
    }
    std::optional<timedqueue::completion> slot(std::move(done));
    try {
      start_eviction(info, slot);
    } catch (const std::exception& e) {
      // A throwing pod_index or sink: this attempt failed and is retried with backoff. Once
      // the completion was handed to the sink (slot empty), the sink's callback owns it, and
      // info.key may no longer be valid (it lives as long as the completion).
      if (slot) {
        log_->error("eviction attempt failed pod=\"{}\" uid={}: {}", info.key, info.payload,
                    e.what());
        const auto [ns, name] = split_key(info.key);
        attempt_failed(info.key, info.generation, info.attempt,
                       pod_ref{std::string(ns), std::string(name), std::string(info.payload)},
                       e.what(), [&slot] { return slot->cancelled(); });
        slot->complete(timedqueue::outcome::failure(e.what()));
      } else {
        log_->error("eviction sink threw after taking the request: {}", e.what());
      }
    }
  }

  void start_eviction(const timedqueue::run_info& info,
                      std::optional<timedqueue::completion>& slot) {
    if (slot->cancelled()) {
      slot->complete(timedqueue::outcome::failure("cancelled"));
      slot.reset();
      return;
    }
    const auto [ns, name] = split_key(info.key);
    const std::optional<pod_view> pod = pods_.get_pod(ns, name);
    if (!pod || pod->uid != info.payload) {
      // Gone or replaced since the decision: nothing to delete (and the DELETE would fail
      // its UID precondition anyway). No Marking event for a pod we do not delete.
      bump(ctr_->skipped);
      stuck_.done(info.key, info.generation);
      blocked_.done(info.key, info.generation);
      note_cancelled(pod_ref{std::string(ns), std::string(name), std::string(info.payload)},
                     pod ? cancel_reason::replaced : cancel_reason::pod_gone, info.fire_at);
      slot->complete(timedqueue::outcome::success());
      slot.reset();
      return;
    }
    pod_ref ref{std::string(ns), std::string(name), std::string(info.payload)};
    if (pod->terminating && !dry_run_.load(std::memory_order_relaxed)) {
      // It became terminating after the decision (someone else deleted it, or an earlier
      // attempt of ours was accepted although it reported a failure): deleting it again would
      // change nothing. No Marking event, no request (see leave_terminating).
      bump(ctr_->terminating);
      stuck_.done(info.key, info.generation);
      blocked_.done(info.key, info.generation);
      log_->info("pod is already terminating, not deleting it again pod=\"{}\" uid={}", info.key,
                 info.payload);
      note_cancelled(std::move(ref), cancel_reason::pod_gone, info.fire_at);
      slot->complete(timedqueue::outcome::success());
      slot.reset();
      return;
    }
    if (info.admitted_at > info.due_at && on_waited_) {
      on_waited_(
          std::chrono::duration_cast<std::chrono::nanoseconds>(info.admitted_at - info.due_at));
    }
    if (dry_run_.load(std::memory_order_relaxed)) {
      // The whole decision ran; nothing is written (no event, no patch, no DELETE).
      bump(ctr_->dry_run);
      stuck_.done(info.key, info.generation);
      blocked_.done(info.key, info.generation);
      log_->info("dry run: would delete pod pod=\"{}\" uid={}", info.key, info.payload);
      if (on_decision_) {
        decision_note note;
        note.kind = decision_kind::would_delete;
        note.pod = ref;
        note.at = drv_.now();
        note.due = info.fire_at;
        on_decision_(note);
      }
      slot->complete(timedqueue::outcome::success());
      slot.reset();
      return;
    }
    eviction_method method = eviction_method::delete_pod;
    std::chrono::milliseconds fallback{0};
    if (evict_mode_.load(std::memory_order_relaxed)) {
      method = eviction_method::evict;
      fallback = fallback_for(*pod);
      if (const auto b = blocked_.find(info.key, info.generation)) {
        const time_point now = drv_.now();
        if (fallback.count() > 0 && now - b->since >= fallback) {
          method = eviction_method::delete_pod;
          if (blocked_.fall_back_once(info.key, info.generation)) {
            fall_back(ref, now - b->since, fallback);
          }
        }
      }
    }
    const bool stuck = info.attempt > stuck_after_;
    if (info.attempt == 1) {
      bump(ctr_->started);
      log_->info("{} pod pod=\"{}\" uid={}",
                 method == eviction_method::evict ? "evicting" : "deleting", info.key,
                 info.payload);
      record_event(ref, event_kind::marking_for_deletion);
    } else {
      // Once stuck, its warnings come with its events (at most every stuck_event_interval).
      log_->log(stuck ? spdlog::level::debug : spdlog::level::info,
                "retrying deletion pod=\"{}\" uid={} attempt={}", info.key, info.payload,
                info.attempt);
    }
    bump(ctr_->attempts);
    auto holder = std::make_shared<pending_done>(std::move(*slot));
    slot.reset();
    // The check must not own the completion: a sink may keep the request after calling done,
    // and a completion kept alive would make the queue's shutdown wait for it forever. Once
    // the attempt is over (holder gone) nothing more may be sent for it.
    eviction_request request{ref,
                             [weak = std::weak_ptr<pending_done>(holder)] {
                               const auto h = weak.lock();
                               return !h || h->called.load() || h->done.cancelled();
                             },
                             stuck, method};
    // The callback uses `this` only before complete(): until then the queue's shutdown, and
    // so the controller's, waits for this run. A second call returns before touching it.
    sink_.evict(std::move(request),
                [this, holder, ref = std::move(ref), key = std::string(info.key),
                 generation = info.generation, attempt = info.attempt, fire_at = info.fire_at,
                 method, fallback](eviction_result result) {
                  if (holder->called.exchange(true)) {
                    return;  // A sink calling `done` twice: the first call counts.
                  }
                  finish_attempt(*holder, key, generation, attempt, fire_at, ref, std::move(result),
                                 method, fallback);
                });
  }

  // Evict mode: the fallbackAfter that applies to `pod` on its node now (see fallback_after()).
  std::chrono::milliseconds fallback_for(const pod_view& pod) const {
    const std::optional<std::vector<taint>> taints = node_taints(pod.node_name);
    if (!taints || taints->empty()) {
      return std::chrono::milliseconds{0};
    }
    std::lock_guard lock(policy_mu_);
    return fallback_after(*taints, pod.tolerations, policy_.taints, policy_.fallback_after);
  }

  // Evict mode: an eviction refused for `blocked_for` (>= `fallback`) is done by DELETE.
  void fall_back(const pod_ref& pod, timedqueue::duration blocked_for,
                 std::chrono::milliseconds fallback) {
    bump(ctr_->fallbacks);
    const std::string detail = "after its eviction was refused for " + seconds_text(blocked_for) +
                               " (fallbackAfter " + seconds_text(fallback) + ")";
    log_->warn("deleting pod=\"{}/{}\" uid={} {}", pod.namespace_, pod.name, pod.uid, detail);
    record_event(pod, event_kind::eviction_fallback, detail);
  }

  // Evict mode: the Eviction API refused an attempt (a disruption budget). Not a failure to
  // report as stuck: the blocked gauge and a Warning event (one Event, its count raised at each
  // refusal) show it. Retried with the queue's backoff, and at the fallback time at the latest.
  void attempt_blocked(pending_done& holder, std::string_view key, std::uint64_t generation,
                       const pod_ref& pod, std::string message,
                       std::chrono::milliseconds fallback) {
    stuck_.done(key, generation);  // an answer, not a failure in a row
    const time_point now = drv_.now();
    const auto [rec, first] = blocked_.refused(key, generation, now, fallback,
                                               [&holder] { return holder.done.cancelled(); });
    std::string detail = message;
    if (!detail.empty() && detail.back() != '.') {
      detail += '.';
    }
    if (rec.fallback_at) {
      const auto wall = wall_clock_ ? wall_clock_() : std::chrono::system_clock::now();
      const auto at = wall + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                 *rec.fallback_at - now);
      detail += " Retrying; deleting it anyway at " + base::format_rfc3339(at) +
                " (fallbackAfter " + seconds_text(fallback) + ").";
    } else {
      detail += " Retrying until it is allowed (no fallbackAfter).";
    }
    log_->log(first ? spdlog::level::info : spdlog::level::debug,
              "eviction refused pod=\"{}\" uid={}: {}", key, pod.uid, detail);
    record_event(pod, event_kind::eviction_blocked, detail);
    holder.done.complete(rec.fallback_at
                             ? timedqueue::outcome::failure(std::move(message), *rec.fallback_at)
                             : timedqueue::outcome::failure(std::move(message)));
  }

  void finish_attempt(pending_done& holder, std::string_view key, std::uint64_t generation,
                      std::uint32_t attempt, time_point fire_at, const pod_ref& pod,
                      eviction_result result, eviction_method method,
                      std::chrono::milliseconds fallback) {
    switch (result.status) {
      case eviction_status::deleted:
        bump(ctr_->succeeded);
        stuck_.done(key, generation);
        blocked_.done(key, generation);
        // Only a DELETE of ours that was accepted is a deletion for the histogram.
        if (ctr_->on_deleted) {
          ctr_->on_deleted(
              std::max(std::chrono::nanoseconds::zero(),
                       std::chrono::duration_cast<std::chrono::nanoseconds>(drv_.now() - fire_at)));
        }
        holder.done.complete(timedqueue::outcome::success());
        return;
      case eviction_status::gone:
        bump(ctr_->succeeded);
        stuck_.done(key, generation);
        blocked_.done(key, generation);
        holder.done.complete(timedqueue::outcome::success());
        return;
      case eviction_status::blocked:
        if (method != eviction_method::evict) {
          result.status = eviction_status::failed;  // a sink's bug: only an eviction is refused
          finish_attempt(holder, key, generation, attempt, fire_at, pod, std::move(result), method,
                         fallback);
          return;
        }
        if (holder.done.cancelled()) {
          holder.done.complete(timedqueue::outcome::failure(std::move(result.error)));
          return;
        }
        bump(ctr_->blocked);
        attempt_blocked(holder, key, generation, pod, std::move(result.error), fallback);
        return;
      case eviction_status::failed:
        if (holder.done.cancelled()) {
          // Withdrawn (cancelled, or shutting down): not retried, not a failure to report.
          holder.done.complete(timedqueue::outcome::failure(std::move(result.error)));
          return;
        }
        bump(ctr_->failed);
        attempt_failed(key, generation, attempt, pod, result.error,
                       [&holder] { return holder.done.cancelled(); });
        holder.done.complete(timedqueue::outcome::failure(std::move(result.error)));
        return;
    }
  }

  // A failed attempt, before its completion is called: reports the eviction as stuck when
  // it is due (see controller_options::stuck_after).
  void attempt_failed(std::string_view key, std::uint64_t generation, std::uint32_t attempt,
                      const pod_ref& pod, std::string_view error,
                      const std::function<bool()>& cancelled) {
    if (!stuck_.failed(key, generation, attempt, stuck_after_, drv_.now(), stuck_event_interval_,
                       cancelled)) {
      return;
    }
    const std::string detail = event_detail(error);
    log_->warn(
        "eviction is stuck pod=\"{}\" uid={}: {} attempts failed in a row, still retrying: {}", key,
        pod.uid, attempt, detail);
    record_event(pod, event_kind::eviction_failed, detail);
  }

  // --- lifecycle ---

  void start() {
    if (!threaded_ || started_.exchange(true) || stopping_.load()) {
      return;
    }
    for (auto& w : workers_) {
      worker* wp = w.get();
      wp->thread = std::thread([this, wp] { worker_loop(*wp); });
    }
  }

  void shutdown() {
    if (shut_down_.exchange(true)) {
      return;
    }
    for (auto& w : workers_) {
      {
        std::lock_guard lock(w->mu);
        stopping_.store(true);
      }
      w->cv.notify_all();
    }
    for (auto& w : workers_) {
      if (w->thread.joinable()) {
        w->thread.join();
      }
    }
    queue_.shutdown();
  }

  std::size_t run_until_idle() {
    if (threaded_) {
      return 0;
    }
    std::size_t handled = 0;
    bool any = true;
    while (any) {
      any = false;
      for (auto& w : workers_) {
        for (;;) {
          work_item item;
          {
            std::lock_guard lock(w->mu);
            if (stopping_.load() || !w->has_work()) {
              break;
            }
            w->pop(item);
          }
          handle(*w, item);
          finish_item();
          ++handled;
          any = true;
        }
      }
    }
    return handled;
  }

  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(idle_mu_);
    return idle_cv_.wait_for(lock, timeout, [&] { return outstanding_.load() == 0; });
  }

  const pod_index& pods_;
  eviction_sink& sink_;
  timedqueue::driver& drv_;
  const bool threaded_;
  const std::uint32_t stuck_after_;
  const timedqueue::duration stuck_event_interval_;
  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<counters> ctr_;
  stuck_table stuck_;
  blocked_table blocked_;
  std::vector<std::unique_ptr<worker>> workers_;
  std::array<std::mutex, key_lock_count> key_locks_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> shut_down_{false};
  std::atomic<std::size_t> outstanding_{0};
  std::atomic<std::size_t> tainted_count_{0};
  std::atomic<bool> dry_run_{false};
  std::atomic<bool> evict_mode_{false};  // eviction_policy::mode is evict
  // scope_ (below) is set: the policy has exclude or taints rules. Read without the lock.
  std::atomic<bool> scoped_{false};
  bool deadlines_from_taint_time_ = true;
  bool scheduled_events_ = true;
  std::function<void(std::chrono::nanoseconds)> on_waited_;
  std::function<void(bool, std::size_t, std::size_t)> on_breaker_;
  std::function<void(const decision_note&)> on_decision_;
  std::function<std::chrono::system_clock::time_point()> wall_clock_;
  std::function<bool(std::string_view)> namespace_opted_out_;
  mutable std::mutex policy_mu_;
  eviction_policy policy_;
  // The policy when it has exclude or taints rules (what decide_locked reads), else null.
  std::shared_ptr<const eviction_policy> scope_;
  breaker breaker_;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  // Last: its work refers to everything above.
  timedqueue::timed_queue queue_;
};

controller::controller(const pod_index& pods, eviction_sink& sink, timedqueue::driver& drv,
                       controller_options options)
    : impl_(std::make_unique<impl>(pods, sink, drv, std::move(options))) {}

controller::~controller() {
  impl_->shutdown();
}

void controller::start() {
  impl_->start();
}

void controller::shutdown() {
  impl_->shutdown();
}

bool controller::node_updated(const node_view* old_node, const node_view* new_node,
                              update_origin origin) {
  if (old_node == nullptr && new_node == nullptr) {
    return false;
  }
  if (old_node != nullptr && new_node != nullptr &&
      same_no_execute(old_node->taints, new_node->taints)) {
    impl_->ctr_->ignored.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (!impl_->stopping_.load()) {
    impl_->breaker_node(old_node, new_node);
  }
  const node_view& current = new_node != nullptr ? *new_node : *old_node;
  if (current.name.empty()) {
    impl_->log_->warn("ignoring a node update without a name");
    impl_->ctr_->ignored.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  std::optional<std::vector<taint>> taints;
  if (new_node != nullptr) {
    taints = no_execute_taints(new_node->taints);
  }
  return impl_->enqueue_node(current.name, std::move(taints), origin == update_origin::replay);
}

bool controller::pod_updated(const pod_view* old_pod, const pod_view* new_pod) {
  if (old_pod == nullptr && new_pod == nullptr) {
    return false;
  }
  if (old_pod != nullptr && new_pod != nullptr && old_pod->uid == new_pod->uid &&
      old_pod->node_name == new_pod->node_name && old_pod->tolerations == new_pod->tolerations &&
      old_pod->opted_out == new_pod->opted_out &&
      (!impl_->scoped_.load(std::memory_order_relaxed) ||
       (old_pod->labels == new_pod->labels && old_pod->phase == new_pod->phase &&
        old_pod->owner_kind == new_pod->owner_kind)) &&
      // The deletionTimestamp appearing is decided only when an eviction of the pod waits.
      (old_pod->terminating || !new_pod->terminating || !impl_->eviction_waits(*new_pod))) {
    impl_->ctr_->ignored.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const pod_view& current = new_pod != nullptr ? *new_pod : *old_pod;
  std::string_view node = current.node_name;
  if (node.empty() && old_pod != nullptr && new_pod != nullptr && old_pod->uid != new_pod->uid) {
    node = old_pod->node_name;  // Replaced by an unscheduled pod: drop the old one's eviction.
  }
  if (node.empty() || current.name.empty()) {
    impl_->ctr_->ignored.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return impl_->enqueue_pod(node, current.namespace_, current.name);
}

std::size_t controller::run_until_idle_for_test() {
  return impl_->run_until_idle();
}

bool controller::wait_idle(std::chrono::milliseconds timeout) {
  return impl_->wait_idle(timeout);
}

std::optional<std::vector<taint>> controller::tainted_taints(std::string_view node) const {
  return impl_->node_taints(node);
}

std::size_t controller::tainted_node_count_for_test() const {
  return impl_->tainted_count_.load();
}

controller_stats controller::stats() const {
  const counters& c = *impl_->ctr_;
  const auto get = [](const std::atomic<std::uint64_t>& a) {
    return a.load(std::memory_order_relaxed);
  };
  controller_stats s;
  s.node_updates = get(c.node_updates);
  s.pod_updates = get(c.pod_updates);
  s.updates_ignored = get(c.ignored);
  s.updates_coalesced = get(c.coalesced);
  s.pod_decisions = get(c.decisions);
  s.evictions_scheduled = get(c.scheduled);
  s.evictions_started = get(c.started);
  s.eviction_attempts = get(c.attempts);
  s.evictions_succeeded = get(c.succeeded);
  s.evictions_failed = get(c.failed);
  s.evictions_skipped = get(c.skipped);
  s.terminating_skipped = get(c.terminating);
  s.cancellations = get(c.cancellations);
  s.stale_entries_dropped = get(c.stale);
  s.dry_run_deletions = get(c.dry_run);
  s.deadlines_from_taint_time = get(c.from_taint_time);
  for (std::size_t i = 0; i < skip_reason_count; ++i) {
    s.skipped[i] = get(c.skipped_by[i]);
  }
  s.toleration_overrides = get(c.overrides);
  {
    std::lock_guard lock(impl_->breaker_.mu);
    s.breaker_open = impl_->breaker_.open;
    s.breaker_tainted_nodes = impl_->breaker_.tainted.size();
    s.nodes = impl_->breaker_.nodes.size();
  }
  s.tainted_nodes = impl_->tainted_count_.load();
  s.stuck_evictions = impl_->stuck_.size();
  s.blocked_evictions = impl_->blocked_.size();
  s.blocked_attempts = get(c.blocked);
  s.eviction_fallbacks = get(c.fallbacks);
  s.worker_queue_depth.reserve(impl_->workers_.size());
  for (const auto& w : impl_->workers_) {
    std::lock_guard lock(w->mu);
    s.worker_queue_depth.push_back(w->node_order.size() + w->pod_order.size());
  }
  s.queue = impl_->queue_.stats();
  return s;
}

void controller::set_policy(const eviction_policy& policy) {
  impl_->apply_policy(policy);
}

void controller::redecide_all() {
  impl_->redecide_all();
}

eviction_policy controller::policy() const {
  std::lock_guard lock(impl_->policy_mu_);
  return impl_->policy_;
}

const timedqueue::timed_queue& controller::queue_for_test() const {
  return impl_->queue_;
}

eviction_list controller::evictions(std::size_t limit) const {
  const timedqueue::queue_snapshot snap = impl_->queue_.snapshot(limit);
  eviction_list out;
  out.total = snap.total;
  out.evictions.reserve(snap.entries.size());
  // Each node's taints are looked up once: a tainted node has many pods.
  std::unordered_map<std::string, std::vector<taint>> taints_of;
  for (const auto& [key, info] : snap.entries) {
    eviction_view v;
    const auto [ns, name] = split_key(key);
    v.pod = pod_ref{std::string(ns), std::string(name), info.payload};
    v.node = info.groups[0];
    auto it = taints_of.find(v.node);
    if (it == taints_of.end()) {
      it = taints_of.emplace(v.node, tainted_taints(v.node).value_or(std::vector<taint>{})).first;
    }
    v.taints = it->second;
    v.due = info.fire_at;
    std::tie(v.state, v.why) = state_of(info);
    if (info.state != timedqueue::entry_state::pending) {
      if (const auto b = impl_->blocked_.lookup(key); b && b->generation == info.generation) {
        v.state = "blocked";
        v.why = "pdb";
        v.blocked_since = b->since;
        v.fallback_at = b->fallback_at;
      }
    }
    v.attempts = info.attempts;
    v.last_error = info.last_error;
    out.evictions.push_back(std::move(v));
  }
  return out;
}

}  // namespace tec::controller
