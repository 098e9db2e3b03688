// Not in a unity batch (tools/isoctl/CMakeLists.txt): curses.h defines
// macros (OK, ERR) that would rewrite the code of files compiled after it.
#define NCURSES_NOMACROS 1
#include "tools/isoctl/top_screen.h"

#include <curses.h>
#include <langinfo.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/isoctl/exit_codes.h"
#include "tools/isoctl/top_fetch.h"
#include "tools/isoctl/top_keys.h"
#include "tools/isoctl/top_layout.h"
#include "tools/isoctl/top_panes.h"

namespace isometry::isoctl {

namespace {

using namespace top;
using Clock = std::chrono::steady_clock;

constexpr size_t kHistorySamples = 60;
constexpr int kHeaderLines = 4;                     // title, daemon status, pane tabs, table header
constexpr int kFooterLines = 1;                     // keys, messages, the filter being typed
constexpr std::chrono::milliseconds kKeyPoll{250};  // longest wait for a key

// The curses screen on stdin/stdout: set up by Open, restored (the normal
// screen back, the cursor shown) by the destructor on every way out.
class CursesScreen {
 public:
  static std::unique_ptr<CursesScreen> Open() {
    SCREEN* screen = newterm(nullptr, stdout, stdin);
    if (screen == nullptr) {
      return nullptr;
    }
    set_term(screen);
    cbreak();  // keys arrive one by one; Ctrl-C still signals
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    set_escdelay(25);  // Esc alone is a key here, not an escape sequence's start
    curs_set(0);
    return std::unique_ptr<CursesScreen>(new CursesScreen(screen));
  }
  ~CursesScreen() {
    endwin();
    delscreen(screen_);
  }
  CursesScreen(const CursesScreen&) = delete;
  CursesScreen& operator=(const CursesScreen&) = delete;

 private:
  explicit CursesScreen(SCREEN* screen) : screen_(screen) {}
  SCREEN* screen_;
};

// Unicode blocks for the sparklines where the locale says UTF-8; else
// ASCII, which every terminal shows.
Glyphs GlyphsForLocale() {
  const char* codeset = nl_langinfo(CODESET);
  return codeset != nullptr && std::strcmp(codeset, "UTF-8") == 0 ? Glyphs::kUnicode
                                                                  : Glyphs::kAscii;
}

std::string WallClock() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

// Writes `text` on screen line `y`, cut to the width and the rest of the
// line cleared; `fill` paints the whole line with the attribute (a bar).
void Put(int y, const std::string& text, attr_t attr = A_NORMAL, bool fill = false) {
  // Not the bottom right corner: writing there would scroll some terminals.
  const int width = y == LINES - 1 ? COLS - 1 : COLS;
  std::string line = Elide(text, width);
  if (fill) {
    line = Pad(line, width);
  }
  move(y, 0);
  clrtoeol();
  attron(attr);
  addstr(line.c_str());
  attroff(attr);
}

class TopScreen {
 public:
  TopScreen(DaemonClient& client, const TopArgs& args, Snapshot first)
      : client_(client), args_(args), glyphs_(GlyphsForLocale()), snapshot_(std::move(first)) {
    history_.Record(snapshot_.channels);
    next_refresh_ = Clock::now() + std::chrono::milliseconds(args_.interval_ms);
  }

  Status Run(const std::atomic<bool>& stop);

 private:
  int TableLines() const { return std::max(0, LINES - kHeaderLines - kFooterLines); }
  PaneTable Table() const { return PaneTableOf(view_.pane(), snapshot_, history_, glyphs_); }
  bool OnTransfers() const { return view_.pane() == Pane::kTransfers; }

  void Refresh();
  void Draw();
  void DrawTabs();
  void DrawTable(const PaneTable& table, const std::vector<Row>& rows);
  void DrawBody(const std::string& title, const std::vector<std::string>& lines);
  void DrawFooter();
  // False when the key quits.
  bool Handle(int key);
  void Move(int delta);
  void Cancel();
  void Say(std::string message, bool error = false) {
    message_ = std::move(message);
    message_error_ = error;
  }

  DaemonClient& client_;
  const TopArgs args_;
  const Glyphs glyphs_;
  Snapshot snapshot_;
  UtilisationHistory history_{kHistorySamples};
  View view_;
  int refreshes_ = 1;
  Clock::time_point next_refresh_;
  int scroll_ = 0;  // first row shown in the table area
  std::optional<LineEdit> filter_edit_;
  // The selected transfer once it has left the list, for its hops view.
  std::optional<TransferRow> ended_;
  std::string stale_;  // why the snapshot is old: the last refresh's error
  std::string message_;
  bool message_error_ = false;
};

Status TopScreen::Run(const std::atomic<bool>& stop) {
  view_.KeepSelection(Arrange(TransfersTable(snapshot_), view_.state(Pane::kTransfers)));
  while (!stop.load()) {
    if (!view_.paused && Clock::now() >= next_refresh_) {
      if (args_.iterations > 0 && refreshes_ >= args_.iterations) {
        break;
      }
      Refresh();
    }
    Draw();
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_refresh_ - Clock::now());
    timeout(static_cast<int>(std::clamp(wait, std::chrono::milliseconds(0), kKeyPoll).count()));
    const int key = getch();
    if (key != ERR && !Handle(key)) {
      break;
    }
  }
  return OkStatus();
}

void TopScreen::Refresh() {
  next_refresh_ = Clock::now() + std::chrono::milliseconds(args_.interval_ms);
  ++refreshes_;
  Result<Snapshot> next = FetchSnapshot(client_);
  if (!next.ok()) {
    stale_ = Describe(next.status());
    return;
  }
  stale_.clear();
  snapshot_ = std::move(*next);
  history_.Record(snapshot_.channels);
  // The selection is kept among the transfers pane's rows as arranged.
  const uint64_t selected = view_.selected();
  const std::vector<Row> rows = Arrange(TransfersTable(snapshot_), view_.state(Pane::kTransfers));
  const bool still_listed =
      std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.id == selected; });
  if (view_.hops && selected != 0 && !still_listed) {
    // Its hops view stays on it: the daemon keeps ended transfers a while.
    Result<TransferRow> ended = FetchTransfer(client_, selected);
    if (ended.ok()) {
      ended_ = std::move(*ended);
    }
    return;
  }
  ended_.reset();
  view_.KeepSelection(rows);
}

void TopScreen::Draw() {
  erase();
  // The socket last: a long path is what gets cut.
  Put(0,
      "isoctl top  " + WallClock() + "  every " + std::to_string(args_.interval_ms) + " ms  " +
          (view_.paused ? "PAUSED  " : "") + "unix:" + client_.socket(),
      A_BOLD);
  if (stale_.empty()) {
    Put(1, snapshot_.status_line);
  } else {
    Put(1, "refresh failed (showing the last snapshot): " + stale_, A_BOLD);
  }
  DrawTabs();
  if (view_.help) {
    DrawBody("help (any key closes it)", HelpLines());
  } else if (view_.hops && OnTransfers()) {
    const auto it = std::find_if(snapshot_.transfers.begin(), snapshot_.transfers.end(),
                                 [&](const TransferRow& t) { return t.id == view_.selected(); });
    const TransferRow* shown = it != snapshot_.transfers.end() ? &*it : ended_ ? &*ended_ : nullptr;
    DrawBody("hops of transfer " + std::to_string(view_.selected()) + " (Esc: back)",
             shown ? TransferDetail(*shown, COLS)
                   : std::vector<std::string>{"the transfer is no longer known to the daemon"});
  } else {
    const PaneTable table = Table();
    DrawTable(table, Arrange(table, view_.state()));
  }
  DrawFooter();
  refresh();
}

void TopScreen::DrawTabs() {
  std::string tabs;
  for (int p = 0; p < kPaneCount; ++p) {
    const std::string name = std::to_string(p + 1) + " " + PaneTitle(static_cast<Pane>(p));
    tabs += p == static_cast<int>(view_.pane()) ? "[" + name + "]" : " " + name + " ";
    tabs += " ";
  }
  const PaneState& state = view_.state();
  if (!state.filter.empty()) {
    tabs += " filter: " + state.filter;
  }
  Put(2, tabs, A_BOLD);
}

void TopScreen::DrawBody(const std::string& title, const std::vector<std::string>& lines) {
  Put(3, title, A_REVERSE, true);
  for (int i = 0; i < TableLines() && static_cast<size_t>(i) < lines.size(); ++i) {
    Put(kHeaderLines + i, lines[static_cast<size_t>(i)]);
  }
}

void TopScreen::DrawTable(const PaneTable& table, const std::vector<Row>& rows) {
  std::vector<std::string> headers;
  headers.reserve(table.columns.size());
  for (int c = 0; c < static_cast<int>(table.columns.size()); ++c) {
    headers.push_back(SortedHeader(table, view_.state(), c));
  }
  const std::vector<int> widths = FitColumns(table.columns, headers, rows, COLS);
  Put(3, FormatLine(table.columns, headers, widths), A_REVERSE, true);
  if (rows.empty()) {
    Put(kHeaderLines, table.rows.empty() ? table.empty_text
                                         : "no rows match the filter '" + view_.state().filter +
                                               "' (/ to change it)");
    return;
  }
  // Keep the selected transfer in sight.
  const int lines = TableLines();
  if (OnTransfers()) {
    const auto it = std::find_if(rows.begin(), rows.end(),
                                 [&](const Row& r) { return r.id == view_.selected(); });
    const int index = it == rows.end() ? 0 : static_cast<int>(it - rows.begin());
    scroll_ = std::clamp(scroll_, index - lines + 1, index);
  }
  scroll_ = std::clamp(scroll_, 0, std::max(0, static_cast<int>(rows.size()) - lines));
  for (int i = 0; i < lines && scroll_ + i < static_cast<int>(rows.size()); ++i) {
    const Row& row = rows[static_cast<size_t>(scroll_) + static_cast<size_t>(i)];
    std::vector<std::string> cells;
    for (const Cell& c : row.cells) {
      cells.push_back(c.text);
    }
    const bool selected = OnTransfers() && row.id == view_.selected();
    Put(kHeaderLines + i, FormatLine(table.columns, cells, widths), selected ? A_REVERSE : A_NORMAL,
        selected);
  }
}

void TopScreen::DrawFooter() {
  const int y = LINES - 1;
  if (filter_edit_) {
    Put(y, "filter: " + filter_edit_->text() + "_   (Enter keeps, Esc restores)", A_BOLD);
  } else if (!message_.empty()) {
    Put(y, message_, message_error_ ? A_BOLD : A_NORMAL);
  } else {
    Put(y, OnTransfers() ? "q quit  ? help  j/k select  Enter hops  c cancel  s sort  / filter"
                         : "q quit  ? help  Tab/1-4 pane  s sort  r reverse  / filter  p pause");
  }
}

bool TopScreen::Handle(int key) {
  if (filter_edit_) {
    // The filter applies as it is typed; Esc puts the old one back.
    const LineEdit::State state = filter_edit_->Feed(key);
    view_.state().filter = filter_edit_->text();
    if (state != LineEdit::State::kEditing) {
      filter_edit_.reset();
      scroll_ = 0;
    }
    return true;
  }
  const KeyAction action = ActionForKey(key);
  if (view_.help) {
    view_.help = action.action == Action::kResize;  // any other key closes it
    return true;
  }
  message_.clear();
  switch (action.action) {
    case Action::kQuit:
      return false;
    case Action::kNextPane:
    case Action::kPrevPane:
    case Action::kShowPane:
      if (action.action == Action::kShowPane) {
        view_.SetPane(static_cast<Pane>(action.pane));
      } else {
        for (int i = action.action == Action::kNextPane ? 1 : kPaneCount - 1; i > 0; --i) {
          view_.NextPane();
        }
      }
      view_.hops = false;
      scroll_ = 0;
      break;
    case Action::kSortNext:
      view_.CycleSort(Table());
      break;
    case Action::kReverse:
      view_.Reverse();
      break;
    case Action::kFilter:
      filter_edit_.emplace(view_.state().filter);
      break;
    case Action::kPause:
      view_.paused = !view_.paused;
      if (!view_.paused) {
        next_refresh_ = Clock::now();  // resumed: fresh figures at once
      }
      break;
    case Action::kUp:
    case Action::kDown:
      Move(action.action == Action::kUp ? -1 : 1);
      break;
    case Action::kPageUp:
    case Action::kPageDown:
      Move((action.action == Action::kPageUp ? -1 : 1) * std::max(1, TableLines() - 1));
      break;
    case Action::kHops:
      if (!OnTransfers() || view_.selected() == 0) {
        Say("Enter shows a transfer's hops: select one in pane 2 (Transfers) first");
      } else {
        view_.hops = true;
      }
      break;
    case Action::kBack:
      view_.hops = false;
      break;
    case Action::kCancel:
      Cancel();
      break;
    case Action::kHelp:
      view_.help = true;
      break;
    case Action::kResize:
      clearok(curscr, TRUE);  // repaint all of the new size, not a diff
      break;
    case Action::kNone:
      break;
  }
  return true;
}

void TopScreen::Move(int delta) {
  if (OnTransfers() && !view_.hops) {
    view_.MoveSelection(Arrange(Table(), view_.state()), delta);
  } else {
    scroll_ = std::max(0, scroll_ + delta);  // DrawTable bounds it
  }
}

void TopScreen::Cancel() {
  const uint64_t id = view_.selected();
  if (!OnTransfers() || id == 0) {
    Say("c cancels the selected transfer: select one in pane 2 (Transfers) first");
    return;
  }
  v1::CancelRequest req;
  req.set_transfer(id);
  v1::CancelResponse resp;
  const Status s = client_.Call(&v1::Isometry::Stub::Cancel, req, &resp);
  if (!s.ok()) {
    // Another client's transfer without the operator token: the daemon's
    // PERMISSION_DENIED says so.
    Say("cancel " + std::to_string(id) + " refused: " + Describe(s), true);
    return;
  }
  Say("cancel requested for transfer " + std::to_string(id));
  next_refresh_ = Clock::now();  // show its end at once
}

}  // namespace

bool FullScreenPossible() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO) && term != nullptr && *term != '\0' &&
         std::strcmp(term, "dumb") != 0;
}

std::optional<Status> RunTopScreen(DaemonClient& client, const TopArgs& args,
                                   const std::atomic<bool>& stop) {
  Result<Snapshot> first = FetchSnapshot(client);
  if (!first.ok()) {
    return first.status();
  }
  // The sparklines' blocks where the locale is UTF-8. LC_CTYPE alone:
  // numbers keep their "." whatever LC_NUMERIC says. The global locale,
  // not uselocale's per-thread one: ncurses asks setlocale(LC_CTYPE, NULL)
  // whether the terminal speaks UTF-8. gRPC's threads convert no multibyte
  // text.
  std::setlocale(LC_CTYPE, "");  // NOLINT(concurrency-mt-unsafe)
  const std::unique_ptr<CursesScreen> screen = CursesScreen::Open();
  if (!screen) {
    return std::nullopt;
  }
  TopScreen view(client, args, std::move(*first));
  return view.Run(stop);
}

}  // namespace isometry::isoctl
