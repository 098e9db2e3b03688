// isoctl's subcommands. Each asks the daemon, prints a table (or, with
// -o, the wide table, or the response as a JSON or YAML document:
// output.h) to stdout and returns OK or the error that decides the exit
// code (exit_codes.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/datatype.h"
#include "core/status.h"
#include "tools/isoctl/daemon_client.h"
#include "tools/isoctl/output.h"
#include "tools/isoctl/shape_args.h"

namespace isometry::isoctl {

Status RunStatus(DaemonClient& client, const Output& out);
Status RunMemories(DaemonClient& client, const Output& out);
Status RunChannels(DaemonClient& client, const Output& out);
// The peer daemons of this node's cluster (state, round trip, data links).
Status RunPeers(DaemonClient& client, const Output& out);
// One verdict over the daemon, its peers, pools and channels: a table and
// "healthy", "degraded" (exit 4) or "unhealthy" (exit 5).
Status RunHealth(DaemonClient& client, const Output& out);
// Transfers in flight, or one transfer (in flight or recently ended) by id,
// or with `recent` the ended ones the daemon keeps, newest first.
Status RunTransfers(DaemonClient& client, const Output& out, std::optional<uint64_t> id,
                    bool recent);

// A side is a layout over `shape`, or `count` elements of a datatype
// (then the shape describes nothing on that side; with datatypes on both
// sides it is not sent).
struct PlanArgs {
  std::string src_memory;
  std::string dst_memory;
  ParsedShape shape;
  std::optional<Datatype> src_type, dst_type;
  int64_t src_count = 1, dst_count = 1;
};
Status RunPlan(DaemonClient& client, const Output& out, const PlanArgs& args);
// Measures every channel again (the daemon replans with the figures).
Status RunCalibrate(DaemonClient& client, const Output& out);

// OK when the transfer ended "done"; else its final code and message (a
// transfer that ended badly fails the command that waited for it).
Status TransferOutcome(const v1::TransferInfo& transfer);

// Cancelling a transfer that already ended succeeds and changes nothing.
Status RunCancel(DaemonClient& client, const Output& out, uint64_t id);
// Why transfer `id` took its path: the paths it could have taken, each
// with its predicted rate and what ruled it out, and measured vs predicted.
Status RunExplain(DaemonClient& client, const Output& out, uint64_t id);
// isoctl qos, and isoctl qos move SESSION CLASS (the operator's grant).
Status RunQos(DaemonClient& client, const Output& out);
Status RunQosMove(DaemonClient& client, uint64_t session, const std::string& class_name);

// Merges a checkpoint's delta chain (FILE.delta) into its base FILE of DSK
// memory MEMORY (docs/guides/active-access.md, "Incremental checkpoints"), in a session of its
// own (the disk quota it charges while it writes is that session's uid's).
Status RunCompactCheckpoint(DaemonClient& client, const Output& out, const std::string& memory,
                            const std::string& file);

// Every session with what it holds, every allocation with its owner (the
// operator token; without it the daemon refuses: isoctl has no session of
// its own), and the watched allocations (Active Access) from GetStatus.
Status RunSessions(DaemonClient& client, const Output& out);
Status RunAllocations(DaemonClient& client, const Output& out);
Status RunWatches(DaemonClient& client, const Output& out);

struct OrphansArgs {
  std::vector<uint64_t> free;  // orphans to free
  bool free_all = false;
};
// Lists the orphaned published allocations (their owner's session ended),
// or frees the ones named (--free ID, --free-all). Needs the operator
// token; no session is opened.
Status RunOrphans(DaemonClient& client, const Output& out, const OrphansArgs& args);

struct WaitArgs {
  uint64_t id = 0;
  uint32_t timeout_ms = 0;  // 0: until the transfer ends
};
// Fails (exit 1) when the transfer ends other than "done", or is still
// running after timeout_ms (DEADLINE_EXCEEDED).
Status RunWait(DaemonClient& client, const Output& out, const WaitArgs& args);

struct TopArgs {
  int interval_ms = 1000;
  int iterations = 0;  // 0: until Ctrl-C
  bool once = false;   // one frame, printed (never the full screen)
};
// Refreshes status, channels and transfers every interval. On a terminal
// (FullScreenPossible, top_screen.h) it is a full-screen live view with
// keys; otherwise, with --once or --json, frames follow each other (with
// --json: one stamped JSON Lines document a frame). SIGINT/SIGTERM end it
// with success.
Status RunTop(DaemonClient& client, const Output& out, const TopArgs& args);

enum class Pattern { kNone, kHash, kByte };

struct CopyArgs {
  std::string memory = "sys0";
  std::string dst_memory;  // empty: `memory`
  ParsedShape shape;
  InstanceShape src, dst;  // validated from `shape`
  int32_t priority = 0;
  Pattern pattern = Pattern::kNone;
  uint8_t pattern_byte = 0;  // for Pattern::kByte
  bool verify = false;       // compare every (field, point) of dst with src
  int repeat = 1;
};
// Opens a session, allocates and registers a source and a destination
// instance, copies (waiting for the end) `repeat` times, reports each
// transfer, and closes the session (which frees everything it made).
Status RunCopy(DaemonClient& client, const Output& out, const CopyArgs& args);

}  // namespace isometry::isoctl
