#include "tec/base/json_log.hpp"

#include <spdlog/pattern_formatter.h>

#include <ctime>

namespace tec::base {
namespace {

// %* : the message part of the line (append_json_message).
class json_message_flag final : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*tm*/,
              spdlog::memory_buf_t& dest) override {
    append_json_message(std::string_view(msg.payload.data(), msg.payload.size()), dest);
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_message_flag>();
  }
};

}  // namespace

void append_json_message(std::string_view payload, spdlog::memory_buf_t& dest) {
  static constexpr char hex[] = "0123456789abcdef";
  dest.append(std::string_view(R"("msg":")"));
  for (const char c : payload) {
    switch (c) {
      case '"':
        dest.append(std::string_view("\\\""));
        break;
      case '\\':
        dest.append(std::string_view("\\\\"));
        break;
      case '\n':
        dest.append(std::string_view("\\n"));
        break;
      case '\r':
        dest.append(std::string_view("\\r"));
        break;
      case '\t':
        dest.append(std::string_view("\\t"));
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          const auto u = static_cast<unsigned char>(c);
          const char esc[] = {'\\', 'u', '0', '0', hex[u >> 4U], hex[u & 0xFU]};
          dest.append(esc, esc + sizeof esc);
        } else {
          dest.push_back(c);
        }
    }
  }
  dest.push_back('"');
}

std::unique_ptr<spdlog::formatter> make_json_log_formatter() {
  auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  f->add_flag<json_message_flag>('*').set_pattern(
      R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n",%*})");
  return f;
}

}  // namespace tec::base
