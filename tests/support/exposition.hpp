#pragma once

// Reads a Prometheus text exposition back into family name -> shape, enough of the format for
// the daemon's metrics: the golden tests of what /metrics shows.

#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <string>

namespace tec::test {

// What a scrape shows of one family.
struct family_shape {
  std::string type;
  std::string help;
  std::string labels;   // label names of the samples, sorted, comma-separated ("le" left out)
  std::string buckets;  // histograms: the le values of the first child, in order
  bool operator==(const family_shape&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const family_shape& f) {
  return os << "{" << f.type << ", \"" << f.help << "\", {" << f.labels << "}, [" << f.buckets
            << "]}";
}

// Reads the text exposition back into family name -> shape (enough of the format for ours).
inline std::map<std::string, family_shape> parse_exposition(const std::string& text) {
  std::map<std::string, family_shape> out;
  std::map<std::string, std::set<std::string>> label_names;
  std::map<std::string, std::string> first_child;  // histogram -> labels of its first bucket
  std::istringstream in(text);
  std::string line;
  std::string current;
  while (std::getline(in, line)) {
    if (line.starts_with("# HELP ")) {
      const auto rest = line.substr(7);
      current = rest.substr(0, rest.find(' '));
      out[current].help = rest.substr(current.size() + 1);
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      const auto rest = line.substr(7);
      current = rest.substr(0, rest.find(' '));
      out[current].type = rest.substr(current.size() + 1);
      continue;
    }
    EXPECT_TRUE(!current.empty() && line.starts_with(current)) << line;
    const auto brace = line.find('{');
    const auto name_end = std::min(brace, line.find(' '));
    const std::string sample = line.substr(0, name_end);
    if (brace == std::string::npos || brace > line.find(' ')) {
      continue;
    }
    const std::string labels = line.substr(brace + 1, line.find('}') - brace - 1);
    std::string without_le;
    for (std::size_t pos = 0; pos < labels.size();) {
      const auto eq = labels.find('=', pos);
      const auto close = labels.find('"', eq + 2);
      const std::string name = labels.substr(pos, eq - pos);
      const std::string value = labels.substr(eq + 2, close - eq - 2);
      if (name == "le" && sample == current + "_bucket") {
        if (!first_child.contains(current)) {
          first_child[current] = without_le;
        }
        if (first_child[current] == without_le) {
          out[current].buckets += (out[current].buckets.empty() ? "" : " ") + value;
        }
      } else {
        label_names[current].insert(name);
        without_le += name + "=" + value + ",";
      }
      pos = close + 2;
    }
  }
  for (auto& [name, names] : label_names) {
    for (const auto& l : names) {
      out[name].labels += (out[name].labels.empty() ? "" : ",") + l;
    }
  }
  return out;
}

}  // namespace tec::test
