// Human renderings of the daemon's responses: aligned tables with units.
// Each Render...Wide is -o wide: the same table with the columns the plain
// one leaves out (docs/reference/cli.md, "Output formats").
// Every function returns the text (each line ending in '\n'), so `top` can
// compose a whole frame before writing it.
#pragma once

#include <string>

#include "isometry.pb.h"

namespace isometry::isoctl {

std::string RenderStatus(const v1::StatusResponse& status);
std::string RenderStatusWide(const v1::StatusResponse& status);
// The watched allocations as a table (every field of WatchInfo); empty
// when none is watched.
std::string RenderWatches(const v1::StatusResponse& s);
// "name (session 3, uid 1000, pid 42)": who owns a transfer, never a
// credential. The name is another client's string: escaped, so it cannot
// drive the operator's terminal.
std::string OwnerText(const v1::SessionOwner& owner);
// The node's peer daemons: state, round trip, data connections, bytes.
std::string RenderPeers(const v1::ListPeersResponse& peers);
std::string RenderPeersWide(const v1::ListPeersResponse& peers);
// One line for `top`'s header: uptime, sessions, transfer counters.
std::string RenderStatusLine(const v1::StatusResponse& status);
std::string RenderMemories(const v1::ListMemoriesResponse& memories);
std::string RenderMemoriesWide(const v1::ListMemoriesResponse& memories);
// The live queue table: in-flight/max, XDs queued by priority, requests
// done, bytes moved, current and peak throughput, rate cap, edges.
std::string RenderChannels(const v1::ListChannelsResponse& channels);
std::string RenderChannelsWide(const v1::ListChannelsResponse& channels);
// Transfers with one line per hop and its chunks_done/chunks_total.
std::string RenderTransfers(const v1::ListTransfersResponse& transfers);
std::string RenderTransfersWide(const v1::ListTransfersResponse& transfers);
// Ended transfers (transfers --recent), one line each: final state, bytes,
// duration, path, predicted and measured rate, and the error if any.
std::string RenderRecentTransfers(const v1::ListTransfersResponse& transfers);
std::string RenderRecentTransfersWide(const v1::ListTransfersResponse& transfers);
// One transfer in full (copy, wait, transfers ID): outcome, throughput,
// path and hops.
std::string RenderTransfer(const v1::TransferInfo& transfer);
std::string RenderTransferWide(const v1::TransferInfo& transfer);
std::string RenderPlan(const v1::ExplainPlanResponse& plan);
// The paths weighed beside a plan's (render_explain.cc): each with its
// predicted rate and verdict, the chosen one marked; empty when none.
std::string RenderAlternatives(const v1::ExplainPlanResponse& plan);
// isoctl explain: the transfer, its algorithm, measured against predicted,
// and its alternatives.
std::string RenderExplain(const v1::ExplainTransferResponse& explanation);
std::string RenderCalibration(const v1::CalibrateResponse& calibration);
// isoctl qos (render_qos.cc): classes, each class's share of each channel
// against its weight, caps and throttled time, and (operator) members.
std::string RenderQos(const v1::GetQosResponse& qos);
std::string RenderQosWide(const v1::GetQosResponse& qos);

}  // namespace isometry::isoctl
