// `isoctl top`'s four panes as tables: what each column shows, how it
// sorts, and which columns give way first on a narrow terminal. Pure:
// snapshot rows in, cells out (tools/isoctl/format.h's units).
#pragma once

#include <string>
#include <vector>

#include "tools/isoctl/top_model.h"

namespace isometry::isoctl::top {

// Columns a channel's utilisation sparkline takes.
inline constexpr int kSparkColumns = 10;

// CHANNEL KIND IN-FLIGHT QUEUED(prio:xds) CURRENT UTIL(sparkline) PEAK CAP
// MOVED REQUESTS EDGES.
PaneTable ChannelsTable(const Snapshot& snapshot, const UtilisationHistory& history, Glyphs glyphs);
// ID STATE PRIO SIZE DONE RATE(so far) PREDICTED ELAPSED PATH OWNER; a
// row's id is the transfer's.
PaneTable TransfersTable(const Snapshot& snapshot);
// PEER STATE ADDRESS RTT DATA(out/in) LINK SENT RECEIVED NETWORK ERROR.
PaneTable PeersTable(const Snapshot& snapshot);
// MEMORY KIND POOL USED USE% QUOTA/CLIENT STAGING STAGED PEAK.
PaneTable MemoriesTable(const Snapshot& snapshot);
PaneTable PaneTableOf(Pane pane, const Snapshot& snapshot, const UtilisationHistory& history,
                      Glyphs glyphs);

// The selected transfer in full, for the hops view: a summary line, its
// path, predicted against measured rate, then a table of its hops (hop,
// channel, from->to, layouts, chunks, done).
std::vector<std::string> TransferDetail(const TransferRow& transfer, int width);

}  // namespace isometry::isoctl::top
