#include "tec/kubectl_plugin/render.hpp"

#include <gtest/gtest.h>

namespace tec::kubectl_plugin {
namespace {

TEST(render_table, pads_columns_three_apart_and_marks_empty_cells) {
  const auto out = render_table({"NAME", "WHY"}, {{"a", "long reason"}, {"bbbbbb", ""}});
  EXPECT_EQ(out,
            "NAME     WHY\n"
            "a        long reason\n"
            "bbbbbb   <none>\n");
}

TEST(render_table, escapes_control_characters) {
  const auto out = render_table({"X"}, {{"a\nb"}});
  EXPECT_EQ(out, "X\na\\nb\n");
}

TEST(render_json_and_yaml, keep_field_order) {
  const document doc{{"z", 1}, {"a", "x: y"}, {"list", {"p", "q"}}, {"none", nullptr}};
  const document empty{{"list", document::array()}, {"map", document::object()}};
  EXPECT_EQ(render_yaml(empty), "list: []\nmap: {}\n");
  EXPECT_EQ(render_json(doc),
            "{\n  \"z\": 1,\n  \"a\": \"x: y\",\n  \"list\": [\n    \"p\",\n    \"q\"\n  ],\n"
            "  \"none\": null\n}\n");
  EXPECT_EQ(render_yaml(doc), "z: 1\na: \"x: y\"\nlist:\n  - \"p\"\n  - \"q\"\nnone: null\n");
}

TEST(utc_time, formats_seconds) {
  EXPECT_EQ(utc_time(0), "1970-01-01T00:00:00Z");
}

TEST(toleration_text, forms) {
  controller::toleration t;
  t.key = "dedicated";
  t.value = "x";
  t.effect = controller::taint_effect::no_execute;
  t.seconds = 300;
  EXPECT_EQ(toleration_text(t), "dedicated=x:NoExecute for 300s");
  t.op = controller::toleration_operator::exists;
  t.value.clear();
  t.seconds.reset();
  EXPECT_EQ(toleration_text(t), "dedicated:NoExecute (Exists) forever");
  controller::toleration all;
  all.op = controller::toleration_operator::exists;
  EXPECT_EQ(toleration_text(all), "* (Exists) forever");
  const auto j = toleration_json(t);
  EXPECT_EQ(
      j.dump(),
      R"({"key":"dedicated","operator":"Exists","value":"","effect":"NoExecute","tolerationSeconds":null})");
}

}  // namespace
}  // namespace tec::kubectl_plugin
