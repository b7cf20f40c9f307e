#pragma once

// Posting the starts of due entries to the driver (private to timedqueue/src).

#include "entry.hpp"
#include "run_gate.hpp"

#include <memory>
#include <mutex>
#include <vector>

namespace tec::timedqueue::detail {

/// What the starter starts entries on (the queue). Called without the queue's mutex.
class start_target {
public:
  /// Starts the run of `e`, an entry marked running (or frees it, detached since).
  virtual void start_one(entry* e) = 0;
  /// A start task of `e` was dropped by the driver before it ran (the driver is being torn
  /// down).
  virtual void drop_unstarted(entry* e) = 0;

protected:
  ~start_target() = default;
};

/// Hands entries marked running to the driver, in batches: a batch starts one entry per driver
/// task and posts the rest behind what that start posted, so that the work's own continuation
/// (for the controller, the eviction's request, started on the same executor) runs before the
/// next start: the first of many entries due at once is under way after one start, not after
/// all of them (issue 30: 500 pods due at the same instant sent their first DELETE only once
/// the 500 starts had run). After the gate closes the rest of a batch is not posted: the
/// batch's destructor drops it (start_target::drop_unstarted).
///
/// Thread-safety: its state is guarded by the queue's mutex `mu`, which it locks itself; it
/// never calls the driver or the target with it held.
class starter {
public:
  starter(driver& drv, std::mutex& mu, run_gate& gate) : drv_(drv), mu_(mu), gate_(gate) {}

  /// Posts the starts of `due` (not empty). Called without the mutex, after the caller called
  /// gate.post_begins() under it: a shutdown waits for post() to return, so once it has
  /// returned nothing touches the driver any more. While a batch is still starting its
  /// entries, `due` joins its end instead: entries start in the order they became due (ties in
  /// scheduling order), one batch at a time. `target` is kept alive until the batch is done.
  void post(std::shared_ptr<start_target> target, std::vector<entry*> due);

private:
  struct batch;

  void post_batch(std::shared_ptr<batch> b);
  void run(std::shared_ptr<batch> b);

  driver& drv_;
  std::mutex& mu_;
  run_gate& gate_;
  /// The batch whose entries are being started. Guarded by mu_.
  std::weak_ptr<batch> starting_;
};

}  // namespace tec::timedqueue::detail
