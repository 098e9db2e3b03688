#include "tools/isoctl/top_fetch.h"

#include <string>

#include "core/log_escape.h"
#include "tools/isoctl/render.h"

namespace isometry::isoctl::top {

namespace {

using Stub = v1::Isometry::Stub;

// Strings reach the screen as printable ASCII: a layout or a name a client
// chose could otherwise move the cursor or change the terminal's state,
// and a control character would not take the one column it is counted as.
std::string Printable(const std::string& s) { return ForLog(s, 4096); }

ChannelRow ChannelOf(const v1::ChannelInfo& c) {
  ChannelRow row{.name = Printable(c.name()),
                 .kind = Printable(c.kind()),
                 .in_flight = c.requests_in_flight(),
                 .max_in_flight = c.max_in_flight(),
                 .requests_done = c.requests_done(),
                 .bytes_done = c.bytes_done(),
                 .current_bps = c.current_bytes_per_s(),
                 .peak_bps = c.peak_bytes_per_s(),
                 .rate_limit_bps = c.rate_limit_bytes_per_s()};
  for (const v1::QueueLevel& q : c.queued()) {
    row.queued.emplace_back(q.priority(), q.xds());
  }
  for (const std::string& e : c.edges()) {
    row.edges.push_back(Printable(e));
  }
  return row;
}

TransferRow TransferOf(const v1::TransferInfo& x) {
  TransferRow row{
      .id = x.id(),
      .state = Printable(x.state()),
      .priority = x.priority(),
      .bytes = x.bytes(),
      .elapsed_s = x.elapsed_s(),
      .path = Printable(x.path()),
      .owner = x.remote_half().empty() ? OwnerText(x.owner()) : ForLog(x.remote_half(), 96),
      .predicted_bps = x.predicted_bytes_per_s(),
      .measured_bps = x.measured_bytes_per_s()};
  for (const v1::HopProgress& h : x.hops()) {
    row.hops.push_back({.channel = Printable(h.channel()),
                        .src_memory = Printable(h.src_memory()),
                        .dst_memory = Printable(h.dst_memory()),
                        .src_layout = Printable(h.src_layout()),
                        .dst_layout = Printable(h.dst_layout()),
                        .chunks_done = h.chunks_done(),
                        .chunks_total = h.chunks_total()});
  }
  return row;
}

PeerRow PeerOf(const v1::PeerInfo& p) {
  return {.name = Printable(p.name()),
          .address = Printable(p.address()),
          .state = Printable(p.state()),
          .rtt_ms = p.rtt_ms(),
          .data_out = p.data_out(),
          .data_in = p.data_in(),
          .data_link = Printable(p.data_link()),
          .network = Printable(p.network()),
          .last_error = Printable(p.last_error()),
          .bytes_sent = p.bytes_sent(),
          .bytes_received = p.bytes_received()};
}

MemoryRow MemoryOf(const v1::Memory& m) {
  return {.name = Printable(m.name()),
          .kind = Printable(m.kind()),
          .pool_capacity = m.pool_capacity(),
          .pool_used = m.pool_used(),
          .client_quota = m.client_quota(),
          .staging_budget = m.staging_budget(),
          .staging_used = m.staging_used(),
          .staging_peak = m.staging_peak()};
}

}  // namespace

Result<Snapshot> FetchSnapshot(DaemonClient& client) {
  v1::StatusResponse status;
  v1::ListChannelsResponse channels;
  v1::ListTransfersResponse transfers;
  v1::ListPeersResponse peers;
  v1::ListMemoriesResponse memories;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::GetStatus, v1::StatusRequest(), &status));
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListChannels, v1::ListChannelsRequest(), &channels));
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListTransfers, v1::ListTransfersRequest(), &transfers));
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListPeers, v1::ListPeersRequest(), &peers));
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListMemories, v1::ListMemoriesRequest(), &memories));
  Snapshot s;
  s.status_line = RenderStatusLine(status);
  while (!s.status_line.empty() && s.status_line.back() == '\n') {
    s.status_line.pop_back();
  }
  s.node_name = Printable(peers.node_name());
  for (const v1::ChannelInfo& c : channels.channels()) {
    s.channels.push_back(ChannelOf(c));
  }
  for (const v1::TransferInfo& x : transfers.transfers()) {
    s.transfers.push_back(TransferOf(x));
  }
  for (const v1::PeerInfo& p : peers.peers()) {
    s.peers.push_back(PeerOf(p));
  }
  for (const v1::Memory& m : memories.memories()) {
    s.memories.push_back(MemoryOf(m));
  }
  return s;
}

Result<TransferRow> FetchTransfer(DaemonClient& client, uint64_t id) {
  v1::GetTransferRequest req;
  req.set_transfer(id);
  v1::TransferInfo info;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::GetTransfer, req, &info));
  return TransferOf(info);
}

}  // namespace isometry::isoctl::top
