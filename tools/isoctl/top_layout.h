// Fitting `isoctl top`'s tables to the terminal's width: every line the
// screen draws is at most `width` display columns, down to 80 and below,
// whatever the daemon reports (a channel with dozens of edges, a long path).
//
// Text is UTF-8 (the sparkline's blocks); widths are display columns,
// counting each code point as one column (the screen shows no wide
// characters: the daemon's strings are ASCII, or escaped to it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tools/isoctl/top_model.h"

namespace isometry::isoctl::top {

inline constexpr int kColumnGap = 2;  // blanks between two columns

// Display columns of UTF-8 text: its code points.
int DisplayWidth(std::string_view text);
// `text` cut to `width` columns, its last column "~" when anything was cut.
// Never longer than `width`; "" for a width of 0.
std::string Elide(std::string_view text, int width);
// `text` elided to `width`, then padded with blanks to exactly `width`.
std::string Pad(std::string_view text, int width, Align align = Align::kLeft);

// The width of each column so that the header and every row fit in
// `width` columns: a column is as wide as its widest cell (or header); when
// they do not fit, elastic columns are cut (the widest first, to their
// min_width at the least), then columns are dropped, the highest
// drop_rank first, where their width and gap go. A dropped column's width
// is 0. `headers` are the texts shown (with the sort mark).
std::vector<int> FitColumns(const std::vector<Column>& columns,
                            const std::vector<std::string>& headers, const std::vector<Row>& rows,
                            int width);

// One line of the table: the cells of the columns kept, each padded to its
// width and aligned, separated by kColumnGap blanks; no trailing blanks.
std::string FormatLine(const std::vector<Column>& columns, const std::vector<std::string>& cells,
                       const std::vector<int>& widths);

}  // namespace isometry::isoctl::top
