// k8sclient benchmarks: decode throughput of a 10,000-pod LIST body and of a watch stream of
// the same pods (the production decoder, simdjson, whole and streamed through list_decoder as
// the informer does; the same field mapping fed by nlohmann's DOM, the tests' reference decoder;
// nlohmann::json::parse into a DOM, all on the same bytes; and a real Pod's protobuf, listed and
// watched 10,000 times), with the heap allocations made per pod; store operations, and the
// memory a cached pod / node costs (counted by a global operator new). Uses only the informers'
// public headers (decode.hpp, protobuf.hpp, store.hpp) and informers_reference.hpp, so the same
// file builds against an older decoder for a before/after comparison (BENCHMARKS.md).
//
// Run: build-<dir>/bin/k8sclient_bench   (prints the decoder/DOM ratios and bytes per object
// at the end).

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <new>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/informers_reference.hpp"
#include "tec/informers/decode.hpp"
#include "tec/informers/protobuf.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/line_splitter.hpp"
#include "tec/reports/evictions_report.hpp"

// --- counting allocator ------------------------------------------------------------------
// Counts live heap bytes (malloc_usable_size: what the allocator really handed out, without
// its per-chunk header of ~8 bytes) and allocations. Relaxed atomics: cheap, and the
// decoders compared below pay the same cost.

namespace {
std::atomic<std::int64_t> g_live_bytes{0};
std::atomic<std::int64_t> g_allocations{0};
// Monotonic: every allocation ever made, and its bytes (for allocations per decoded pod).
std::atomic<std::int64_t> g_total_allocations{0};
std::atomic<std::int64_t> g_total_bytes{0};

void* counted_alloc(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  g_live_bytes.fetch_add(static_cast<std::int64_t>(malloc_usable_size(p)),
                         std::memory_order_relaxed);
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  g_total_allocations.fetch_add(1, std::memory_order_relaxed);
  g_total_bytes.fetch_add(static_cast<std::int64_t>(malloc_usable_size(p)),
                          std::memory_order_relaxed);
  return p;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) {
    return;
  }
  g_live_bytes.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)),
                         std::memory_order_relaxed);
  g_allocations.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}
}  // namespace

void* operator new(std::size_t size) {
  return counted_alloc(size);
}
void* operator new[](std::size_t size) {
  return counted_alloc(size);
}
void* operator new(std::size_t size, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return counted_alloc(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return counted_alloc(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t /*size*/) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t /*size*/) noexcept {
  counted_free(p);
}
void operator delete(void* p, const std::nothrow_t& /*tag*/) noexcept {
  counted_free(p);
}
void operator delete[](void* p, const std::nothrow_t& /*tag*/) noexcept {
  counted_free(p);
}

namespace {

using ojson = nlohmann::ordered_json;

constexpr int pod_count = 10'000;
constexpr int node_count = 1'000;
constexpr int pods_nodes = 100;  // pods spread over this many nodes

std::string hex(std::mt19937_64& rng, int n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += digits[rng() % 16];
  }
  return s;
}

std::string uuid(std::mt19937_64& rng) {
  return hex(rng, 8) + "-" + hex(rng, 4) + "-4" + hex(rng, 3) + "-8" + hex(rng, 3) + "-" +
         hex(rng, 12);
}

std::string node_name(int i) {
  return "ip-10-0-" + std::to_string(i / 250) + "-" + std::to_string(i % 250) + ".ec2.internal";
}

/// A pod as the API server sends it (managedFields, containers, status and all), with the
/// two DefaultTolerationSeconds tolerations.
ojson make_pod(int i, std::mt19937_64& rng) {
  const std::string ns = "team-" + std::to_string(i % 20);
  const std::string app = "app-" + std::to_string(i % 200);
  const std::string hash = hex(rng, 10);
  const std::string name = app + "-" + hash + "-" + hex(rng, 5);
  const std::string ts = "2024-05-01T12:00:00Z";
  ojson pod;
  pod["kind"] = "Pod";
  pod["apiVersion"] = "v1";
  auto& md = pod["metadata"];
  md["name"] = name;
  md["generateName"] = app + "-" + hash + "-";
  md["namespace"] = ns;
  md["uid"] = uuid(rng);
  md["resourceVersion"] = std::to_string(100000 + i);
  md["creationTimestamp"] = ts;
  md["labels"] = {{"app", app}, {"pod-template-hash", hash}, {"tier", "backend"}};
  md["annotations"] = {{"kubectl.kubernetes.io/restartedAt", ts}, {"prometheus.io/scrape", "true"}};
  md["ownerReferences"] = ojson::array({{{"apiVersion", "apps/v1"},
                                         {"kind", "ReplicaSet"},
                                         {"name", app + "-" + hash},
                                         {"uid", uuid(rng)},
                                         {"controller", true},
                                         {"blockOwnerDeletion", true}}});
  md["managedFields"] = ojson::array(
      {{{"manager", "kube-controller-manager"},
        {"operation", "Update"},
        {"apiVersion", "v1"},
        {"time", ts},
        {"fieldsType", "FieldsV1"},
        {"fieldsV1",
         {{"f:metadata",
           {{"f:generateName", ojson::object()},
            {"f:labels", {{".", ojson::object()}, {"f:app", ojson::object()}}},
            {"f:ownerReferences", {{".", ojson::object()}}}}},
          {"f:spec",
           {{"f:containers", {{"k:{\"name\":\"main\"}", {{"f:image", ojson::object()}}}}},
            {"f:tolerations", ojson::object()}}}}}},
       {{"manager", "kubelet"},
        {"operation", "Update"},
        {"apiVersion", "v1"},
        {"time", ts},
        {"fieldsType", "FieldsV1"},
        {"fieldsV1",
         {{"f:status",
           {{"f:conditions", ojson::object()},
            {"f:phase", ojson::object()},
            {"f:podIP", ojson::object()}}}}},
        {"subresource", "status"}}});
  auto& spec = pod["spec"];
  spec["volumes"] = ojson::array(
      {{{"name", "kube-api-access-" + hex(rng, 5)},
        {"projected",
         {{"sources", ojson::array({{{"serviceAccountToken",
                                      {{"expirationSeconds", 3607}, {"path", "token"}}}},
                                    {{"configMap", {{"name", "kube-root-ca.crt"}}}}})},
          {"defaultMode", 420}}}}});
  spec["containers"] =
      ojson::array({{{"name", "main"},
                     {"image", "registry.example.com/" + app + ":1.2.3"},
                     {"ports", ojson::array({{{"containerPort", 8080}, {"protocol", "TCP"}}})},
                     {"env", ojson::array({{{"name", "MODE"}, {"value", "production"}},
                                           {{"name", "LOG_LEVEL"}, {"value", "info"}}})},
                     {"resources",
                      {{"limits", {{"cpu", "500m"}, {"memory", "256Mi"}}},
                       {"requests", {{"cpu", "100m"}, {"memory", "128Mi"}}}}},
                     {"terminationMessagePath", "/dev/termination-log"},
                     {"imagePullPolicy", "IfNotPresent"}}});
  spec["restartPolicy"] = "Always";
  spec["terminationGracePeriodSeconds"] = 30;
  spec["dnsPolicy"] = "ClusterFirst";
  spec["serviceAccountName"] = "default";
  spec["nodeName"] = node_name(i % pods_nodes);
  spec["schedulerName"] = "default-scheduler";
  spec["tolerations"] = ojson::array({{{"key", "node.kubernetes.io/not-ready"},
                                       {"operator", "Exists"},
                                       {"effect", "NoExecute"},
                                       {"tolerationSeconds", 300}},
                                      {{"key", "node.kubernetes.io/unreachable"},
                                       {"operator", "Exists"},
                                       {"effect", "NoExecute"},
                                       {"tolerationSeconds", 300}}});
  spec["priority"] = 0;
  spec["enableServiceLinks"] = true;
  auto& status = pod["status"];
  status["phase"] = "Running";
  ojson conditions = ojson::array();
  for (const char* type : {"Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    conditions.push_back({{"type", type},
                          {"status", "True"},
                          {"lastProbeTime", nullptr},
                          {"lastTransitionTime", ts}});
  }
  status["conditions"] = conditions;
  status["hostIP"] = "10.0.0." + std::to_string(i % pods_nodes);
  status["podIP"] = "10.244." + std::to_string(i % 250) + "." + std::to_string(i % 200);
  status["startTime"] = ts;
  status["containerStatuses"] =
      ojson::array({{{"name", "main"},
                     {"state", {{"running", {{"startedAt", ts}}}}},
                     {"ready", true},
                     {"restartCount", 0},
                     {"image", "registry.example.com/" + app + ":1.2.3"},
                     {"imageID", "registry.example.com/" + app + "@sha256:" + hex(rng, 64)},
                     {"containerID", "containerd://" + hex(rng, 64)},
                     {"started", true}}});
  status["qosClass"] = "Burstable";
  return pod;
}

ojson make_node(int i, std::mt19937_64& rng) {
  ojson node;
  node["kind"] = "Node";
  node["apiVersion"] = "v1";
  node["metadata"] = {{"name", node_name(i)},
                      {"uid", uuid(rng)},
                      {"resourceVersion", std::to_string(5000 + i)},
                      {"labels", {{"kubernetes.io/hostname", node_name(i)}}}};
  node["spec"] = {
      {"podCIDR", "10.244.0.0/24"},
      {"taints",
       ojson::array({{{"key", "node.kubernetes.io/unreachable"},
                      {"effect", "NoExecute"},
                      {"timeAdded", "2024-05-01T12:34:56Z"}},
                     {{"key", "node.kubernetes.io/unreachable"},
                      {"effect", "NoSchedule"},
                      {"timeAdded", "2024-05-01T12:34:55Z"}},
                     {{"key", "dedicated"}, {"value", "web"}, {"effect", "NoSchedule"}}})}};
  node["status"] = {{"capacity", {{"cpu", "2"}, {"memory", "8Gi"}, {"pods", "110"}}},
                    {"conditions", ojson::array({{{"type", "Ready"}, {"status", "Unknown"}}})}};
  return node;
}

struct corpus {
  std::string pod_list;   // one PodList body with all pods
  std::string pod_watch;  // the same pods as ADDED events, one per line
  std::string node_list;  // one NodeList body
  std::size_t watch_lines = 0;

  corpus() {
    std::mt19937_64 rng(20240501);
    std::string items;
    for (int i = 0; i < pod_count; ++i) {
      const std::string pod = make_pod(i, rng).dump();
      items += (i == 0 ? "" : ",") + pod;
      pod_watch += R"({"type":"ADDED","object":)" + pod + "}\n";
      ++watch_lines;
    }
    pod_list = R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"200000"},)"
               R"("items":[)" +
               items + "]}";
    std::string nodes;
    for (int i = 0; i < node_count; ++i) {
      nodes += (i == 0 ? "" : ",") + make_node(i, rng).dump();
    }
    node_list = R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},)"
                R"("items":[)" +
                nodes + "]}";
  }
};

const corpus& data() {
  static const corpus c;
  return c;
}

void fail(benchmark::State& state, const std::string& why) {
  state.SkipWithError(why.c_str());
}

/// Heap allocations made while the benchmark loop runs, reported per decoded pod.
class allocation_counter {
public:
  allocation_counter()
      : allocations_(g_total_allocations.load(std::memory_order_relaxed)),
        bytes_(g_total_bytes.load(std::memory_order_relaxed)) {}

  void report(benchmark::State& state, std::size_t pods_per_iteration) const {
    const double pods =
        static_cast<double>(state.iterations()) * static_cast<double>(pods_per_iteration);
    state.counters["allocs/pod"] =
        static_cast<double>(g_total_allocations.load(std::memory_order_relaxed) - allocations_) /
        pods;
    state.counters["alloc_bytes/pod"] =
        static_cast<double>(g_total_bytes.load(std::memory_order_relaxed) - bytes_) / pods;
    state.counters["pods/s"] = benchmark::Counter(pods, benchmark::Counter::kIsRate);
  }

private:
  std::int64_t allocations_;
  std::int64_t bytes_;
};

/// Decodes the whole LIST body at once with `decode` (decode_pod_list or its reference).
template <class Decode>
void run_list(benchmark::State& state, Decode&& decode) {
  const auto& body = data().pod_list;
  const allocation_counter counter;
  for (auto _ : state) {
    auto page = decode(body);
    if (!page || page->items.size() != pod_count) {
      fail(state, page ? "wrong item count" : page.error().message);
      return;
    }
    benchmark::DoNotOptimize(page);
  }
  counter.report(state, pod_count);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
}

void BM_list_fast(benchmark::State& state) {
  run_list(state, tec::informers::decode_pod_list);
}

/// The same field mapping fed by nlohmann's DOM (the tests' reference decoder).
void BM_list_nlohmann_engine(benchmark::State& state) {
  run_list(state, tec::informers::reference::decode_pod_list);
}

constexpr std::size_t chunk_bytes = 16 * 1024;

/// The informer's path: the LIST body fed in 16 KiB chunks to a list_decoder, each pod
/// decoded as soon as its bytes are complete (kept in a vector, as the informer's page).
void BM_list_stream(benchmark::State& state) {
  const auto& body = data().pod_list;
  const allocation_counter counter;
  for (auto _ : state) {
    tec::informers::list_decoder<tec::informers::pod_record> decoder;
    std::vector<tec::informers::pod_record> items;
    bool ok = true;
    for (std::size_t pos = 0; pos < body.size() && ok; pos += chunk_bytes) {
      ok = decoder.feed(
          std::string_view(body).substr(pos, chunk_bytes),
          [&](tec::informers::pod_record&& r) { items.push_back(std::move(r)); },
          [&](const tec::base::error& /*e*/) { ok = false; });
    }
    auto page = decoder.finish();
    if (!ok || !page || items.size() != pod_count) {
      fail(state, page ? "wrong item count or skipped items" : page.error().message);
      return;
    }
    benchmark::DoNotOptimize(items);
  }
  counter.report(state, pod_count);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
}

void BM_list_dom(benchmark::State& state) {
  const auto& body = data().pod_list;
  const allocation_counter counter;
  for (auto _ : state) {
    auto doc = nlohmann::json::parse(body);
    benchmark::DoNotOptimize(doc);
  }
  counter.report(state, pod_count);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
}

/// Feeds the watch stream in 16 KiB chunks through a line_splitter into `decode`.
template <class Decode>
void run_watch(benchmark::State& state, Decode&& decode) {
  const auto& stream = data().pod_watch;
  const allocation_counter counter;
  for (auto _ : state) {
    tec::k8sclient::line_splitter splitter;
    std::size_t events = 0;
    bool ok = true;
    for (std::size_t pos = 0; pos < stream.size(); pos += chunk_bytes) {
      splitter.feed(
          std::string_view(stream).substr(pos, chunk_bytes),
          [&](std::string_view line) {
            ok = decode(line) && ok;
            ++events;
          },
          [&](const tec::base::error& /*e*/) { ok = false; });
    }
    if (!ok || events != data().watch_lines) {
      fail(state, "watch decode failed");
      return;
    }
  }
  counter.report(state, data().watch_lines);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(stream.size()));
  state.counters["events/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(data().watch_lines),
      benchmark::Counter::kIsRate);
}

void BM_watch_fast(benchmark::State& state) {
  run_watch(state, [](std::string_view line) {
    auto event = tec::informers::decode_pod_event(line);
    benchmark::DoNotOptimize(event);
    return event.has_value();
  });
}

void BM_watch_nlohmann_engine(benchmark::State& state) {
  run_watch(state, [](std::string_view line) {
    auto event = tec::informers::reference::decode_pod_event(line);
    benchmark::DoNotOptimize(event);
    return event.has_value();
  });
}

void BM_watch_dom(benchmark::State& state) {
  run_watch(state, [](std::string_view line) {
    auto doc = nlohmann::json::parse(line);
    benchmark::DoNotOptimize(doc);
    return doc.is_object();
  });
}

// --- protobuf ------------------------------------------------------------------------------

/// A real Pod as the API server encodes it (tests/informers/testdata/real_pod.pb, "k8s\0" +
/// runtime.Unknown), repeated pod_count times: a PodList body and a watch stream of
/// ADDED frames (4-byte big-endian length + WatchEvent), as the protobuf decoders read them.
struct protobuf_corpus {
  std::string pod_list;
  std::vector<std::string> watch_frames;
};

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80U) {
    out.push_back(static_cast<char>((v & 0x7fU) | 0x80U));
    v >>= 7U;
  }
  out.push_back(static_cast<char>(v));
}

/// Field `number` (wire type 2) holding `bytes`.
void put_bytes(std::string& out, unsigned number, std::string_view bytes) {
  put_varint(out, (std::uint64_t{number} << 3U) | 2U);
  put_varint(out, bytes.size());
  out.append(bytes);
}

/// Unknown.raw (field 2) of an envelope; aborts on anything unexpected (the fixture is known).
std::string_view unknown_raw(std::string_view envelope) {
  std::size_t pos = 4;  // "k8s\0"
  auto varint = [&] {
    std::uint64_t v = 0;
    for (unsigned shift = 0; pos < envelope.size(); shift += 7) {
      const auto b = static_cast<std::uint8_t>(envelope[pos++]);
      v |= static_cast<std::uint64_t>(b & 0x7fU) << shift;
      if ((b & 0x80U) == 0) {
        return v;
      }
    }
    std::abort();
  };
  while (pos < envelope.size()) {
    const std::uint64_t tag = varint();
    const std::uint64_t len = varint();
    if ((tag & 7U) != 2U || len > envelope.size() - pos) {
      std::abort();
    }
    if (tag >> 3U == 2U) {
      return envelope.substr(pos, len);
    }
    pos += len;
  }
  std::abort();
}

const protobuf_corpus& protobuf_data() {
  static const protobuf_corpus corpus = [] {
    std::ifstream in(std::string(TEC_SOURCE_DIR) + "/tests/informers/testdata/real_pod.pb",
                     std::ios::binary);
    const std::string envelope((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    const std::string_view pod = unknown_raw(envelope);
    protobuf_corpus c;
    std::string list;
    put_bytes(list, 1, std::string("\x12\x01\x31", 3));  // ListMeta{resourceVersion: "1"}
    std::string event;
    put_bytes(event, 1, "ADDED");
    std::string raw_extension;
    put_bytes(raw_extension, 1, envelope);
    put_bytes(event, 2, raw_extension);
    for (int i = 0; i < pod_count; ++i) {
      put_bytes(list, 2, pod);
      c.watch_frames.push_back(event);
    }
    c.pod_list = std::string("k8s\0", 4);
    put_bytes(c.pod_list, 2, list);
    return c;
  }();
  return corpus;
}

/// The informer's path for a protobuf LIST: the body fed in 16 KiB chunks to a list_decoder.
void BM_protobuf_list(benchmark::State& state) {
  const auto& body = protobuf_data().pod_list;
  const allocation_counter counter;
  for (auto _ : state) {
    tec::informers::list_decoder<tec::informers::pod_record> decoder;
    std::vector<tec::informers::pod_record> items;
    bool ok = true;
    for (std::size_t pos = 0; pos < body.size() && ok; pos += chunk_bytes) {
      ok = decoder.feed(
          std::string_view(body).substr(pos, chunk_bytes),
          [&](tec::informers::pod_record&& r) { items.push_back(std::move(r)); },
          [&](const tec::base::error& /*e*/) { ok = false; });
    }
    auto page = decoder.finish();
    if (!ok || !page || items.size() != pod_count) {
      fail(state, page ? "wrong item count or skipped items" : page.error().message);
      return;
    }
    benchmark::DoNotOptimize(items);
  }
  counter.report(state, pod_count);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
}

/// Watch frames (already split) decoded one by one.
void BM_protobuf_watch(benchmark::State& state) {
  const auto& frames = protobuf_data().watch_frames;
  const allocation_counter counter;
  for (auto _ : state) {
    for (const auto& frame : frames) {
      auto event = tec::informers::decode_pod_event_protobuf(frame);
      if (!event) {
        fail(state, event.error().message);
        return;
      }
      benchmark::DoNotOptimize(event);
    }
  }
  counter.report(state, pod_count);
}

std::vector<tec::informers::pod_record> decoded_pods() {
  auto page = tec::informers::decode_pod_list(data().pod_list);
  if (!page) {
    std::fprintf(stderr, "decode failed: %s\n", page.error().message.c_str());
    std::abort();
  }
  return std::move(page->items);
}

void BM_store_replace_all(benchmark::State& state) {
  const auto pods = decoded_pods();
  tec::informers::pod_store store;
  for (auto _ : state) {
    auto result = store.replace_all(pods);
    benchmark::DoNotOptimize(result);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * pod_count);
}

void BM_store_upsert(benchmark::State& state) {
  const auto pods = decoded_pods();
  tec::informers::pod_store store;
  std::size_t i = 0;
  for (auto _ : state) {
    auto old = store.upsert(pods[i]);
    benchmark::DoNotOptimize(old);
    i = (i + 1) % pods.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_store_pods_on_node(benchmark::State& state) {
  const auto pods = decoded_pods();
  tec::informers::pod_store store;
  store.replace_all(pods);
  const std::string node = node_name(7);
  for (auto _ : state) {
    auto on_node = store.pods_on_node(node);
    benchmark::DoNotOptimize(on_node);
  }
  state.counters["pods"] = static_cast<double>(store.pods_on_node(node).size());
}

// --- memory ------------------------------------------------------------------------------

struct memory_figures {
  double store_bytes_per_pod = 0;
  double store_allocs_per_pod = 0;
  double record_bytes_per_pod = 0;
  double store_bytes_per_node = 0;
  double record_bytes_per_node = 0;
};

memory_figures measure_memory() {
  memory_figures m;
  const auto pods = decoded_pods();
  {
    const auto bytes0 = g_live_bytes.load();
    const auto allocs0 = g_allocations.load();
    tec::informers::pod_store store;
    for (const auto& p : pods) {
      store.upsert(p);
    }
    m.store_bytes_per_pod = static_cast<double>(g_live_bytes.load() - bytes0) / pod_count;
    m.store_allocs_per_pod = static_cast<double>(g_allocations.load() - allocs0) / pod_count;
  }
  {
    const auto bytes0 = g_live_bytes.load();
    std::vector<tec::informers::pod_record> copy(pods.begin(), pods.end());
    m.record_bytes_per_pod = static_cast<double>(g_live_bytes.load() - bytes0) / pod_count;
  }
  auto nodes = tec::informers::decode_node_list(data().node_list);
  if (!nodes) {
    std::fprintf(stderr, "decode failed: %s\n", nodes.error().message.c_str());
    std::abort();
  }
  {
    const auto bytes0 = g_live_bytes.load();
    tec::informers::node_store store;
    for (const auto& n : nodes->items) {
      store.upsert(n);
    }
    m.store_bytes_per_node = static_cast<double>(g_live_bytes.load() - bytes0) / node_count;
  }
  {
    const auto bytes0 = g_live_bytes.load();
    std::vector<tec::informers::node_record> copy(nodes->items.begin(), nodes->items.end());
    m.record_bytes_per_node = static_cast<double>(g_live_bytes.load() - bytes0) / node_count;
  }
  return m;
}

/// Remembers bytes/s per benchmark to print decoder/DOM ratios at the end.
class ratio_reporter : public benchmark::ConsoleReporter {
public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      auto it = run.counters.find("bytes_per_second");
      if (it != run.counters.end() && run.run_type == Run::RT_Iteration) {
        rates_[run.run_name.function_name] = it->second.value;
      }
    }
  }

  void print_ratios() const {
    auto ratio = [&](const char* decoder, const char* dom) {
      auto s = rates_.find(decoder);
      auto d = rates_.find(dom);
      if (s == rates_.end() || d == rates_.end() || d->second <= 0) {
        return;
      }
      std::printf("%-24s %8.1f MB/s   %-13s %8.1f MB/s   ratio %.2fx\n", decoder, s->second / 1e6,
                  dom, d->second / 1e6, s->second / d->second);
    };
    ratio("BM_list_fast", "BM_list_dom");
    ratio("BM_list_stream", "BM_list_dom");
    ratio("BM_list_nlohmann_engine", "BM_list_dom");
    ratio("BM_watch_fast", "BM_watch_dom");
    ratio("BM_watch_nlohmann_engine", "BM_watch_dom");
  }

private:
  std::map<std::string, double> rates_;
};

}  // namespace

/// The /debug/evictions document for a full list (max_listed_evictions entries).
void BM_evictions_json(benchmark::State& state) {
  tec::controller::eviction_list list;
  list.total = 100'000;
  for (std::size_t i = 0; i < tec::reports::max_listed_evictions; ++i) {
    tec::controller::eviction_view v;
    v.pod = {"namespace-" + std::to_string(i % 50), "pod-" + std::to_string(i),
             "6f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a" + std::to_string(10 + i % 90)};
    v.node = "node-" + std::to_string(i % 1000);
    v.taints = {
        {"node.kubernetes.io/unreachable", "", tec::controller::taint_effect::no_execute, 0}};
    v.due = std::chrono::steady_clock::now() + std::chrono::seconds(i);
    v.state = "pending";
    v.why = "";
    list.evictions.push_back(std::move(v));
  }
  const tec::base::clock_bridge clock(*tec::base::real_clock());
  for (auto _ : state) {
    auto text = tec::reports::evictions_json(list, true, clock, tec::base::wall_clock::now());
    benchmark::DoNotOptimize(text);
    state.counters["bytes"] = static_cast<double>(text.size());
  }
}
BENCHMARK(BM_evictions_json)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_list_fast)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_list_stream)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_list_nlohmann_engine)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_list_dom)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_watch_fast)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_watch_nlohmann_engine)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_watch_dom)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_protobuf_list)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_protobuf_watch)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_store_replace_all)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_store_upsert);
BENCHMARK(BM_store_pods_on_node);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  std::printf("corpus: %d pods, LIST body %.1f MB, watch stream %.1f MB; %d nodes\n", pod_count,
              static_cast<double>(data().pod_list.size()) / 1e6,
              static_cast<double>(data().pod_watch.size()) / 1e6, node_count);
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\n");
  reporter.print_ratios();
  const memory_figures m = measure_memory();
  std::printf("\nmemory (malloc_usable_size of live allocations):\n");
  std::printf("  pod_store:  %.0f bytes per cached pod (2 tolerations), %.1f allocations\n",
              m.store_bytes_per_pod, m.store_allocs_per_pod);
  std::printf("  pod_record: %.0f bytes per decoded record (uninterned, for comparison)\n",
              m.record_bytes_per_pod);
  std::printf("  node_store: %.0f bytes per cached node (3 taints)\n", m.store_bytes_per_node);
  std::printf("  node_record: %.0f bytes per decoded record\n", m.record_bytes_per_node);
  benchmark::Shutdown();
  return 0;
}
