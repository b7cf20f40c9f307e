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

std::string render_shadow(const shadow::shadow_document& doc, const std::string& source,
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
    document out{{"source", source}};
    out.update(shadow::summary_json(doc));
    out["disagreements"] = std::move(list);
    return format == output_format::json ? render_json(out) : render_yaml(out);
  }
  const shadow::shadow_counts& c = doc.counts;
  const bool differ = c.only_them > 0 || c.only_us > 0 || c.ambiguous > 0;
  std::string text =
      "Shadow mode, " + source + " (window " + seconds_text(doc.window_seconds) + "): agreed " +
      std::to_string(c.agreed) + ", only_them " + std::to_string(c.only_them) +
      " (the built-in evicted, ours would not), only_us " + std::to_string(c.only_us) +
      " (ours would have evicted, the built-in did not), " + "cancelled_both " +
      std::to_string(c.cancelled_both) + ", ambiguous " + std::to_string(c.ambiguous) +
      " (possibly the built-in's, not proven), deleted_by_others " +
      std::to_string(c.deleted_by_others) + ", open " + std::to_string(c.pending) + ".\n";
  if (c.agreed > 0) {
    const double mean = c.agreed_delay_sum / static_cast<double>(c.agreed);
    text += "Agreed evictions were " + seconds_text(mean) + " apart on average (at most " +
            seconds_text(c.agreed_delay_max) + ").\n";
  }
  if (c.settled_early > 0) {
    text += std::to_string(c.settled_early) +
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

std::string render_shadow_history(const shadow::shadow_document& doc, const std::string& source,
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
                       {"builtinEvictionsDropped", doc.counts.builtin_evictions_dropped},
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
  if (doc.counts.builtin_evictions_dropped > 0) {
    text += "; " + std::to_string(doc.counts.builtin_evictions_dropped) + " older ones dropped";
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
