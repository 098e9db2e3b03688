#include "tools/bench/bench_report.h"

#include <algorithm>
#include <cmath>

namespace isometry::bench {

namespace {

// JSON string escaping for the few characters our names could contain.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out + "\"";
}

std::string Number(double v) {
  if (!std::isfinite(v)) {
    return "null";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const size_t m = v.size();
  return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

}  // namespace

Rounds::Median Rounds::Medians() const {
  std::vector<double> ours, base, ratio;
  for (const auto& [o, b] : pairs_) {
    ours.push_back(o);
    base.push_back(b);
    ratio.push_back(o / b);
  }
  return {MedianOf(ours), MedianOf(base), MedianOf(ratio), static_cast<int>(pairs_.size())};
}

void Rounds::Print(const char* what) const {
  if (pairs_.empty()) {
    return;
  }
  std::string line;
  for (const auto& [ours, base] : pairs_) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.2f/%.2f=%.2f", ours, base, ours / base);
    line += buf;
  }
  std::fprintf(stderr, "  %s per round (GB/s, ours/baseline=ratio):%s; median ratio %.3f\n", what,
               line.c_str(), Medians().ratio);
}

Row MedianRow(const char* scenario, const char* metric, const Rounds& r, const std::string& base,
              const char* target) {
  const Rounds::Median m = r.Medians();
  return {scenario,
          metric,
          m.ours,
          "GB/s",
          base + ", median of " + std::to_string(m.rounds) + " rounds",
          m.base,
          m.ratio,
          target};
}

void Report::Add(Row row) {
  if (json_) {
    std::printf(
        "{\"scenario\":%s,\"metric\":%s,\"value\":%s,\"unit\":%s,\"baseline\":%s,"
        "\"baseline_value\":%s,\"ratio\":%s}\n",
        Quote(row.scenario).c_str(), Quote(row.metric).c_str(), Number(row.value).c_str(),
        Quote(row.unit).c_str(), Quote(row.baseline).c_str(), Number(row.baseline_value).c_str(),
        Number(row.ratio).c_str());
    std::fflush(stdout);
  } else {
    std::fprintf(stderr, "  done: %s / %s\n", row.scenario.c_str(), row.metric.c_str());
  }
  rows_.push_back(std::move(row));
}

void Report::Finish() const {
  if (json_) {
    return;
  }
  std::printf("\n%-22s %-26s %12s %-6s %-28s %12s %7s %s\n", "scenario", "metric", "value", "unit",
              "baseline", "baseline", "ratio", "target");
  for (const Row& r : rows_) {
    std::printf("%-22s %-26s %12.3f %-6s %-28s %12.3f %7.3f %s\n", r.scenario.c_str(),
                r.metric.c_str(), r.value, r.unit.c_str(), r.baseline.c_str(), r.baseline_value,
                r.ratio, r.target.c_str());
  }
}

}  // namespace isometry::bench
