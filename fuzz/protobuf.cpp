// Fuzz target: the protobuf decoders (tec/informers/protobuf.hpp) and the watch stream's
// framing (tec/k8sclient/frame_splitter.hpp).
//
// Input: [piece size][bytes...]. The bytes go through every decoder (an envelope, a bare
// message, a watch frame, a Status); each either decodes, with a name (and a pod's uid), or
// fails with malformed_json or unexpected_shape and a message. A LIST body fed in pieces of the
// chosen size yields the same items and the same end as fed at once, and a watch stream cut
// the same way yields the same frames.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support.hpp"
#include "tec/informers/decode.hpp"
#include "tec/informers/protobuf.hpp"
#include "tec/k8sclient/frame_splitter.hpp"

namespace {

using tec::base::errc;
using tec::base::error;

template <class Result>
void check_result(const Result& r, std::string_view what) {
  if (!r) {
    const auto& e = r.error();
    TEC_FUZZ_CHECK(e.code == make_error_code(errc::malformed_json) ||
                       e.code == make_error_code(errc::unexpected_shape),
                   std::string(what) + ": " + e.message);
    TEC_FUZZ_CHECK(!e.message.empty(), what);
  }
}

void check_pod(const tec::base::result<tec::informers::pod_record>& r) {
  check_result(r, "pod");
  if (r) {
    TEC_FUZZ_CHECK(!r.value().pod.name.empty() && !r.value().pod.uid.empty(), "pod without name");
  }
}

void check_node(const tec::base::result<tec::informers::node_record>& r) {
  check_result(r, "node");
  if (r) {
    TEC_FUZZ_CHECK(!r.value().node.name.empty(), "node without name");
  }
}

/// The items and the end of a LIST body fed in pieces of `piece` bytes (0: at once).
struct listed {
  std::vector<tec::informers::pod_record> items;
  std::size_t skipped = 0;
  bool ok = false;
  std::string rv;
  std::string cont;
};

listed list(std::string_view body, std::size_t piece) {
  tec::informers::list_decoder<tec::informers::pod_record> d(
      tec::informers::list_limits{4096, std::size_t{1} << 20U});
  listed out;
  const std::size_t step = piece == 0 ? body.size() : piece;
  for (std::size_t i = 0; i < body.size(); i += step) {
    if (!d.feed(
            body.substr(i, step),
            [&](tec::informers::pod_record&& r) { out.items.push_back(std::move(r)); },
            [&](const error&) { ++out.skipped; })) {
      break;
    }
  }
  auto page = d.finish();
  out.ok = static_cast<bool>(page);
  if (page) {
    out.rv = page.value().resource_version;
    out.cont = page.value().continue_token;
  }
  return out;
}

std::vector<std::string> frames(std::string_view stream, std::size_t piece, int& errors) {
  tec::k8sclient::watch_splitter s(4096);
  std::vector<std::string> out;
  const std::size_t step = piece == 0 ? stream.size() : piece;
  for (std::size_t i = 0; i < stream.size(); i += step) {
    s.feed(
        stream.substr(i, step), [&](std::string_view f) { out.emplace_back(f); },
        [&](const error&) { ++errors; });
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tec::fuzz::input_reader in(tec::fuzz::as_text(data, size));
  const std::size_t piece = in.byte();
  const std::string_view bytes = in.rest();

  check_pod(tec::informers::decode_pod_protobuf(bytes));
  check_pod(tec::informers::decode_pod_message(bytes));
  check_node(tec::informers::decode_node_protobuf(bytes));
  check_node(tec::informers::decode_node_message(bytes));
  check_result(tec::informers::decode_pod_event_protobuf(bytes), "pod event");
  check_result(tec::informers::decode_node_event_protobuf(bytes), "node event");
  check_result(tec::informers::decode_status_protobuf(bytes), "status");

  // A body that starts like protobuf goes the protobuf way; any other the JSON way.
  const auto whole = list(bytes, 0);
  const auto cut = list(bytes, piece);
  TEC_FUZZ_CHECK(whole.ok == cut.ok, "a LIST body ends differently when fed in pieces");
  if (whole.ok) {
    TEC_FUZZ_CHECK(whole.items == cut.items && whole.skipped == cut.skipped && whole.rv == cut.rv &&
                       whole.cont == cut.cont,
                   "a LIST body decodes differently when fed in pieces");
  }

  int whole_errors = 0;
  int cut_errors = 0;
  const auto a = frames(bytes, 0, whole_errors);
  const auto b = frames(bytes, piece, cut_errors);
  if (!bytes.empty() && bytes.front() == '\0') {
    TEC_FUZZ_CHECK(a == b && whole_errors == cut_errors,
                   "a watch stream splits differently when fed in pieces");
  }
  return 0;
}
