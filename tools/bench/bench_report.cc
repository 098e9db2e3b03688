#include "tools/bench/bench_report.h"

#include <cmath>

namespace isometry::bench {

namespace {

// JSON string escaping for the few characters our names could contain.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

void Report::Add(Row row) {
  if (json_) {
    std::printf("{\"scenario\":%s,\"metric\":%s,\"value\":%s,\"unit\":%s,\"baseline\":%s,"
                "\"baseline_value\":%s,\"ratio\":%s}\n",
                Quote(row.scenario).c_str(), Quote(row.metric).c_str(), Number(row.value).c_str(),
                Quote(row.unit).c_str(), Quote(row.baseline).c_str(),
                Number(row.baseline_value).c_str(), Number(row.ratio).c_str());
    std::fflush(stdout);
  } else {
    std::fprintf(stderr, "  done: %s / %s\n", row.scenario.c_str(), row.metric.c_str());
  }
  rows_.push_back(std::move(row));
}

void Report::Finish() const {
  if (json_) return;
  std::printf("\n%-22s %-26s %12s %-6s %-28s %12s %7s %s\n", "scenario", "metric", "value", "unit",
              "baseline", "baseline", "ratio", "target");
  for (const Row& r : rows_) {
    std::printf("%-22s %-26s %12.3f %-6s %-28s %12.3f %7.3f %s\n", r.scenario.c_str(),
                r.metric.c_str(), r.value, r.unit.c_str(), r.baseline.c_str(), r.baseline_value,
                r.ratio, r.target.c_str());
  }
}

}  // namespace isometry::bench
