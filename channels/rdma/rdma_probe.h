// Forwarding header: the RDMA probe is transport, not channel, and lives in
// net/rdma/rdma_probe.h (issue #51). Kept only for daemon/node/node.h and
// node.cc until they include the new path; delete it then (and its entry in
// scripts/check_layering.py's DAEMON_CHANNEL_HEADERS).
#pragma once

#include "net/rdma/rdma_probe.h"  // IWYU pragma: export
