// One `isoctl top` snapshot from the daemon: status, channels, transfers,
// peers and memories, converted to the view's plain rows (top_model.h), so
// that protobuf types stop here.
#pragma once

#include "core/status.h"
#include "tools/isoctl/daemon_client.h"
#include "tools/isoctl/top_model.h"

namespace isometry::isoctl::top {

// Five unary calls; the first error ends it (the caller keeps showing the
// last good snapshot and says why it is stale).
Result<Snapshot> FetchSnapshot(DaemonClient& client);

// The transfer by id, in flight or recently ended (GetTransfer).
Result<TransferRow> FetchTransfer(DaemonClient& client, uint64_t id);

}  // namespace isometry::isoctl::top
