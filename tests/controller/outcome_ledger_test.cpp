// The eviction history's open records (controller/src/outcome_ledger): one record handed out
// per entry, by whichever of the work and a cancel ends it first; a cancel during an attempt
// leaves it to that attempt; nothing kept without an observer.

#include <gtest/gtest.h>

#include <vector>

#include "outcome_ledger.hpp"
#include "support/manual_driver.hpp"

namespace tec::controller::detail {
namespace {

using namespace std::chrono_literals;

struct ledger_fixture : ::testing::Test {
  timedqueue::manual_driver drv;
  std::vector<eviction_outcome> out;
  outcome_ledger ledger{drv, [this](const eviction_outcome& o) { out.push_back(o); }};
  const timedqueue::time_point due = drv.now() + 10s;

  eviction_outcome staged(std::string uid) {
    eviction_outcome o;
    o.pod = {"ns", "p", std::move(uid)};
    o.scheduled_at = drv.now();
    o.due = due;
    return o;
  }
};

TEST_F(ledger_fixture, TheFirstEndCountsAndTheRecordGoes) {
  ledger.open("ns/p", staged("u1"));
  ledger.ended("ns/p", {"u1", due}, outcome_result::would_delete);
  ledger.cancelled("ns/p", {"u1", due}, outcome_result::cancelled_untainted);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].result, outcome_result::would_delete);
  EXPECT_EQ(ledger.open_count_for_test(), 0U);
}

TEST_F(ledger_fixture, ADiscardedScheduleLeavesTheOlderEntrysRecord) {
  ledger.open("ns/p", staged("u1"));
  ledger.open("ns/p", staged("u1"));  // a schedule that will find the entry there
  ledger.discard("ns/p", {"u1", due});
  EXPECT_EQ(ledger.open_count_for_test(), 1U);
  ledger.ended("ns/p", {"u1", due}, outcome_result::deleted);
  EXPECT_EQ(out.size(), 1U);
  EXPECT_EQ(ledger.open_count_for_test(), 0U);
}

TEST_F(ledger_fixture, ACancelDuringAnAttemptWaitsForIt) {
  ledger.open("ns/p", staged("u1"));
  ledger.attempt_started("ns/p", {"u1", due}, 1, 0ns, "");
  ledger.cancelled("ns/p", {"u1", due}, outcome_result::pod_gone);
  EXPECT_TRUE(out.empty());
  // The key is free at once: the next entry of the name has a record of its own.
  ledger.open("ns/p", staged("u2"));
  ledger.attempt_failed("ns/p", {"u1", due}, "connection reset");
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].pod.uid, "u1");
  EXPECT_EQ(out[0].result, outcome_result::pod_gone);
  EXPECT_EQ(out[0].last_error, "connection reset");
  EXPECT_EQ(ledger.open_count_for_test(), 1U);
}

TEST_F(ledger_fixture, ARescheduleCancelDropsTheRecordSilently) {
  ledger.open("ns/p", staged("u1"));
  ledger.cancelled("ns/p", {"u1", due}, std::nullopt);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(ledger.open_count_for_test(), 0U);
}

TEST_F(ledger_fixture, WaitsAddUpAndTheLastReasonStays) {
  ledger.open("ns/p", staged("u1"));
  ledger.attempt_started("ns/p", {"u1", due}, 1, 2s, "rate_limit");
  ledger.attempt_failed("ns/p", {"u1", due}, "boom");
  ledger.attempt_started("ns/p", {"u1", due}, 2, 1s, "storm_breaker");
  drv.advance(20s);
  ledger.ended("ns/p", {"u1", due}, outcome_result::deleted);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].waited, 3s);
  EXPECT_EQ(out[0].waited_why, "storm_breaker");
  EXPECT_EQ(out[0].attempts, 2U);
  EXPECT_EQ(out[0].done, due + 10s);
}

TEST(OutcomeLedgerOff, KeepsNothing) {
  timedqueue::manual_driver drv;
  outcome_ledger ledger(drv, {});
  EXPECT_FALSE(ledger.on());
  eviction_outcome o;
  ledger.open("ns/p", o);
  EXPECT_EQ(ledger.open_count_for_test(), 0U);
}

}  // namespace
}  // namespace tec::controller::detail
