// Fuzz target: the watch stream's line splitter and watch_decoder (tec/k8sclient/line_splitter.hpp,
// tests/informers/support/watch_decoder.hpp).
//
// Input: [max-line selector][number of cuts n][n gap bytes][stream...]. The stream is fed in
// chunks cut where the fuzzer says, and what comes out (lines and over-long-line errors, in
// order) must equal a plain model of the contract applied to the whole stream: split at '\n',
// drop one trailing '\r', skip empty lines, report a line longer than the limit once. The
// splitter never buffers more than the limit + 1 bytes. watch_decoder, fed the same chunks,
// must report what decode_pod_event says of each model line.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "informers/support/watch_decoder.hpp"
#include "support.hpp"
#include "tec/informers/decode.hpp"
#include "tec/k8sclient/line_splitter.hpp"

namespace {

using tec::base::errc;
using tec::base::error;

/// One thing the splitter reports, in order: a line, or "too long".
struct item {
  bool too_long = false;
  std::string line;

  friend bool operator==(const item&, const item&) = default;
};

struct model_result {
  std::vector<item> items;
  bool partial = false;  // the stream ends mid-line
};

model_result model(std::string_view stream, std::size_t max) {
  model_result out;
  while (!stream.empty()) {
    const std::size_t newline = stream.find('\n');
    if (newline == std::string_view::npos) {
      // An unfinished line: reported once it cannot fit even with a trailing CR.
      out.partial = true;
      if (stream.size() > max + 1) {
        out.items.push_back({true, {}});
      }
      break;
    }
    std::string_view line = stream.substr(0, newline);
    stream.remove_prefix(newline + 1);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.size() > max) {
      out.items.push_back({true, {}});
    } else if (!line.empty()) {
      out.items.push_back({false, std::string(line)});
    }
  }
  return out;
}

std::string describe(const std::vector<item>& items) {
  std::string out;
  for (const item& i : items) {
    out += i.too_long ? "<too long>" : "[" + i.line + "]";
    out += '\n';
  }
  return out;
}

/// What watch_decoder reports for one line: the event type and name, or the error code.
std::string event_summary(const tec::base::result<tec::informers::pod_event>& e) {
  if (!e) {
    return "error " + std::to_string(e.error().code.value());
  }
  return std::string(tec::informers::to_string(e->type)) + " " + e->object.pod.name + " " +
         e->resource_version();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tec::fuzz::input_reader in(tec::fuzz::as_text(data, size));
  const std::uint8_t selector = in.byte();
  // Mostly tiny limits, so that over-long lines and the +1 for a CR are reached often.
  const std::size_t max = selector < 0xF0 ? 1 + selector % 32U : 64U * (selector - 0xEFU);
  std::vector<std::size_t> gaps;
  for (std::size_t n = in.byte() % 32U; n > 0; --n) {
    gaps.push_back(in.byte());
  }
  const std::string_view stream = in.rest();

  std::vector<std::string_view> chunks;
  std::size_t pos = 0;
  for (const std::size_t gap : gaps) {
    const std::size_t len = std::min(gap, stream.size() - pos);
    chunks.push_back(stream.substr(pos, len));  // empty chunks are fed too
    pos += len;
  }
  chunks.push_back(stream.substr(pos));

  const model_result expected = model(stream, max);

  tec::k8sclient::line_splitter splitter(max);
  std::vector<item> got;
  for (const std::string_view chunk : chunks) {
    splitter.feed(
        chunk,
        [&](std::string_view line) {
          got.push_back({false, std::string(line)});
        },
        [&](const error& e) {
          TEC_FUZZ_CHECK(e.code == make_error_code(errc::line_too_long), e.message);
          got.push_back({true, {}});
        });
    TEC_FUZZ_CHECK(splitter.buffered_bytes() <= max + 1,
                   "buffered " + std::to_string(splitter.buffered_bytes()) + " bytes, limit " +
                       std::to_string(max));
  }
  TEC_FUZZ_CHECK(got == expected.items,
                 "split:\n" + describe(got) + "model:\n" + describe(expected.items));
  TEC_FUZZ_CHECK(splitter.has_partial_line() == expected.partial, "has_partial_line()");

  std::vector<std::string> expected_events;
  for (const item& i : expected.items) {
    expected_events.push_back(i.too_long
                                  ? "error " + std::to_string(static_cast<int>(errc::line_too_long))
                                  : event_summary(tec::informers::decode_pod_event(i.line)));
  }
  tec::informers::watch_decoder<tec::informers::pod_record> decoder(max);
  std::vector<std::string> events;
  for (const std::string_view chunk : chunks) {
    decoder.feed(
        chunk,
        [&](tec::informers::pod_event&& e) { events.push_back(event_summary(std::move(e))); },
        [&](const error& e) { events.push_back("error " + std::to_string(e.code.value())); });
  }
  TEC_FUZZ_CHECK(events == expected_events, "watch_decoder disagrees with decode_pod_event");
  TEC_FUZZ_CHECK(decoder.has_partial_line() == expected.partial, "watch_decoder partial line");
  splitter.reset();
  TEC_FUZZ_CHECK(!splitter.has_partial_line() && splitter.buffered_bytes() == 0, "reset()");
  return 0;
}
