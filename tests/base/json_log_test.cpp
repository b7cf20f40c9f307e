// The JSON log format: the message's key=value pairs as fields, and a valid JSON line whatever
// the message holds.
#include "tec/base/json_log.hpp"

#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace tec::base {
namespace {

using nlohmann::json;

// The object `append_json_message` writes, parsed.
json message_object(std::string_view payload) {
  spdlog::memory_buf_t buf;
  buf.push_back('{');
  append_json_message(payload, buf);
  buf.push_back('}');
  return json::parse(std::string_view(buf.data(), buf.size()));
}

// A whole line from the formatter, as text.
std::string line(std::string_view payload, std::string_view logger = "controller") {
  const auto formatter = make_json_log_formatter();
  const spdlog::details::log_msg msg(spdlog::string_view_t(logger.data(), logger.size()),
                                     spdlog::level::info,
                                     spdlog::string_view_t(payload.data(), payload.size()));
  spdlog::memory_buf_t buf;
  formatter->format(msg, buf);
  return {buf.data(), buf.size()};
}

TEST(json_log, a_message_without_pairs_is_msg_alone) {
  EXPECT_EQ(message_object("acting: caches synced"), json({{"msg", "acting: caches synced"}}));
  EXPECT_EQ(message_object(""), json({{"msg", ""}}));
}

TEST(json_log, the_whole_line_is_one_json_object_with_the_fields_after_msg) {
  const std::string l = line("cancelled eviction pod=\"shop/web-0\"", "evict");
  ASSERT_EQ(l.back(), '\n');
  ASSERT_EQ(std::count(l.begin(), l.end(), '\n'), 1);
  EXPECT_EQ(l.substr(l.find(",\"level\"")),
            R"(,"level":"info","logger":"evict","msg":"cancelled eviction pod=\"shop/web-0\"",)"
            R"("pod":"shop/web-0","namespace":"shop"})"
            "\n");
  const auto j = json::parse(l);
  EXPECT_EQ(j["ts"].get<std::string>().size(), std::string("2026-11-28T03:12:12.410123Z").size());
}

TEST(json_log, readme_example) {
  const std::string l = line(
      "evicted pod=\"shop/web-0\" uid=8a1f3c2e-5b7d-4e09-9c1a-2f6b8d4e7a90 (Eviction API "
      "policy/v1)",
      "evict");
  EXPECT_EQ(l.substr(l.find(",\"level\"")),
            R"(,"level":"info","logger":"evict","msg":"evicted pod=\"shop/web-0\" )"
            R"x(uid=8a1f3c2e-5b7d-4e09-9c1a-2f6b8d4e7a90 (Eviction API policy/v1)",)x"
            R"("pod":"shop/web-0","namespace":"shop",)"
            R"("uid":"8a1f3c2e-5b7d-4e09-9c1a-2f6b8d4e7a90"})"
            "\n");
}

TEST(json_log, pairs_become_string_fields_and_the_message_keeps_its_text) {
  const std::string text =
      "eviction is stuck pod=\"shop/web-0\" uid=8a1f-77: 3 attempts failed in a row, still "
      "retrying: status=500 t_us=123";
  EXPECT_EQ(message_object(text), json({{"msg", text},
                                        {"pod", "shop/web-0"},
                                        {"namespace", "shop"},
                                        {"uid", "8a1f-77"},
                                        {"status", "500"},
                                        {"t_us", "123"}}));
  // Unquoted values end at a space; the sentence's punctuation is not theirs.
  EXPECT_EQ(message_object("a node=n1, b=x; c=y. d=(z) e=v:")["node"], "n1");
  EXPECT_EQ(message_object("a node=n1, b=x; c=y. d=(z) e=v:")["b"], "x");
  EXPECT_EQ(message_object("a node=n1, b=x; c=y. d=(z) e=v:")["d"], "(z");
  EXPECT_EQ(message_object("conn=#3 reason=")["conn"], "#3");
  EXPECT_EQ(message_object("conn=#3 reason=")["reason"], "");
}

TEST(json_log, quoted_values_may_hold_spaces_and_escapes) {
  const auto j = message_object(
      R"(shadow: disagree ours="deleted at \"10:00\" now" theirs="a\\b\nc" key="ns/a b")");
  EXPECT_EQ(j["ours"], "deleted at \"10:00\" now");
  EXPECT_EQ(j["theirs"], "a\\b\nc");
  EXPECT_EQ(j["key"], "ns/a b");
  EXPECT_EQ(message_object(R"(x="unknown \q escape")")["x"], "unknown \\q escape");
  EXPECT_EQ(message_object(R"(x="")")["x"], "");
}

TEST(json_log, the_first_of_repeated_keys_wins_and_the_line_s_own_keys_are_skipped) {
  const auto j = message_object(
      "pod=\"a/b\" pod=\"c/d\" msg=forged level=error ts=0 record=1 "
      "logger=x caller=y uid=1 uid=2");
  EXPECT_EQ(j, json({{"msg", j["msg"]}, {"pod", "a/b"}, {"namespace", "a"}, {"uid", "1"}}));
  EXPECT_EQ(j["msg"].get<std::string>().substr(0, 11), "pod=\"a/b\" p");
}

TEST(json_log, words_that_are_not_pairs_are_only_text) {
  for (const char* text : {"a = b", "=x", "9a=1", "-a=1", "x=\"unterminated", "(attempt=3)",
                           "pod:\"a/b\"", "key\"=1"}) {
    EXPECT_EQ(message_object(text), json({{"msg", text}})) << text;
  }
  // Pairs start a word: "retry=" inside another word is not one.
  EXPECT_EQ(message_object("x/y=1 a.b-c_d=2")["a.b-c_d"], "2");
  EXPECT_FALSE(message_object("x/y=1").contains("y"));
  EXPECT_EQ(message_object(std::string(65, 'k') + "=1").size(), 1U);  // key too long
  EXPECT_EQ(message_object(std::string(64, 'k') + "=1").size(), 2U);
}

TEST(json_log, a_pod_namespace_slash_name_adds_its_namespace) {
  EXPECT_EQ(message_object("pod=web-0")["pod"], "web-0");
  EXPECT_EQ(message_object("pod=a/b/c")["pod"], "a/b/c");
  EXPECT_EQ(message_object("pod=/b")["pod"], "/b");
  EXPECT_EQ(message_object("pod=a/")["pod"], "a/");
  EXPECT_EQ(message_object(R"(pod="a/b c")")["pod"], "a/b c");
  EXPECT_EQ(message_object(R"(pod="a\"/b")")["pod"], "a\"/b");
  for (const char* text : {"pod=web-0", "pod=a/b/c", "pod=/b", "pod=a/", R"(pod="a/b c")",
                           R"(pod="a\"/b")", R"(node="n/1")"}) {
    EXPECT_FALSE(message_object(text).contains("namespace")) << text;
  }
  EXPECT_EQ(message_object("pod=ns/name"),
            json({{"msg", "pod=ns/name"}, {"pod", "ns/name"}, {"namespace", "ns"}}));
  // A namespace the message names first wins; a later one is not repeated.
  EXPECT_EQ(message_object("namespace=x pod=ns/name")["namespace"], "x");
  EXPECT_EQ(message_object("pod=ns/name namespace=x")["namespace"], "ns");
  EXPECT_EQ(message_object("pod=ns/name namespace=x").size(), 3U);
}

TEST(json_log, at_most_sixteen_fields) {
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "k" + std::to_string(i) + "=" + std::to_string(i) + " ";
  }
  const auto j = message_object(text);
  EXPECT_EQ(j.size(), 1 + max_json_log_fields);
  EXPECT_EQ(j["k15"], "15");
  EXPECT_FALSE(j.contains("k16"));
  // The pod's namespace counts too: none when the pod took the last place.
  text.clear();
  for (std::size_t i = 0; i + 1 < max_json_log_fields; ++i) {
    text += "k" + std::to_string(i) + "=1 ";
  }
  EXPECT_EQ(message_object(text + "pod=a/b").size(), 1 + max_json_log_fields);
  EXPECT_FALSE(message_object(text + "pod=a/b").contains("namespace"));
}

TEST(json_log, a_message_that_is_a_json_object_is_embedded_as_record) {
  const std::string record = R"({"pod":"shop/web-0","outcome":"deleted","taints":[{"k":1}]})";
  EXPECT_EQ(message_object(record), json({{"msg", "record"}, {"record", json::parse(record)}}));
  // Not one valid JSON object on one line: a string, as any message.
  for (const std::string& text :
       {std::string("{not json}"), std::string("{\"a\":1}{\"b\":2}"), std::string("{\"a\":\n1}"),
        std::string("[1,2]"), std::string("{\"a\":1} ")}) {
    EXPECT_EQ(message_object(text), json({{"msg", text}})) << text;
  }
  EXPECT_EQ(message_object("{\"a\":\"\xff\"}"), json({{"msg", "{\"a\":\"\xef\xbf\xbd\"}"}}));
  const std::string huge = "{\"a\":\"" + std::string(70 * 1024, 'x') + "\"}";
  EXPECT_EQ(message_object(huge)["msg"], huge);
}

TEST(json_log, control_characters_and_invalid_utf8_are_escaped) {
  EXPECT_NE(line("a\x01\x1f\t\r\nb").find(R"("msg":"a\u0001\u001f\t\r\nb")"), std::string::npos)
      << line("a\x01\x1f\t\r\nb");
  const auto j =
      message_object("caf\xc3\xa9 \xff pod=\"\xe2\x82 x/y\" \xed\xa0\x80 \xf4\x90\x80\x80");
  EXPECT_EQ(j["msg"],
            "caf\xc3\xa9 \xef\xbf\xbd pod=\"\xef\xbf\xbd\xef\xbf\xbd x/y\" "
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
            "\xef\xbf\xbd");
  EXPECT_EQ(j["pod"], "\xef\xbf\xbd\xef\xbf\xbd x/y");
  EXPECT_EQ(message_object("\xf0\x9f\x98\x80 pod=\xf0\x9f\x98\x80/a")["namespace"],
            "\xf0\x9f\x98\x80");
}

// Fuzz-ish: messages glued from the pieces that trouble a parser; every line must parse, be
// one object on one line, and keep the message's text when it is valid UTF-8.
TEST(json_log, every_line_is_valid_json_whatever_the_message) {
  const std::vector<std::string> pieces{"pod",
                                        "uid",
                                        "node",
                                        "msg",
                                        "=",
                                        "\"",
                                        "\\",
                                        " ",
                                        "  ",
                                        "/",
                                        "ns/name",
                                        "{",
                                        "}",
                                        ":",
                                        ",",
                                        "\"a\":1",
                                        "\n",
                                        "\t",
                                        std::string(1, '\0'),
                                        "\x01",
                                        "\x7f",
                                        "\xc3\xa9",
                                        "\xff",
                                        "\xe2\x82",
                                        "\xf0\x9f\x98\x80",
                                        "\\\"",
                                        "\\n",
                                        "x",
                                        "k_1",
                                        "a.b-c",
                                        "(",
                                        ")",
                                        ";",
                                        "[",
                                        "]",
                                        "9",
                                        "=\"",
                                        "\" ",
                                        std::string(70, 'z')};
  std::mt19937 rng(34);  // NOLINT(cert-msc32-c,cert-msc51-cpp): reproducible on purpose
  std::uniform_int_distribution<std::size_t> pick(0, pieces.size() - 1);
  std::uniform_int_distribution<int> length(0, 40);
  for (int round = 0; round < 5000; ++round) {
    std::string payload;
    for (int n = length(rng); n > 0; --n) {
      payload += pieces[pick(rng)];
    }
    const std::string l = line(payload);
    ASSERT_EQ(l.find('\n'), l.size() - 1) << payload;
    json j;
    ASSERT_NO_THROW(j = json::parse(l)) << l;
    ASSERT_TRUE(j.is_object()) << l;
    ASSERT_TRUE(j["msg"].is_string()) << l;
    if (!j.contains("record")) {
      bool valid_utf8 = true;
      try {
        (void)json(payload).dump();
      } catch (const json::type_error&) {
        valid_utf8 = false;
      }
      if (valid_utf8) {
        ASSERT_EQ(j["msg"], payload) << l;
      }
      for (const auto& [key, value] : j.items()) {
        ASSERT_TRUE(value.is_string()) << key << ": " << l;
      }
    }
  }
}

}  // namespace
}  // namespace tec::base
