#include "tec/kubectl_plugin/render.hpp"

#include <yaml-cpp/yaml.h>
#include <algorithm>
#include <chrono>

#include "tec/base/error.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/controller/preview.hpp"

namespace tec::kubectl_plugin {
namespace {

constexpr std::size_t column_gap = 3;
constexpr std::size_t max_cell = 512;

void emit(YAML::Emitter& out, const document& v) {
  if ((v.is_object() || v.is_array()) && v.empty()) {
    out << YAML::Flow << (v.is_object() ? YAML::BeginMap : YAML::BeginSeq)
        << (v.is_object() ? YAML::EndMap : YAML::EndSeq);
  } else if (v.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, item] : v.items()) {
      out << YAML::Key << k << YAML::Value;
      emit(out, item);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& item : v) {
      emit(out, item);
    }
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    out << YAML::DoubleQuoted << v.get<std::string>();
  } else if (v.is_null()) {
    out << YAML::Null;
  } else if (v.is_boolean()) {
    out << v.get<bool>();
  } else {
    out << v.dump();  // numbers as JSON writes them
  }
}

}  // namespace

std::string render_table(const table_row& header, const std::vector<table_row>& rows) {
  std::vector<table_row> cells;
  cells.reserve(rows.size() + 1);
  cells.push_back(header);
  for (const auto& r : rows) {
    table_row clean;
    clean.reserve(r.size());
    for (const auto& c : r) {
      clean.push_back(c.empty() ? std::string("<none>") : base::printable(c, max_cell));
    }
    cells.push_back(std::move(clean));
  }
  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& r : cells) {
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], r[i].size());
    }
  }
  std::string out;
  for (const auto& r : cells) {
    std::string line;
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) {
        line.append(width[i] - r[i].size() + column_gap, ' ');
      }
    }
    out += line + "\n";
  }
  return out;
}

std::string render_json(const document& doc) {
  return doc.dump(2, ' ', false, document::error_handler_t::replace) + "\n";
}

std::string render_yaml(const document& doc) {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);  // "null", as kubectl writes it (yaml-cpp's default: "~")
  emit(out, doc);
  return std::string(out.c_str()) + "\n";
}

std::string join_cell(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : ",") + p;
  }
  return out;
}

std::string utc_time(std::int64_t unix_seconds) {
  return base::format_rfc3339(std::chrono::system_clock::time_point{} +
                              std::chrono::seconds{unix_seconds});
}

std::string toleration_text(const controller::toleration& t) {
  std::string s = t.key.empty() ? std::string("*") : t.key;
  if (t.op == controller::toleration_operator::equal && !t.value.empty()) {
    s += "=" + t.value;
  }
  if (t.effect) {
    s += ":" + std::string(controller::to_string(*t.effect));
  }
  if (t.op != controller::toleration_operator::equal) {
    s += " (" + std::string(controller::to_string(t.op)) + ")";
  }
  s += t.seconds ? " for " + std::to_string(*t.seconds) + "s" : std::string(" forever");
  return s;
}

document toleration_json(const controller::toleration& t) {
  return document{{"key", t.key},
                  {"operator", controller::to_string(t.op)},
                  {"value", t.value},
                  {"effect", t.effect ? document(controller::to_string(*t.effect)) : document("")},
                  {"tolerationSeconds", t.seconds ? document(*t.seconds) : document(nullptr)}};
}

}  // namespace tec::kubectl_plugin
