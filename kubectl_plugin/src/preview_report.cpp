#include "tec/kubectl_plugin/preview_report.hpp"

#include <cmath>
#include <sstream>

namespace tec::kubectl_plugin {
namespace {

using controller::pod_preview;

std::string percent(double share) {
  std::ostringstream s;
  s << std::lround(share);
  return s.str() + "%";
}

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string why_with_pdbs(const preview_report& report, std::size_t i) {
  std::string why = report.result.pods[i].why;
  if (i < report.pdbs.size()) {
    for (const auto& b : report.pdbs[i]) {
      why += "; PDB " + b.name + " allows " + std::to_string(b.disruptions_allowed) + " now";
    }
  }
  return why;
}

std::string_view outcome_name(pod_preview::outcome o) {
  switch (o) {
    case pod_preview::outcome::now:
      return "now";
    case pod_preview::outcome::after:
      return "after";
    case pod_preview::outcome::never:
      break;
  }
  return "never";
}

}  // namespace

std::string outcome_text(const pod_preview& p, std::int64_t now_unix) {
  switch (p.what) {
    case pod_preview::outcome::now:
      return "now";
    case pod_preview::outcome::after: {
      const std::string at = utc_time(now_unix + p.seconds);  // 2026-11-28T03:12:00Z
      return "in " + std::to_string(p.seconds) + "s (at " + at.substr(at.find('T') + 1) + ")";
    }
    case pod_preview::outcome::never:
      break;
  }
  return "never";
}

std::string breaker_line(const controller::storm_preview& s) {
  if (!s.breaker_enabled) {
    return "storm breaker: off (the policy sets no stormBreaker)";
  }
  const double share_after =
      s.nodes == 0 ? 0
                   : 100.0 * static_cast<double>(s.tainted_after) / static_cast<double>(s.nodes);
  std::string line = "storm breaker: " + std::to_string(s.tainted_now) + " of " +
                     std::to_string(s.nodes) + " nodes carry NoExecute taints it counts now, " +
                     std::to_string(s.tainted_after) + " would (" + percent(share_after) +
                     "); it opens above " + number(s.threshold_percent) + "%: ";
  if (s.breaker_open_now) {
    line += "it is open already, nothing would be evicted while it is";
  } else if (s.breaker_opens) {
    line += "it would open and pause every eviction";
  } else {
    line += "it would stay closed";
  }
  if (s.settle_seconds > 0) {
    line += "; settling time " + std::to_string(s.settle_seconds) +
            "s: " + std::to_string(s.settling) +
            (s.settling == 1 ? " eviction waits" : " evictions wait") + " for it";
  }
  return line;
}

std::string rate_line(const controller::preview_result& r) {
  // Those evicted now and those that go together once the settling time is over.
  const std::size_t n = r.evicted_now + r.storm.settling;
  const std::string evictions =
      std::to_string(n) + (n == 1 ? " immediate eviction" : " immediate evictions") +
      (r.storm.settling > 0 ? " (" + std::to_string(r.storm.settling) + " after the settling time)"
                            : std::string());
  if (r.storm.evictions_per_second <= 0) {
    return "rate limit: none: " + evictions + (n == 1 ? " starts" : " start") + " at once";
  }
  const std::string head =
      "rate limit: " + number(r.storm.evictions_per_second) + " evictions/s: " + evictions;
  if (r.storm.immediate_seconds <= 0) {
    return head + (n == 1 ? " starts" : " start") + " at once (within its burst)";
  }
  return head + (n == 1 ? " takes" : " take") + " about " +
         std::to_string(std::llround(std::ceil(r.storm.immediate_seconds))) + "s";
}

document preview_document(const preview_report& report) {
  const auto& r = report.result;
  document pods = document::array();
  for (std::size_t i = 0; i < r.pods.size(); ++i) {
    const auto& p = r.pods[i];
    document pdbs = document::array();
    if (i < report.pdbs.size()) {
      for (const auto& b : report.pdbs[i]) {
        pdbs.push_back(document{{"name", b.name}, {"disruptionsAllowed", b.disruptions_allowed}});
      }
    }
    const bool after = p.what == pod_preview::outcome::after;
    pods.push_back(document{
        {"namespace", p.namespace_},
        {"name", p.name},
        {"node", p.node},
        {"outcome", outcome_name(p.what)},
        {"seconds", after ? document(p.seconds) : document(nullptr)},
        {"at", after ? document(utc_time(report.now_unix + p.seconds)) : document(nullptr)},
        {"skip", p.skip ? document(controller::to_string(*p.skip)) : document(nullptr)},
        {"taint", p.by_taint ? document(controller::taint_string(*p.by_taint)) : document(nullptr)},
        {"toleration", p.used ? toleration_json(*p.used) : document(nullptr)},
        {"rule", p.rule ? document(*p.rule) : document(nullptr)},
        {"settling", p.settling},
        {"why", p.why},
        {"pdbs", std::move(pdbs)}});
  }
  const auto& s = r.storm;
  return document{{"taint", controller::taint_string(r.added)},
                  {"targets", r.targets},
                  {"alreadyTainted", r.already_tainted},
                  {"generatedAt", utc_time(report.now_unix)},
                  {"policy", report.policy},
                  {"pods", std::move(pods)},
                  {"evictedNow", r.evicted_now},
                  {"evictedLater", r.evicted_later},
                  {"latestSeconds", r.latest_seconds},
                  {"never", r.never},
                  {"skipped", r.skipped},
                  {"namespacesNow", r.namespaces_now},
                  {"storm", document{{"nodes", s.nodes},
                                     {"taintedNow", s.tainted_now},
                                     {"taintedAfter", s.tainted_after},
                                     {"breakerEnabled", s.breaker_enabled},
                                     {"breakerOpenNow", s.breaker_open_now},
                                     {"breakerOpens", s.breaker_opens},
                                     {"thresholdPercent", s.threshold_percent},
                                     {"settleSeconds", s.settle_seconds},
                                     {"settling", s.settling},
                                     {"evictionsPerSecond", s.evictions_per_second},
                                     {"immediateSeconds", s.immediate_seconds}}},
                  {"summary", controller::summary(r)},
                  {"stormBreaker", breaker_line(s)},
                  {"rateLimit", rate_line(r)}};
}

std::string render_preview(const preview_report& report, output_format format) {
  if (format == output_format::json) {
    return render_json(preview_document(report));
  }
  if (format == output_format::yaml) {
    return render_yaml(preview_document(report));
  }
  const bool wide = format == output_format::wide;
  const auto& r = report.result;
  std::string out;
  if (r.pods.empty()) {
    out += "No pods on the target nodes.\n";
  } else {
    table_row header{"NAMESPACE", "POD", "NODE", "OUTCOME", "WHY"};
    if (wide) {
      header.insert(header.end(), {"TOLERATION", "RULE"});
    }
    std::vector<table_row> rows;
    rows.reserve(r.pods.size());
    for (std::size_t i = 0; i < r.pods.size(); ++i) {
      const auto& p = r.pods[i];
      table_row row{p.namespace_, p.name, p.node, outcome_text(p, report.now_unix),
                    why_with_pdbs(report, i)};
      if (wide) {
        row.push_back(p.used ? toleration_text(*p.used) : std::string{});
        row.push_back(p.rule ? *p.rule : std::string{});
      }
      rows.push_back(std::move(row));
    }
    out += render_table(header, rows);
  }
  out += "\n" + controller::summary(r) + "\n";
  if (!r.already_tainted.empty()) {
    std::string nodes;
    for (const auto& n : r.already_tainted) {
      nodes += (nodes.empty() ? "" : ", ") + n;
    }
    out += "already tainted: " + nodes +
           " (countdowns their NoExecute taints started keep their time)\n";
  }
  out += breaker_line(r.storm) + "\n";
  out += rate_line(r) + "\n";
  out += "policy: " + report.policy + "\n";
  return out;
}

}  // namespace tec::kubectl_plugin
