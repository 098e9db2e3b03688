// Not in a unity batch (tools/isoctl/CMakeLists.txt): curses.h defines
// macros (OK, ERR, and without NCURSES_NOMACROS timeout(), move(), ...)
// that would rewrite the code of files compiled after it.
#define NCURSES_NOMACROS 1
#include "tools/isoctl/top_keys.h"

#include <curses.h>

namespace isometry::isoctl::top {

namespace {

constexpr int kEscape = 27;
constexpr int kTab = '\t';
constexpr int kDelete = 127;  // what most terminals send for Backspace

bool IsEnter(int key) { return key == '\n' || key == '\r' || key == KEY_ENTER; }

}  // namespace

KeyAction ActionForKey(int key) {
  if (key >= '1' && key < '1' + 4) {
    return {Action::kShowPane, key - '1'};
  }
  if (IsEnter(key)) {
    return {Action::kHops};
  }
  switch (key) {
    case 'q':
    case 'Q':
      return {Action::kQuit};
    case kTab:
      return {Action::kNextPane};
    case KEY_BTAB:
      return {Action::kPrevPane};
    case 's':
      return {Action::kSortNext};
    case 'r':
      return {Action::kReverse};
    case '/':
      return {Action::kFilter};
    case 'p':
    case ' ':
      return {Action::kPause};
    case KEY_UP:
    case 'k':
      return {Action::kUp};
    case KEY_DOWN:
    case 'j':
      return {Action::kDown};
    case KEY_PPAGE:
      return {Action::kPageUp};
    case KEY_NPAGE:
      return {Action::kPageDown};
    case kEscape:
    case KEY_LEFT:
      return {Action::kBack};
    case 'c':
      return {Action::kCancel};
    case '?':
    case 'h':
      return {Action::kHelp};
    case KEY_RESIZE:
      return {Action::kResize};
    default:
      return {};
  }
}

LineEdit::State LineEdit::Feed(int key) {
  if (IsEnter(key)) {
    return State::kDone;
  }
  if (key == kEscape) {
    text_ = initial_;
    return State::kAbandoned;
  }
  if (key == KEY_BACKSPACE || key == kDelete || key == '\b') {
    if (!text_.empty()) {
      text_.pop_back();
    }
  } else if (key >= 0x20 && key < 0x7f) {
    text_.push_back(static_cast<char>(key));
  }
  return State::kEditing;
}

std::vector<std::string> HelpLines() {
  return {
      "isoctl top: keys",
      "",
      "  Tab, Shift-Tab   next, previous pane",
      "  1 2 3 4          channels, transfers, peers, memories",
      "  s                sort by the next column (after the last: the daemon's order)",
      "  r                reverse the sort order",
      "  /                filter rows (Enter keeps, Esc restores; empty shows all)",
      "  p, Space         pause / resume refreshing",
      "  Up/Down, k/j     select a transfer (transfers pane)",
      "  PgUp/PgDn        move the selection by a page",
      "  Enter            the selected transfer's hops (Esc: back)",
      "  c                cancel the selected transfer (another client's needs the",
      "                   operator token: --operator-token)",
      "  ?, h             this help (any key closes it)",
      "  q                quit",
      "",
      "UTIL: each channel's rate against its cap (its peak when uncapped), one mark",
      "a refresh. RATE: bytes delivered so far over the time since submission.",
  };
}

}  // namespace isometry::isoctl::top
