// What each key does in `isoctl top`'s full-screen view, the filter's
// line editor, and the help text that lists both. Keys are curses key codes
// (a character, or KEY_UP, KEY_RESIZE, ...); nothing here draws.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace isometry::isoctl::top {

enum class Action {
  kNone,
  kQuit,
  kNextPane,
  kPrevPane,
  kShowPane,  // KeyAction::pane
  kSortNext,
  kReverse,
  kFilter,  // start editing the pane's filter
  kPause,
  kUp,
  kDown,
  kPageUp,
  kPageDown,
  kHops,    // show the selected transfer's hops
  kBack,    // leave the hops or help view
  kCancel,  // cancel the selected transfer
  kHelp,
  kResize,
};

struct KeyAction {
  Action action = Action::kNone;
  int pane = 0;  // for kShowPane: 0..3
};

KeyAction ActionForKey(int key);

// The filter being typed after `/`: printable characters append, Backspace
// deletes, Enter keeps the text, Escape restores what it was.
class LineEdit {
 public:
  enum class State { kEditing, kDone, kAbandoned };

  explicit LineEdit(std::string initial) : initial_(initial), text_(std::move(initial)) {}
  State Feed(int key);
  const std::string& text() const { return text_; }

 private:
  std::string initial_;
  std::string text_;
};

// The keys, one per line, for the `?` view.
std::vector<std::string> HelpLines();

}  // namespace isometry::isoctl::top
