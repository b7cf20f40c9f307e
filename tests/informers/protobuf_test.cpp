// The protobuf decoders against the JSON ones, on objects a real kube-apiserver 1.20 wrote in
// both encodings (testdata/real_*: the same object fetched once with each Accept header; a
// pod with every kind of toleration, three owner references, the mirror and opt-out
// annotations, PodScheduled and DisruptionTarget conditions and a deletionTimestamp; a node
// with four taints, one with timeAdded), and on broken and cut bodies.

#include "tec/informers/protobuf.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tec/informers/decode.hpp"
#include "tec/k8sclient/frame_splitter.hpp"

namespace tec::informers {
namespace {

namespace fs = std::filesystem;

std::string read_fixture(const std::string& name) {
  const fs::path p = fs::path(TEC_SOURCE_DIR) / "tests" / "informers" / "testdata" / name;
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Restores keep_pod_labels() after a test.
class labels_guard {
public:
  explicit labels_guard(bool keep) : before_(keeping_pod_labels()) { keep_pod_labels(keep); }
  ~labels_guard() { keep_pod_labels(before_); }
  labels_guard(const labels_guard&) = delete;
  labels_guard& operator=(const labels_guard&) = delete;

private:
  bool before_;
};

/// The frames of a protobuf watch body.
std::vector<std::string> frames(const std::string& body) {
  std::vector<std::string> out;
  k8sclient::watch_splitter s;
  s.feed(
      body, [&](std::string_view f) { out.emplace_back(f); },
      [](const base::error& e) { ADD_FAILURE() << e.message; });
  EXPECT_FALSE(s.has_partial_line());
  return out;
}

/// The lines of a JSON watch body.
std::vector<std::string> lines(const std::string& body) {
  std::vector<std::string> out;
  k8sclient::watch_splitter s;
  s.feed(
      body, [&](std::string_view l) { out.emplace_back(l); },
      [](const base::error& e) { ADD_FAILURE() << e.message; });
  return out;
}

TEST(Protobuf, APodDecodesAsItsJson) {
  for (const bool keep : {false, true}) {
    const labels_guard guard(keep);
    const auto via_json = decode_pod(read_fixture("real_pod.json"));
    const auto pb = decode_pod_protobuf(read_fixture("real_pod.pb"));
    ASSERT_TRUE(via_json) << via_json.error().message;
    ASSERT_TRUE(pb) << pb.error().message;
    EXPECT_EQ(pb.value(), via_json.value());
    // The fixture exercises what the mapping reads, so equality is not of two empty records.
    const auto& p = pb.value().pod;
    EXPECT_EQ(p.name, "fx-pod");
    EXPECT_EQ(p.tolerations.size(), 6U);
    EXPECT_EQ(p.owner_kind, "ReplicaSet");
    EXPECT_TRUE(p.terminating);
    EXPECT_TRUE(p.mirror);
    EXPECT_TRUE(p.opted_out);
    EXPECT_EQ(p.phase, controller::pod_phase::running);
    EXPECT_EQ(pb.value().disruption, disruption_state::true_ours);
    EXPECT_EQ(p.labels.empty(), !keep);
    ASSERT_TRUE(p.tolerations[3].seconds.has_value());
    EXPECT_EQ(*p.tolerations[3].seconds, 9223372036854775807LL);
    EXPECT_EQ(*p.tolerations[4].seconds, -5);
    EXPECT_FALSE(p.tolerations[5].effect.has_value());
  }
}

// metadata.generation (a varint; 300 takes two bytes) for the DisruptionTarget condition's
// observedGeneration. The 1.20 API server keeps a generation a client sets on create.
TEST(Protobuf, APodsGenerationDecodesAsItsJson) {
  const auto via_json = decode_pod(read_fixture("real_pod_generation.json"));
  const auto pb = decode_pod_protobuf(read_fixture("real_pod_generation.pb"));
  ASSERT_TRUE(via_json) << via_json.error().message;
  ASSERT_TRUE(pb) << pb.error().message;
  EXPECT_EQ(pb.value(), via_json.value());
  EXPECT_EQ(pb.value().generation, 300);
  const auto without = decode_pod_protobuf(read_fixture("real_pod.pb"));
  ASSERT_TRUE(without);
  EXPECT_EQ(without.value().generation, 0);
}

TEST(Protobuf, ANodeDecodesAsItsJson) {
  const auto via_json = decode_node(read_fixture("real_node.json"));
  const auto pb = decode_node_protobuf(read_fixture("real_node.pb"));
  ASSERT_TRUE(via_json) << via_json.error().message;
  ASSERT_TRUE(pb) << pb.error().message;
  EXPECT_EQ(pb.value(), via_json.value());
  // Three of ours and the not-ready one the API server adds to a new node.
  ASSERT_EQ(pb.value().node.taints.size(), 4U);
  EXPECT_NE(pb.value().node.taints[0].time_added_unix, 0);
}

TEST(Protobuf, AListPageDecodesAsItsJsonFedInAnyPieces) {
  const std::string pb = read_fixture("real_pod_list.pb");
  const std::string via_json = read_fixture("real_pod_list.json");
  auto decode_all = [](const std::string& body, std::size_t piece) {
    list_decoder<pod_record> d;
    std::vector<pod_record> items;
    for (std::size_t i = 0; i < body.size(); i += piece) {
      EXPECT_TRUE(d.feed(
          std::string_view(body).substr(i, piece),
          [&](pod_record&& r) { items.push_back(std::move(r)); },
          [](const error& e) { ADD_FAILURE() << e.message; }));
    }
    auto page = d.finish();
    EXPECT_TRUE(page) << page.error().message;
    page.value().items = std::move(items);
    return std::move(page).value();
  };
  const auto want = decode_all(via_json, via_json.size());
  ASSERT_EQ(want.items.size(), 1U);
  ASSERT_FALSE(want.continue_token.empty());
  for (const std::size_t piece : {std::size_t{1}, std::size_t{3}, std::size_t{64}, pb.size()}) {
    const auto got = decode_all(pb, piece);
    EXPECT_EQ(got.items, want.items) << "pieces of " << piece;
    EXPECT_EQ(got.resource_version, want.resource_version);
    EXPECT_EQ(got.continue_token, want.continue_token);
  }
}

TEST(Protobuf, WatchEventsDecodeAsTheirJson) {
  const auto pb = frames(read_fixture("real_pod_watch.pb"));
  const auto via_json = lines(read_fixture("real_pod_watch.json"));
  ASSERT_EQ(pb.size(), 2U);
  ASSERT_EQ(via_json.size(), 2U);
  for (std::size_t i = 0; i < pb.size(); ++i) {
    ASSERT_TRUE(is_protobuf_event(pb[i]));
    ASSERT_FALSE(is_protobuf_event(via_json[i]));
    const auto a = decode_pod_event_protobuf(pb[i]);
    const auto b = decode_pod_event(via_json[i]);
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(b) << b.error().message;
    EXPECT_EQ(a.value().type, b.value().type);
    EXPECT_EQ(a.value().object, b.value().object);
  }
}

TEST(Protobuf, AStatusDecodesAsItsJson) {
  const auto via_json = decode_status(read_fixture("real_status_404.json"));
  const auto pb = decode_status_protobuf(read_fixture("real_status_404.pb"));
  ASSERT_TRUE(via_json);
  ASSERT_TRUE(pb) << pb.error().message;
  EXPECT_EQ(pb.value(), via_json.value());
  EXPECT_EQ(pb.value().code, 404);
}

TEST(Protobuf, BrokenBytesAreMalformedNeverACrash) {
  const std::string pod = read_fixture("real_pod.pb");
  // Every cut of the envelope either decodes to something with a name and uid or fails.
  for (std::size_t n = 0; n < pod.size(); ++n) {
    const auto r = decode_pod_protobuf(std::string_view(pod).substr(0, n));
    if (!r) {
      EXPECT_TRUE(r.error().code == make_error_code(errc::malformed_json) ||
                  r.error().code == make_error_code(errc::unexpected_shape))
          << r.error().message;
    }
  }
  EXPECT_FALSE(decode_pod_protobuf("{\"kind\":\"Pod\"}"));
  EXPECT_FALSE(decode_pod_message(std::string("\x0f\x01", 2)));  // wire type 7
  EXPECT_FALSE(decode_pod_message(std::string("\x0a\x7f", 2)));  // a length past the end
}

TEST(Protobuf, AListCutShortFailsAtTheEnd) {
  const std::string pb = read_fixture("real_pod_list.pb");
  for (const std::size_t n : {std::size_t{2}, std::size_t{30}, pb.size() - 1}) {
    list_decoder<pod_record> d;
    d.feed(
        std::string_view(pb).substr(0, n), [](pod_record&&) {}, [](const error&) {});
    EXPECT_FALSE(d.finish()) << "cut at " << n;
  }
}

TEST(Protobuf, AListItemOverItsBoundFailsThePage) {
  const std::string pb = read_fixture("real_pod_list.pb");
  list_decoder<pod_record> d(list_limits{100, std::size_t{1} << 20U});
  EXPECT_FALSE(d.feed(
      pb, [](pod_record&&) { ADD_FAILURE(); }, [](const error&) {}));
  ASSERT_TRUE(d.failure().has_value());
  EXPECT_EQ(d.failure()->code, make_error_code(errc::response_too_large));
}

TEST(Protobuf, AWatchFrameOverItsBoundIsAnError) {
  k8sclient::watch_splitter s(16);
  int errors = 0;
  s.feed(
      std::string("\0\0\0\x20", 4) + std::string(32, 'x'), [](std::string_view) { ADD_FAILURE(); },
      [&](const base::error&) { ++errors; });
  EXPECT_EQ(errors, 1);
}

TEST(Protobuf, WatchFramesSplitAnywhere) {
  const std::string body = read_fixture("real_pod_watch.pb");
  const auto whole = frames(body);
  k8sclient::watch_splitter s;
  std::vector<std::string> got;
  for (const char c : body) {
    s.feed(
        std::string_view(&c, 1), [&](std::string_view f) { got.emplace_back(f); },
        [](const base::error& e) { ADD_FAILURE() << e.message; });
  }
  EXPECT_EQ(got, whole);
  EXPECT_FALSE(s.has_partial_line());
}

}  // namespace
}  // namespace tec::informers

// --- the hold-until annotation (issue 32 item 3), on hand-made messages ---

namespace tec::informers {
namespace {

/// A length-delimited protobuf field (lengths below 128).
std::string pb_field(std::uint32_t number, const std::string& bytes) {
  std::string out;
  out.push_back(static_cast<char>((number << 3) | 2));
  out.push_back(static_cast<char>(bytes.size()));
  return out + bytes;
}

/// "k8s\0" + runtime.Unknown{raw = message}.
std::string envelope(const std::string& message) {
  return std::string("k8s\0", 4) + pb_field(2, message);
}

std::string hold_entry(const std::string& value) {
  return pb_field(12, pb_field(1, "taint-eviction-controller/hold-until") + pb_field(2, value));
}

TEST(Protobuf, TheHoldAnnotationOfANodeAndOfAPodIsRead) {
  const std::string other = pb_field(12, pb_field(1, "a") + pb_field(2, "b"));
  const auto node = decode_node_protobuf(
      envelope(pb_field(1, pb_field(1, "n1") + other + hold_entry("2023-11-14T22:14:20Z"))));
  ASSERT_TRUE(node) << node.error().message;
  ASSERT_TRUE(node->node.hold);
  EXPECT_EQ(node->node.hold->until_unix, 1'700'000'060);
  const auto pod = decode_pod_protobuf(
      envelope(pb_field(1, pb_field(1, "p") + pb_field(5, "u") + hold_entry("soon") + other)));
  ASSERT_TRUE(pod) << pod.error().message;
  ASSERT_TRUE(pod->pod.hold);
  EXPECT_TRUE(pod->pod.hold->malformed());
  EXPECT_EQ(pod->pod.hold->value, "soon");
  const auto plain = decode_node_protobuf(envelope(pb_field(1, pb_field(1, "n1") + other)));
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->node.hold);
  // A broken annotation entry is malformed, never a crash.
  const auto broken = decode_node_protobuf(
      envelope(pb_field(1, pb_field(1, "n1") + std::string("\x62\x05") + "ab")));
  EXPECT_FALSE(broken);
}

}  // namespace
}  // namespace tec::informers
