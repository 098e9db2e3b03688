// `isoctl top` as a full-screen live view (ncurses): the alternate screen,
// redrawn in place every interval and at every key, to the terminal's size
// (resizes included). Four panes (channels, transfers, peers, memories),
// sorting, filtering, pause, a transfer's hops and cancelling it; the keys
// are in top_keys.h, what the panes show in top_panes.h.
//
// Owns the terminal from start to return: the screen is restored on every
// way out (q, Ctrl-C, SIGTERM, an error). Single-threaded.
#pragma once

#include <atomic>
#include <optional>

#include "core/status.h"
#include "tools/isoctl/commands.h"
#include "tools/isoctl/daemon_client.h"

namespace isometry::isoctl {

// True when stdin and stdout are both terminals and TERM names one that
// can address the cursor (set, and not "dumb"): elsewhere `top` prints
// frames instead.
bool FullScreenPossible();

// Runs until q, `stop` (set by SIGINT/SIGTERM), or args.iterations
// refreshes (0: no limit). The first snapshot is taken before the screen
// is set up, so a daemon that cannot be reached is reported as by every
// other command (exit 3); later failures are shown on the screen, which
// keeps the last snapshot and tries again each interval. nullopt when
// curses could not set up this terminal (the caller prints frames).
std::optional<Status> RunTopScreen(DaemonClient& client, const TopArgs& args,
                                   const std::atomic<bool>& stop);

}  // namespace isometry::isoctl
