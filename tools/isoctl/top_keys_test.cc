#define NCURSES_NOMACROS 1
#include "tools/isoctl/top_keys.h"

#include <curses.h>

#include <catch2/catch.hpp>

namespace {

using namespace isometry::isoctl::top;

Action Of(int key) { return ActionForKey(key).action; }

TEST_CASE("Keys map to what the help says") {
  CHECK(Of('q') == Action::kQuit);
  CHECK(Of('\t') == Action::kNextPane);
  CHECK(Of(KEY_BTAB) == Action::kPrevPane);
  CHECK(ActionForKey('1').action == Action::kShowPane);
  CHECK(ActionForKey('1').pane == 0);
  CHECK(ActionForKey('4').pane == 3);
  CHECK(Of('5') == Action::kNone);
  CHECK(Of('s') == Action::kSortNext);
  CHECK(Of('r') == Action::kReverse);
  CHECK(Of('/') == Action::kFilter);
  CHECK(Of('p') == Action::kPause);
  CHECK(Of(KEY_UP) == Action::kUp);
  CHECK(Of('k') == Action::kUp);
  CHECK(Of(KEY_DOWN) == Action::kDown);
  CHECK(Of('j') == Action::kDown);
  CHECK(Of('\n') == Action::kHops);
  CHECK(Of('\r') == Action::kHops);
  CHECK(Of(KEY_ENTER) == Action::kHops);
  CHECK(Of(27) == Action::kBack);
  CHECK(Of('c') == Action::kCancel);
  CHECK(Of('?') == Action::kHelp);
  CHECK(Of(KEY_RESIZE) == Action::kResize);
  CHECK(Of('x') == Action::kNone);
}

TEST_CASE("The filter editor appends, deletes, keeps or restores") {
  LineEdit edit("mem");
  CHECK(edit.Feed('c') == LineEdit::State::kEditing);
  CHECK(edit.text() == "memc");
  CHECK(edit.Feed(127) == LineEdit::State::kEditing);
  CHECK(edit.Feed(KEY_BACKSPACE) == LineEdit::State::kEditing);
  CHECK(edit.text() == "me");
  CHECK(edit.Feed(KEY_UP) == LineEdit::State::kEditing);  // not text
  CHECK(edit.text() == "me");
  CHECK(edit.Feed('\n') == LineEdit::State::kDone);
  CHECK(edit.text() == "me");

  LineEdit abandoned("mem");
  abandoned.Feed('x');
  CHECK(abandoned.Feed(27) == LineEdit::State::kAbandoned);
  CHECK(abandoned.text() == "mem");

  LineEdit emptied("a");
  emptied.Feed(127);
  emptied.Feed(127);  // nothing left to delete
  CHECK(emptied.text().empty());
}

TEST_CASE("The help fits 80 columns") {
  for (const std::string& line : HelpLines()) {
    CHECK(line.size() <= 80);
  }
}

}  // namespace
