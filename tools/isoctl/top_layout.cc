#include "tools/isoctl/top_layout.h"

#include <algorithm>

namespace isometry::isoctl::top {

namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// Bytes of `text` that make up its first `columns` code points.
size_t PrefixBytes(std::string_view text, int columns) {
  size_t i = 0;
  for (int seen = 0; i < text.size(); ++i) {
    if (!IsContinuationByte(text[i]) && seen++ == columns) {
      break;
    }
  }
  return i;
}

int Total(const std::vector<int>& widths, const std::vector<bool>& kept) {
  int total = 0, count = 0;
  for (size_t i = 0; i < widths.size(); ++i) {
    if (kept[i]) {
      total += widths[i];
      ++count;
    }
  }
  return count > 0 ? total + kColumnGap * (count - 1) : 0;
}

// The kept column to drop next: the highest drop_rank, the rightmost of
// equals; -1 when every kept column must stay.
int NextToDrop(const std::vector<Column>& columns, const std::vector<bool>& kept) {
  int pick = -1;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (kept[i] && columns[i].drop_rank > 0 &&
        (pick < 0 || columns[i].drop_rank >= columns[static_cast<size_t>(pick)].drop_rank)) {
      pick = static_cast<int>(i);
    }
  }
  return pick;
}

}  // namespace

int DisplayWidth(std::string_view text) {
  return static_cast<int>(
      std::count_if(text.begin(), text.end(), [](char c) { return !IsContinuationByte(c); }));
}

std::string Elide(std::string_view text, int width) {
  if (width <= 0) {
    return "";
  }
  if (DisplayWidth(text) <= width) {
    return std::string(text);
  }
  return std::string(text.substr(0, PrefixBytes(text, width - 1))) + "~";
}

std::string Pad(std::string_view text, int width, Align align) {
  std::string cell = Elide(text, width);
  const std::string blanks(static_cast<size_t>(width - DisplayWidth(cell)), ' ');
  return align == Align::kRight ? blanks + cell : cell + blanks;
}

std::vector<int> FitColumns(const std::vector<Column>& columns,
                            const std::vector<std::string>& headers, const std::vector<Row>& rows,
                            int width) {
  const size_t n = columns.size();
  std::vector<int> natural(n, 0), least(n, 0);
  for (size_t i = 0; i < n; ++i) {
    natural[i] = i < headers.size() ? DisplayWidth(headers[i]) : 0;
    for (const Row& r : rows) {
      if (i < r.cells.size()) {
        natural[i] = std::max(natural[i], DisplayWidth(r.cells[i].text));
      }
    }
    least[i] = columns[i].elastic ? std::min(natural[i], columns[i].min_width) : natural[i];
  }
  // Drop columns only where cutting the elastic ones to their least is
  // not enough.
  std::vector<bool> kept(n, true);
  while (Total(least, kept) > width) {
    const int drop = NextToDrop(columns, kept);
    if (drop < 0) {
      break;
    }
    kept[static_cast<size_t>(drop)] = false;
  }
  std::vector<int> widths = natural;
  // Then cut the widest elastic column a column at a time, so that the
  // cut is shared out among long columns.
  for (int excess = Total(widths, kept) - width; excess > 0; --excess) {
    int widest = -1;
    for (size_t i = 0; i < n; ++i) {
      if (kept[i] && widths[i] > least[i] &&
          (widest < 0 || widths[i] > widths[static_cast<size_t>(widest)])) {
        widest = static_cast<int>(i);
      }
    }
    if (widest < 0) {
      break;  // the screen cuts the line at its edge
    }
    --widths[static_cast<size_t>(widest)];
  }
  for (size_t i = 0; i < n; ++i) {
    if (!kept[i]) {
      widths[i] = 0;
    }
  }
  return widths;
}

std::string FormatLine(const std::vector<Column>& columns, const std::vector<std::string>& cells,
                       const std::vector<int>& widths) {
  std::string line;
  bool first = true;
  for (size_t i = 0; i < columns.size() && i < widths.size(); ++i) {
    if (widths[i] <= 0) {
      continue;
    }
    if (!first) {
      line.append(kColumnGap, ' ');
    }
    first = false;
    line += Pad(i < cells.size() ? cells[i] : std::string(), widths[i], columns[i].align);
  }
  while (!line.empty() && line.back() == ' ') {
    line.pop_back();
  }
  return line;
}

}  // namespace isometry::isoctl::top
