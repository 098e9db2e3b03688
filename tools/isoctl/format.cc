#include "tools/isoctl/format.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "core/log_escape.h"

namespace isometry::isoctl {

namespace {

template <typename... Args>
std::string Printf(const char* format, Args... args) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    return Printf("%" PRIu64 " B", bytes);
  }
  double v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  return Printf("%.2f %s", v, kUnits[u]);
}

std::string FormatRate(double bytes_per_s) {
  static constexpr const char* kUnits[] = {"kB/s", "MB/s", "GB/s", "TB/s"};
  if (!std::isfinite(bytes_per_s) || bytes_per_s < 0) {
    return "-";
  }
  if (bytes_per_s < 1000) {
    return Printf("%.0f B/s", bytes_per_s);
  }
  double v = bytes_per_s / 1000;
  size_t u = 0;
  while (v >= 1000 && u + 1 < std::size(kUnits)) {
    v /= 1000;
    ++u;
  }
  return Printf(v < 100 ? "%.2f %s" : "%.1f %s", v, kUnits[u]);
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return "-";
  }
  if (seconds < 1e-3) {
    return Printf("%.0f us", seconds * 1e6);
  }
  if (seconds < 1) {
    return Printf("%.2f ms", seconds * 1e3);
  }
  if (seconds < 60) {
    return Printf("%.2f s", seconds);
  }
  const auto whole = static_cast<uint64_t>(seconds);
  const uint64_t h = whole / 3600, m = whole / 60 % 60, s = whole % 60;
  if (h == 0) {
    return Printf("%" PRIu64 "m %02" PRIu64 "s", m, s);
  }
  return Printf("%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", h, m, s);
}

std::string FormatPercent(uint64_t done, uint64_t total) {
  if (total == 0) {
    return "-";
  }
  return Printf("%.1f%%", 100.0 * static_cast<double>(done) / static_cast<double>(total));
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (std::string& cell : cells) cell = ForTerminal(cell);
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].header.size();
    for (const auto& row : rows_) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  auto line = [&](auto cell_of) {
    std::string text;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cell_of(c);
      const std::string pad(width[c] - cell.size(), ' ');
      if (c > 0) {
        text += "  ";
      }
      text += columns_[c].align == Align::kRight ? pad + cell : cell + pad;
    }
    text.erase(text.find_last_not_of(' ') + 1);
    out += text + "\n";
  };
  line([&](size_t c) -> const std::string& { return columns_[c].header; });
  for (const auto& row : rows_) {
    line([&](size_t c) -> const std::string& { return row[c]; });
  }
  return out;
}

std::string RenderFields(const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [key, value] : fields) {
    width = std::max(width, key.size());
  }
  std::string out;
  for (const auto& [key, value] : fields) {
    out += key;
    out.append(width - key.size() + 2, ' ');
    out += ForTerminal(value);
    out += '\n';
  }
  return out;
}

}  // namespace isometry::isoctl
