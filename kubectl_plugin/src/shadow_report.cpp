#include "tec/kubectl_plugin/shadow_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "tec/base/error.hpp"

namespace tec::kubectl_plugin {
namespace {

using json = nlohmann::json;

std::int64_t count(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

double number(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<double>() : 0.0;
}

// "30s", "2.5s", "0.09s": seconds as the report gives them, without trailing zeros.
std::string seconds_text(double s) {
  if (!std::isfinite(s)) {
    return "?";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  std::string out(buf);
  while (out.back() == '0') {
    out.pop_back();
  }
  if (out.back() == '.') {
    out.pop_back();
  }
  return out + "s";
}

}  // namespace

base::result<shadow_doc> decode_shadow(std::string_view body) {
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("counts") ||
      !doc["counts"].is_object() || !doc.contains("disagreements") ||
      !doc["disagreements"].is_array()) {
    return base::make_error(base::errc::unexpected_shape, "/debug/shadow: not the shadow report");
  }
  shadow_doc out;
  out.window_seconds = number(doc, "windowSeconds");
  const json& c = doc["counts"];
  out.agreed = count(c, "agreed");
  out.only_them = count(c, "onlyThem");
  out.only_us = count(c, "onlyUs");
  out.cancelled_both = count(c, "cancelledBoth");
  out.ambiguous = count(c, "ambiguous");
  out.deleted_by_others = count(c, "deletedByOthers");
  out.pending = count(c, "pending");
  out.settled_early = count(doc, "settledEarly");
  if (const auto d = doc.find("agreedDelaySeconds"); d != doc.end() && d->is_object()) {
    out.agreed_delay_max = number(*d, "max");
    out.agreed_delay_mean = number(*d, "mean");
  }
  for (const json& e : doc["disagreements"]) {
    if (e.is_object()) {
      out.disagreements.push_back(shadow::disagreement_from_json(e));
    }
  }
  if (const auto h = doc.find("builtinEvictions"); h != doc.end() && h->is_array()) {
    out.history_served = true;
    for (const json& e : *h) {
      if (e.is_object()) {
        out.builtin_evictions.push_back(shadow::builtin_eviction_from_json(e));
      }
    }
  }
  out.builtin_evictions_dropped = count(doc, "builtinEvictionsDropped");
  return out;
}

std::string render_shadow(const shadow_doc& doc, const std::string& source,
                          const std::string& namespace_, output_format format) {
  std::vector<const shadow::disagreement*> kept;
  for (const auto& e : doc.disagreements) {
    if (namespace_.empty() || e.namespace_ == namespace_) {
      kept.push_back(&e);
    }
  }
  if (format == output_format::json || format == output_format::yaml) {
    document list = document::array();
    for (const auto* e : kept) {
      list.push_back(shadow::to_json(*e));
    }
    const document out{
        {"source", source},
        {"windowSeconds", doc.window_seconds},
        {"counts",
         {{"agreed", doc.agreed},
          {"onlyThem", doc.only_them},
          {"onlyUs", doc.only_us},
          {"cancelledBoth", doc.cancelled_both},
          {"ambiguous", doc.ambiguous},
          {"deletedByOthers", doc.deleted_by_others},
          {"pending", doc.pending}}},
        {"settledEarly", doc.settled_early},
        {"agreedDelaySeconds", {{"max", doc.agreed_delay_max}, {"mean", doc.agreed_delay_mean}}},
        {"disagreements", std::move(list)}};
    return format == output_format::json ? render_json(out) : render_yaml(out);
  }
  const bool differ = doc.only_them > 0 || doc.only_us > 0 || doc.ambiguous > 0;
  std::string text =
      "Shadow mode, " + source + " (window " + seconds_text(doc.window_seconds) + "): agreed " +
      std::to_string(doc.agreed) + ", only_them " + std::to_string(doc.only_them) +
      " (the built-in evicted, ours would not), only_us " + std::to_string(doc.only_us) +
      " (ours would have evicted, the built-in did not), " + "cancelled_both " +
      std::to_string(doc.cancelled_both) + ", ambiguous " + std::to_string(doc.ambiguous) +
      " (possibly the built-in's, not proven), deleted_by_others " +
      std::to_string(doc.deleted_by_others) + ", open " + std::to_string(doc.pending) + ".\n";
  if (doc.agreed > 0) {
    text += "Agreed evictions were " + seconds_text(doc.agreed_delay_mean) +
            " apart on average (at most " + seconds_text(doc.agreed_delay_max) + ").\n";
  }
  if (doc.settled_early > 0) {
    text += std::to_string(doc.settled_early) +
            " pods were settled early (more than 100,000 open): their outcome is a best guess.\n";
  }
  if (!differ) {
    text += "No disagreement: switching over would have changed nothing so far.\n";
    return text;
  }
  if (kept.empty()) {
    text += "No disagreement in namespace " + namespace_ + ".\n";
    return text;
  }
  text += "\n";
  const table_row header{"OUTCOME", "NAMESPACE", "POD", "NODE", "TAINT", "OURS", "THEIRS", "AT"};
  std::vector<table_row> rows;
  rows.reserve(kept.size());
  for (const auto* e : kept) {
    rows.push_back({e->outcome, e->namespace_, e->name, e->node, join_cell(e->taints), e->ours,
                    e->theirs, e->at});
  }
  return text + render_table(header, rows);
}

std::string render_shadow_history(const shadow_doc& doc, const std::string& source,
                                  const std::string& namespace_, output_format format) {
  // Newest deletion first (a pod is recorded when settled: an agreed eviction at once, one
  // of theirs alone a window later); RFC 3339 UTC times with milliseconds sort as text.
  std::vector<const shadow::builtin_eviction*> kept;
  for (auto it = doc.builtin_evictions.rbegin(); it != doc.builtin_evictions.rend(); ++it) {
    if (namespace_.empty() || it->namespace_ == namespace_) {
      kept.push_back(&*it);
    }
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [](const auto* a, const auto* b) { return a->deleted_at > b->deleted_at; });
  if (format == output_format::json || format == output_format::yaml) {
    document list = document::array();
    for (const auto* e : kept) {
      list.push_back(shadow::to_json(*e));
    }
    const document out{{"source", source},
                       {"windowSeconds", doc.window_seconds},
                       {"builtinEvictionsDropped", doc.builtin_evictions_dropped},
                       {"builtinEvictions", std::move(list)}};
    return format == output_format::json ? render_json(out) : render_yaml(out);
  }
  std::string text = "Shadow mode, " + source + " (window " + seconds_text(doc.window_seconds) +
                     "): " + std::to_string(doc.builtin_evictions.size()) +
                     " evictions by the built-in taint manager";
  if (!namespace_.empty()) {
    text += " (" + std::to_string(kept.size()) + " in namespace " + namespace_ + ")";
  }
  text += ", newest first";
  if (doc.builtin_evictions_dropped > 0) {
    text += "; " + std::to_string(doc.builtin_evictions_dropped) + " older ones dropped";
  }
  text += ".\n";
  if (kept.empty()) {
    return text;
  }
  const table_row header{"DELETED", "NAMESPACE", "POD",     "NODE",
                         "TAINT",   "OURS",      "VERDICT", "REASON"};
  std::vector<table_row> rows;
  rows.reserve(kept.size());
  for (const auto* e : kept) {
    rows.push_back({e->deleted_at, e->namespace_, e->name, e->node, join_cell(e->taints),
                    e->ours_at, e->verdict + (e->early ? " (settled early)" : ""), e->reason});
  }
  return text + "\n" + render_table(header, rows);
}

}  // namespace tec::kubectl_plugin
