// Shadow mode's Event codec, store and informer (TaintManagerEviction events of the built-in
// taint manager).

#include "tec/shadow/event_watch.hpp"
#include "tec/base/clock.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/settle.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/manual_clock.hpp"

namespace tec::shadow {
namespace {

using base::clock_bridge;

using base::errc;
using base::make_error_code;
using base::wall_clock;
using informers::disruption_state;
using informers::pod_record;
using k8sclient::client;
using k8sclient::event_type;

namespace asio = boost::asio;
using namespace std::chrono_literals;
using k8sclient::testing::fake_http_server;
using k8sclient::testing::reply;

// kube-controller-manager 1.20: involvedObject without uid, source taint-controller.
std::string event_120(const std::string& name, const std::string& rv, int count = 1,
                      const std::string& verb = "Marking for deletion Pod ") {
  return R"({"kind":"Event","apiVersion":"v1","metadata":{"name":")" + name +
         R"(.16a","namespace":"ns","resourceVersion":")" + rv +
         R"("},"involvedObject":{"kind":"Pod","namespace":"ns","name":")" + name +
         R"("},"reason":"TaintManagerEviction","message":")" + verb + "ns/" + name +
         R"(","source":{"component":"taint-controller"},"count":)" + std::to_string(count) +
         R"(,"type":"Normal"})";
}

TEST(EventCodec, The120EventHasNoUid) {
  const auto r = decode_event_object(event_120("p1", "7", 2));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->name, "p1.16a");
  EXPECT_EQ(r->namespace_, "ns");
  EXPECT_EQ(r->resource_version, "7");
  EXPECT_EQ(r->reason, "TaintManagerEviction");
  EXPECT_EQ(r->message, "Marking for deletion Pod ns/p1");
  EXPECT_EQ(r->component, "taint-controller");
  EXPECT_EQ(r->count, 2);
  EXPECT_EQ(r->involved_kind, "Pod");
  EXPECT_EQ(r->involved_name, "p1");
  EXPECT_TRUE(r->involved_uid.empty());
  const auto s = to_shadow_event(*r);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->marking);
  EXPECT_EQ(s->namespace_, "ns");
  EXPECT_EQ(s->name, "p1");
  EXPECT_TRUE(s->uid.empty());
}

TEST(EventCodec, The129EventNamesTheUidAndReportingComponent) {
  const auto r = decode_event_object(
      R"({"metadata":{"name":"e","namespace":"ns"},"involvedObject":{"kind":"Pod","namespace":"ns","name":"p","uid":"u1"},"reason":"TaintManagerEviction","message":"Cancelling deletion of Pod ns/p","reportingComponent":"taint-eviction-controller","source":{},"count":null})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->component, "taint-eviction-controller");
  EXPECT_EQ(r->count, 0);
  const auto s = to_shadow_event(*r);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->marking);
  EXPECT_EQ(s->uid, "u1");
}

TEST(EventCodec, OtherEventsAreNotTheTaintManagers) {
  auto r = decode_event_object(
      R"({"metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"Killing","message":"Marking for deletion Pod ns/p"})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(to_shadow_event(*r));
  r = decode_event_object(
      R"({"metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"TaintManagerEviction","message":"something else"})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(to_shadow_event(*r));
}

// DRA device taints (KEP-5055) are another upstream controller's: its Events
// (DeviceTaintManagerEviction) are no evidence of the taint manager's eviction.
TEST(EventCodec, TheDeviceTaintManagersEventsAreNotTheTaintManagers) {
  const auto r = decode_event_object(
      R"({"metadata":{"name":"e","namespace":"ns"},"involvedObject":{"kind":"Pod","namespace":"ns","name":"p","uid":"u1"},"reason":"DeviceTaintManagerEviction","message":"Marking for deletion Pod ns/p","reportingComponent":"device-taint-eviction-controller"})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(to_shadow_event(*r));
}

TEST(EventCodec, MalformedInputIsAnErrorNotACrash) {
  for (const std::string bad : {"", "{", "[1,2", "{\"metadata\":}", "nul", "\xff\xfe"}) {
    const auto r = decode_event_object(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, make_error_code(errc::malformed_json)) << bad;
  }
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const auto d = decode_event_object(deep);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, make_error_code(errc::malformed_json));
  for (const std::string shape :
       {R"([])", R"({"metadata":{"name":5},"involvedObject":{"name":"p"}})",
        R"({"metadata":{},"involvedObject":{"name":"p"}})", R"({"metadata":{"name":"e"}})",
        R"({"metadata":{"name":"e"},"involvedObject":{"name":"p"},"count":1.5})",
        R"({"metadata":{"name":"e"},"involvedObject":{"name":"p"},"message":["x"]})",
        R"({"metadata":{"name":"e"},"involvedObject":"p"})",
        R"({"metadata":{"name":"e"},"involvedObject":{"name":"p"},"source":[]})"}) {
    const auto r = decode_event_object(shape);
    ASSERT_FALSE(r) << shape;
    EXPECT_EQ(r.error().code, make_error_code(errc::unexpected_shape)) << shape;
  }
}

TEST(EventCodec, AHugeMessageIsClipped) {
  const std::string msg = "Marking for deletion Pod ns/p " + std::string(100'000, 'x');
  const auto r = decode_event_object(
      R"({"metadata":{"name":"e"},"involvedObject":{"name":"p"},"message":")" + msg + R"("})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->message.size(), max_event_message + 3);
}

TEST(EventCodec, WatchLines) {
  auto ev = decode_event_watch_line(R"({"type":"MODIFIED","object":)" + event_120("p", "9") + "}");
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ(ev->type, event_type::modified);
  EXPECT_EQ(ev->resource_version(), "9");
  ev = decode_event_watch_line(
      R"({"type":"BOOKMARK","object":{"kind":"Event","metadata":{"resourceVersion":"12"}}})");
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ(ev->type, event_type::bookmark);
  EXPECT_EQ(ev->resource_version(), "12");
  ev = decode_event_watch_line(
      R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->type, event_type::error);
  EXPECT_EQ(ev->status.code, 410);
  EXPECT_FALSE(decode_event_watch_line(R"({"type":"SOMETHING","object":{}})"));
  EXPECT_FALSE(decode_event_watch_line(R"({"type":"ADDED"})"));
  EXPECT_FALSE(decode_event_watch_line("{\"type\":"));
}

TEST(EventStore, BoundedAndRelists) {
  event_store store(2);
  auto a = decode_event_object(event_120("a", "1")).value();
  auto b = decode_event_object(event_120("b", "2")).value();
  auto c = decode_event_object(event_120("c", "3")).value();
  EXPECT_FALSE(store.upsert(a));
  EXPECT_FALSE(store.upsert(b));
  EXPECT_FALSE(store.upsert(c));
  EXPECT_EQ(store.size(), 2U);
  EXPECT_EQ(store.refused(), 1U);
  auto a2 = a;
  a2.count = 2;
  EXPECT_EQ(store.upsert(a2), a);
  const auto r = store.replace_all({b, c});
  EXPECT_EQ(r.upserted.size(), 2U);
  ASSERT_EQ(r.deleted.size(), 1U);
  EXPECT_EQ(r.deleted[0].name, "a.16a");
  EXPECT_EQ(store.erase(b), b);
  EXPECT_EQ(store.size(), 1U);
}

// A tracker (window 30 s) on a manual clock, and the event handler that feeds it.
struct handler_rig {
  static shadow_options options(std::shared_ptr<test::manual_clock> clock) {
    shadow_options o;
    o.window = 30s;
    o.clock = std::move(clock);
    return o;
  }
  // A graceful deletion of ns/p1 (uid `uid`) seen now.
  void their_delete(const std::string& uid) {
    pod_record before;
    before.pod.namespace_ = "ns";
    before.pod.name = "p1";
    before.pod.uid = uid;
    auto after = before;
    after.pod.terminating = true;
    tracker.pod_changed(&before, &after);
  }
  void advance(std::chrono::seconds d) {
    clock->advance(d);
    tracker.sweep();
  }
  std::shared_ptr<test::manual_clock> clock = std::make_shared<test::manual_clock>(
      std::chrono::steady_clock::time_point{}, wall_clock::time_point{} + 1000h);
  shadow_tracker tracker{options(clock)};
  event_informer::handler handler = shadow_event_handler(tracker);
};

TEST(EventHandler, NewEventsAndRepeatsReachTheTracker) {
  handler_rig rig;
  const auto& handler = rig.handler;
  const auto first = decode_event_object(event_120("p1", "1")).value();
  auto repeat = first;
  repeat.count = 2;
  handler(nullptr, &first);
  handler(&first, &first);   // unchanged (a relist): not a new occurrence
  handler(&first, nullptr);  // expired: nothing
  handler(&first, &repeat);  // counted again
  // Two occurrences, unmatched: kept (a deletion of ns/p1 within the window is theirs).
  rig.their_delete("u1");
  rig.advance(31s);
  EXPECT_EQ(rig.tracker.counts().only_them, 1U);
}

// client-go's recorder PATCHes the count of an identical message about one object: every
// step is an occurrence (a relist may show several steps at once), bounded.
TEST(EventHandler, OccurrencesAreTheCountsRise) {
  const auto first = decode_event_object(event_120("p1", "1")).value();
  auto later = first;
  later.count = first.count + 3;
  EXPECT_EQ(occurrences(nullptr, first), 1U);
  EXPECT_EQ(occurrences(&first, later), 3U);
  EXPECT_EQ(occurrences(&later, first), 1U);  // not a rise (a new Event object of that name)
  auto huge = first;
  huge.count = first.count + 1'000'000;
  EXPECT_EQ(occurrences(&first, huge), max_occurrences);
  auto other = later;
  other.message = "Cancelling deletion of Pod ns/p1";
  EXPECT_EQ(occurrences(&first, other), 1U);
}

// A rise of two proves two deletions of the name (two pods re-created under it), not three.
TEST(EventHandler, ACountRiseIsPassedOn) {
  handler_rig rig;
  const auto first = decode_event_object(event_120("p1", "1")).value();
  auto later = first;
  later.count = first.count + 2;
  rig.handler(&first, &later);
  for (const char* uid : {"u1", "u2", "u3"}) {
    rig.their_delete(uid);
  }
  rig.advance(61s);
  EXPECT_EQ(rig.tracker.counts().only_them, 2U);
}

TEST(EventInformer, ListsAndWatchesWithTheFieldSelector) {
  asio::io_context io;
  fake_http_server server(io.get_executor());
  k8sclient::client_options copts;
  copts.qps = 0;
  copts.request_timeout = 60s;
  copts.clock = std::make_shared<test::manual_clock>();
  copts.connector = server.connector();
  client api(io.get_executor(), k8sclient::testing::plain_config(server), copts);
  server.push(reply::with(
      200, R"({"kind":"EventList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[)" +
               event_120("a", "4") + R"(,{"metadata":{"name":7}}]})"));
  server.push(reply::chunked(200)
                  .chunk(R"({"type":"ADDED","object":)" + event_120("b", "6") + "}\n")
                  .chunk(R"({"type":"MODIFIED","object":)" + event_120("a", "7", 2) + "}\n")
                  .stall());
  event_store store;
  std::vector<std::string> seen;
  k8sclient::reflector_options ropts;
  ropts.query = std::string(taint_manager_events_query);
  event_informer inf(
      api, store,
      [&](const event_record* o, const event_record* n) {
        seen.push_back(std::string(o ? "-" + o->involved_name : "") +
                       (n ? "+" + n->involved_name + std::to_string(n->count) : ""));
      },
      ropts);
  bool finished = false;
  asio::co_spawn(io, inf.run(), [&](const std::exception_ptr&) { finished = true; });
  k8sclient::testing::settle(io, [&] { return seen.size() >= 3; });
  EXPECT_EQ(seen, (std::vector<std::string>{"+a1", "+b1", "-a+a2"}));
  EXPECT_EQ(inf.stats().decode_errors, 1U) << "the item of the wrong shape is skipped";
  ASSERT_GE(server.requests().size(), 2U);
  EXPECT_EQ(server.requests().at(0).target,
            "/api/v1/events?limit=500&fieldSelector=reason%3DTaintManagerEviction&"
            "resourceVersion=0");
  EXPECT_NE(server.requests().at(1).target.find("&fieldSelector=reason%3DTaintManagerEviction"),
            std::string::npos)
      << server.requests().at(1).target;
  inf.stop();
  api.shutdown();
  EXPECT_TRUE(k8sclient::testing::settle(io, [&] { return finished; }));
}

}  // namespace
}  // namespace tec::shadow
