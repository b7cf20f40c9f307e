// The namespace codec, store and informer behind the namespace opt-out annotation
// (taint-eviction-controller/exclude: "true").

#include "tec/informers/namespaces.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "k8sclient/support/fake_http_server.hpp"
#include "k8sclient/support/settle.hpp"
#include "k8sclient/support/test_client.hpp"
#include "support/manual_clock.hpp"

namespace tec::informers {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using k8sclient::testing::fake_http_server;
using k8sclient::testing::reply;

// A Namespace as the API server sends it; `annotations` is the JSON of metadata.annotations
// (empty: none).
std::string ns_json(const std::string& name, const std::string& rv,
                    const std::string& annotations = "") {
  return R"({"kind":"Namespace","apiVersion":"v1","metadata":{"name":")" + name + R"(","uid":"u-)" +
         name + R"(","resourceVersion":")" + rv + R"(")" +
         (annotations.empty() ? "" : R"(,"annotations":)" + annotations) +
         R"(},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}})";
}

const std::string excluded = R"({"taint-eviction-controller/exclude":"true"})";

TEST(NamespaceCodec, OnlyTheExactValueTrueOptsOut) {
  auto r = decode_namespace(ns_json("a", "7", excluded));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->name, "a");
  EXPECT_EQ(r->resource_version, "7");
  EXPECT_TRUE(r->opted_out);
  for (const std::string other :
       {"", R"({})", R"(null)", R"({"taint-eviction-controller/exclude":"false"})",
        R"({"taint-eviction-controller/exclude":"True"})",
        R"({"taint-eviction-controller/exclude":""})",
        R"({"taint-eviction-controller/exclude":null})",
        R"({"example.com/exclude":"true","owner":"team-a"})"}) {
    r = decode_namespace(ns_json("b", "8", other));
    ASSERT_TRUE(r) << other << ": " << r.error().message;
    EXPECT_FALSE(r->opted_out) << other;
  }
}

// The parser is json_fields::parse (every malformed case is tested with the Events): here, that
// a namespace goes through it.
TEST(NamespaceCodec, MalformedInputIsAnErrorNotACrash) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  for (const std::string& bad : {std::string("{\"metadata\":}"), deep}) {
    const auto r = decode_namespace(bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, make_error_code(errc::malformed_json));
  }
}

TEST(NamespaceCodec, WrongTypesAreShapeErrorsNamingThePath) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([])", "namespace"},
      {R"({"kind":"Namespace"})", "namespace.metadata"},
      {R"({"metadata":[]})", "namespace.metadata"},
      {R"({"metadata":{}})", "namespace.metadata.name"},
      {R"({"metadata":{"name":5}})", "namespace.metadata.name"},
      {R"({"metadata":{"name":"a","resourceVersion":7}})", "namespace.metadata.resourceVersion"},
      {R"({"metadata":{"name":"a","annotations":["x"]}})", "namespace.metadata.annotations"},
      {R"({"metadata":{"name":"a","annotations":{"taint-eviction-controller/exclude":true}}})",
       "namespace.metadata.annotations.taint-eviction-controller/exclude"},
  };
  for (const auto& [body, path] : cases) {
    const auto r = decode_namespace(body);
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().code, make_error_code(errc::unexpected_shape)) << body;
    EXPECT_EQ(r.error().message.rfind(path + ":", 0), 0U) << r.error().message;
  }
}

// The envelope (types, ERROR events) is json_fields::decode_watch_line's, tested with the
// Events; here what is the namespace's own.
TEST(NamespaceCodec, WatchLines) {
  auto ev =
      decode_namespace_event(R"({"type":"ADDED","object":)" + ns_json("a", "9", excluded) + "}");
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ(ev->type, event_type::added);
  EXPECT_EQ(ev->object, (namespace_record{"a", "9", true}));
  ev = decode_namespace_event(R"({"type":"MODIFIED","object":)" + ns_json("a", "10") + "}");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->type, event_type::modified);
  EXPECT_FALSE(ev->object.opted_out);
  ev =
      decode_namespace_event(R"({"type":"DELETED","object":)" + ns_json("a", "11", excluded) + "}");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->type, event_type::deleted);
  EXPECT_EQ(ev->resource_version(), "11");
  ev = decode_namespace_event(
      R"({"type":"BOOKMARK","object":{"kind":"Namespace","metadata":{"resourceVersion":"12"}}})");
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ(ev->type, event_type::bookmark);
  EXPECT_EQ(ev->resource_version(), "12");
  for (const std::string shape :
       {R"({"type":"SOMETHING","object":{}})", R"({"type":"ADDED"})", R"({"type":5,"object":{}})",
        R"({"type":"ADDED","object":{"metadata":{"name":1}}})", R"([])"}) {
    const auto bad = decode_namespace_event(shape);
    ASSERT_FALSE(bad) << shape;
    EXPECT_EQ(bad.error().code, make_error_code(errc::unexpected_shape)) << shape;
  }
  const auto cut = decode_namespace_event("{\"type\":");
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().code, make_error_code(errc::malformed_json));
}

// A page split at every byte: items as they complete, the one of the wrong shape skipped, the
// metadata after the items read by finish().
TEST(NamespaceCodec, AStreamedListPage) {
  const std::string body = R"({"kind":"NamespaceList","apiVersion":"v1","items":[)" +
                           ns_json("a", "4", excluded) + "," + ns_json("b", "5") +
                           R"(,{"metadata":{"name":7}}],"metadata":{"resourceVersion":"6",)" +
                           R"("continue":"next"}})";
  auto decoder = namespace_codec::make_list_decoder(1 << 20, 1 << 20);
  std::vector<namespace_record> items;
  std::vector<std::string> skipped;
  for (const char c : body) {
    ASSERT_TRUE(decoder.feed(
        std::string_view(&c, 1), [&](namespace_record&& r) { items.push_back(std::move(r)); },
        [&](const error& e) { skipped.push_back(e.message); }));
  }
  const auto page = decoder.finish();
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(page->resource_version, "6");
  EXPECT_EQ(page->continue_token, "next");
  EXPECT_EQ(items, (std::vector<namespace_record>{{"a", "4", true}, {"b", "5", false}}));
  ASSERT_EQ(skipped.size(), 1U);
  EXPECT_EQ(skipped[0].rfind("items[2]: namespace.metadata.name:", 0), 0U) << skipped[0];
}

TEST(NamespaceCodec, AMalformedItemFailsThePage) {
  auto decoder = namespace_codec::make_list_decoder(1 << 20, 1 << 20);
  const std::string body = R"({"items":[)" + ns_json("a", "4") + R"(,{"metadata":{"name":"b",}}]})";
  std::size_t items = 0;
  EXPECT_FALSE(decoder.feed(
      body, [&](namespace_record&&) { ++items; }, [](const error&) {}));
  EXPECT_EQ(items, 1U);
  ASSERT_TRUE(decoder.failure());
  EXPECT_EQ(decoder.failure()->code, make_error_code(errc::malformed_json));
  EXPECT_FALSE(decoder.finish());
  // Wrong types in the list's own metadata fail the page too.
  EXPECT_FALSE(decode_namespace_list(R"({"metadata":{"resourceVersion":5},"items":[]})"));
  EXPECT_FALSE(decode_namespace_list(R"({"items":{}})"));
}

TEST(NamespaceCodec, AnItemOverItsBoundFailsThePage) {
  auto decoder = namespace_codec::make_list_decoder(64, 1 << 20);
  EXPECT_FALSE(
      decoder.feed(R"({"items":[)" + ns_json("a-rather-long-namespace-name", "4", excluded) + "]}",
                   [](namespace_record&&) {}, [](const error&) {}));
  ASSERT_TRUE(decoder.failure());
  EXPECT_EQ(decoder.failure()->code, make_error_code(errc::response_too_large));
}

struct recorded_store {
  std::vector<std::vector<opt_out_change>> calls;
  namespace_store store{[this](const std::vector<opt_out_change>& c) { calls.push_back(c); }};
};

TEST(NamespaceStore, UpsertsAndDeletionsCallBackOnlyWhenTheAnswerFlips) {
  recorded_store r;
  EXPECT_FALSE(r.store.upsert({"a", "1", false}));
  EXPECT_TRUE(r.calls.empty()) << "a namespace that does not opt out changes nothing";
  EXPECT_FALSE(r.store.opted_out("a"));
  EXPECT_EQ(r.store.upsert({"a", "2", true}), (namespace_record{"a", "1", false}));
  EXPECT_TRUE(r.store.opted_out("a"));
  EXPECT_EQ(r.store.upsert({"a", "3", true}), (namespace_record{"a", "2", true}));
  EXPECT_FALSE(r.store.upsert({"b", "4", true}));
  EXPECT_EQ(r.store.opted_out_namespaces(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.store.upsert({"a", "5", false}), (namespace_record{"a", "3", true}));
  EXPECT_EQ(r.store.erase({"b", "6", true}), (namespace_record{"b", "4", true}));
  EXPECT_FALSE(r.store.erase({"b", "6", true})) << "already gone: no change";
  EXPECT_EQ(r.store.erase({"a", "7", false}), (namespace_record{"a", "5", false}));
  EXPECT_EQ(r.calls, (std::vector<std::vector<opt_out_change>>{
                         {{"a", true}}, {{"b", true}}, {{"a", false}}, {{"b", false}}}));
  EXPECT_FALSE(r.store.opted_out("b"));
  EXPECT_FALSE(r.store.opted_out("never-seen"));
  EXPECT_EQ(r.store.size(), 0U);
}

TEST(NamespaceStore, ARelistCoalescesItsFlipsIntoOneCall) {
  recorded_store r;
  auto first = r.store.replace_all({{"a", "1", true}, {"b", "2", false}, {"c", "3", true}});
  EXPECT_EQ(first.upserted.size(), 3U);
  EXPECT_TRUE(first.deleted.empty());
  ASSERT_EQ(r.calls.size(), 1U);
  EXPECT_EQ(r.calls[0], (std::vector<opt_out_change>{{"a", true}, {"c", true}}));
  // a stops opting out, b starts, c is gone (deleted while annotated), d is new and plain.
  const auto second = r.store.replace_all({{"a", "4", false}, {"b", "5", true}, {"d", "6", false}});
  ASSERT_EQ(second.deleted.size(), 1U);
  EXPECT_EQ(second.deleted[0], (namespace_record{"c", "3", true}));
  ASSERT_EQ(second.upserted.size(), 3U);
  EXPECT_EQ(second.upserted[0].first, (namespace_record{"a", "1", true}));
  EXPECT_FALSE(second.upserted[2].first);
  ASSERT_EQ(r.calls.size(), 2U);
  EXPECT_EQ(r.calls[1], (std::vector<opt_out_change>{{"a", false}, {"b", true}, {"c", false}}));
  r.store.replace_all({{"a", "4", false}, {"b", "5", true}, {"d", "6", false}});
  EXPECT_EQ(r.calls.size(), 2U) << "nothing flipped: no call";
  EXPECT_EQ(r.store.opted_out_namespaces(), (std::vector<std::string>{"b"}));
}

// The controller's workers ask while the informer writes (for TSan).
TEST(NamespaceStore, ReadersRaceTheWriter) {
  std::atomic<int> calls{0};
  namespace_store store([&](const std::vector<opt_out_change>&) { calls.fetch_add(1); });
  std::atomic<bool> done{false};
  std::vector<std::thread> readers;
  std::atomic<long> seen{0};
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&] {
      while (!done.load()) {
        seen.fetch_add(store.opted_out("a") ? 1 : 0);
        (void)store.opted_out_namespaces();
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    store.upsert({"a", std::to_string(i), i % 2 == 0});
    if (i % 100 == 0) {
      store.replace_all({{"a", "r", false}, {"b", "r", true}});
    }
  }
  done = true;
  for (auto& t : readers) {
    t.join();
  }
  EXPECT_GT(calls.load(), 1000) << "nearly every upsert flips the answer";
  EXPECT_FALSE(store.opted_out("a"));  // the last upsert (1999) does not opt out
}

// k8sclient::reflector over the namespace codec and store, against a scripted API server.
class namespace_informer_test : public ::testing::Test {
protected:
  k8sclient::client_options client_options() {
    k8sclient::client_options o;
    o.qps = 0;
    o.request_timeout = 60s;
    o.clock = clock_;
    o.connector = server_.connector();
    return o;
  }

  asio::io_context io_;
  fake_http_server server_{io_.get_executor()};
  std::shared_ptr<test::manual_clock> clock_ = std::make_shared<test::manual_clock>();
  client api_{io_.get_executor(), k8sclient::testing::plain_config(server_), client_options()};
  std::vector<std::vector<opt_out_change>> calls_;
  namespace_store store_{[this](const std::vector<opt_out_change>& c) { calls_.push_back(c); }};
};

TEST_F(namespace_informer_test, ListsThenFollowsTheAnnotation) {
  server_.push(reply::with(200, R"({"kind":"NamespaceList","metadata":{"resourceVersion":"5"},)"
                                R"("items":[)" +
                                    ns_json("quiet", "3", excluded) + "," + ns_json("busy", "4") +
                                    "]}"));
  server_.push(
      reply::chunked(200)
          .chunk(R"({"type":"MODIFIED","object":)" + ns_json("quiet", "6") + "}\n")
          .chunk(R"({"type":"MODIFIED","object":)" + ns_json("busy", "7", excluded) + "}\n")
          .chunk(R"({"type":"DELETED","object":)" + ns_json("busy", "8", excluded) + "}\n")
          .stall());
  bool synced = false;
  k8sclient::reflector_options ropts;
  ropts.on_synced = [&] {
    synced = true;
    EXPECT_TRUE(store_.opted_out("quiet")) << "the store holds the list when on_synced runs";
  };
  namespace_informer inf(api_, store_, nullptr, ropts);
  bool finished = false;
  asio::co_spawn(io_, inf.run(), [&](const std::exception_ptr&) { finished = true; });
  k8sclient::testing::settle(io_, [&] { return calls_.size() >= 4; });
  EXPECT_TRUE(synced);
  EXPECT_EQ(calls_,
            (std::vector<std::vector<opt_out_change>>{
                {{"quiet", true}}, {{"quiet", false}}, {{"busy", true}}, {{"busy", false}}}));
  EXPECT_EQ(store_.size(), 1U);
  EXPECT_EQ(inf.resource_version(), "8");
  ASSERT_GE(server_.requests().size(), 2U);
  EXPECT_EQ(server_.requests().at(0).target, "/api/v1/namespaces?limit=500&resourceVersion=0");
  EXPECT_EQ(server_.requests().at(1).target.rfind(
                "/api/v1/namespaces?watch=1&allowWatchBookmarks=true&resourceVersion=5&", 0),
            0U)
      << server_.requests().at(1).target;
  inf.stop();
  api_.shutdown();
  EXPECT_TRUE(k8sclient::testing::settle(io_, [&] { return finished; }));
}

// An upgrade that kept an old ClusterRole: the LIST is forbidden. The caller hears of each
// failure with the code and HTTP status (the daemon logs what RBAC rule is missing), the
// informer does not sync, and it lists again after the backoff.
TEST_F(namespace_informer_test, AForbiddenListIsReportedAndRetried) {
  const std::string forbidden =
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"namespaces is )"
      R"(forbidden: User \"system:serviceaccount:tec:tec\" cannot list resource \"namespaces\" )"
      R"(in API group \"\" at the cluster scope","reason":"Forbidden","code":403})";
  server_.push(reply::with(403, forbidden));
  server_.push(reply::with(403, forbidden));
  server_.push(reply::with(200, R"({"metadata":{"resourceVersion":"5"},"items":[]})"));
  server_.push(reply::chunked(200).stall());
  std::vector<error> failures;
  std::vector<std::chrono::milliseconds> waits;
  k8sclient::reflector_options ropts;
  ropts.backoff.initial = 800ms;
  ropts.on_list_failed = [&](const error& e, std::chrono::milliseconds retry_in) {
    failures.push_back(e);
    waits.push_back(retry_in);
    return true;
  };
  namespace_informer inf(api_, store_, nullptr, ropts);
  bool finished = false;
  asio::co_spawn(io_, inf.run(), [&](const std::exception_ptr&) { finished = true; });
  k8sclient::testing::settle(io_, [&] { return !failures.empty(); });
  ASSERT_EQ(failures.size(), 1U);
  EXPECT_FALSE(inf.has_synced());
  EXPECT_EQ(failures[0].code, make_error_code(errc::forbidden));
  EXPECT_EQ(failures[0].http_status, 403);
  EXPECT_NE(failures[0].message.find("cannot list resource \"namespaces\""), std::string::npos)
      << failures[0].message;
  EXPECT_EQ(inf.last_list_error().code, make_error_code(errc::forbidden));
  EXPECT_GT(waits[0], 0ms);
  EXPECT_TRUE(k8sclient::testing::settle_advancing(
      io_, *clock_, [&] { return inf.has_synced(); }, 1min));
  EXPECT_EQ(failures.size(), 2U);
  EXPECT_EQ(inf.stats().errors, 2U);
  inf.stop();
  api_.shutdown();
  EXPECT_TRUE(k8sclient::testing::settle(io_, [&] { return finished; }));
}

}  // namespace
}  // namespace tec::informers
