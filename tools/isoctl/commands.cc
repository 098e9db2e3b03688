#include "tools/isoctl/commands.h"

#include <algorithm>
#include <cstdio>

#include "core/log_escape.h"
#include "proto/datatype_wire.h"
#include "tools/isoctl/format.h"
#include "tools/isoctl/json.h"
#include "tools/isoctl/render.h"

namespace isometry::isoctl {

namespace {

using Stub = v1::Isometry::Stub;

// Prints a response in out.format: its JSON or YAML document, or its
// human rendering (`wide` for -o wide: the table with every column).
template <typename Message, typename Render, typename Wide = Render>
Status Print(const Output& out, const Message& message, Render render, Wide wide) {
  switch (out.format) {
    case Format::kJson:
    case Format::kYaml:
      return PrintDocument(out, ToJsonValue(message));
    case Format::kWide:
      return PrintText(out, wide(message));
    case Format::kTable:
      break;
  }
  return PrintText(out, render(message));
}

// A response whose table already shows every field: wide is the table.
template <typename Message, typename Render>
Status Print(const Output& out, const Message& message, Render render) {
  return Print(out, message, render, render);
}

}  // namespace

Status TransferOutcome(const v1::TransferInfo& t) {
  if (t.state() == "done") {
    return OkStatus();
  }
  if (t.code() != 0) {
    // The daemon's message usually names the transfer already.
    const std::string name = StrCat("transfer ", t.id());
    std::string message = t.message();
    if (message.find(name) == std::string::npos) {
      message = StrCat(name, " ", t.state(), message.empty() ? "" : ": ", message);
    }
    return Status(static_cast<absl::StatusCode>(t.code()), message);
  }
  return absl::UnknownError(StrCat("transfer ", t.id(), " ended in state '", t.state(), "'"));
}

namespace {

// A client's name is whatever it sent: escaped, like every client string
// isoctl prints, so that no name can move the operator's cursor or forge a
// row.
std::string ClientName(const v1::SessionOwner& o) { return ForLog(o.client_name(), 64); }

// "12 'name'" for a table cell (render.h's OwnerText is the long form).
std::string OwnerCell(const v1::SessionOwner& o) {
  return o.session_id() == 0 ? std::string("-") : StrCat(o.session_id(), " '", ClientName(o), "'");
}

std::string UidText(int64_t uid) { return uid < 0 ? std::string("-") : StrCat(uid); }

std::string SessionsTable(const v1::ListSessionsResponse& r, bool wide) {
  std::vector<Table::Column> columns = {{"SESSION", Table::Align::kRight},
                                        {"CLIENT"},
                                        {"UID", Table::Align::kRight},
                                        {"PID", Table::Align::kRight},
                                        {"TRANSPORT"},
                                        {"AGE", Table::Align::kRight},
                                        {"ALLOCS", Table::Align::kRight},
                                        {"BYTES", Table::Align::kRight},
                                        {"INSTANCES", Table::Align::kRight},
                                        {"TRANSFERS", Table::Align::kRight}};
  if (wide) {
    columns.push_back({"PRIVATE", Table::Align::kRight});
    columns.push_back({"DATATYPES", Table::Align::kRight});
  }
  Table t(columns);
  for (const v1::SessionInfo& s : r.sessions()) {
    std::vector<std::string> row = {StrCat(s.owner().session_id()),
                                    ClientName(s.owner()),
                                    UidText(s.owner().uid()),
                                    UidText(s.owner().pid()),
                                    s.transport(),
                                    FormatDuration(s.age_s()),
                                    StrCat(s.allocations()),
                                    FormatBytes(s.allocated_bytes()),
                                    StrCat(s.instances()),
                                    StrCat(s.transfers_active())};
    if (wide) {
      row.push_back(StrCat(s.private_ranges()));
      row.push_back(StrCat(s.datatypes()));
    }
    t.AddRow(row);
  }
  return t.empty() ? std::string("no session\n") : t.Render();
}

std::string AllocationsTable(const v1::ListAllocationsResponse& r, bool wide) {
  std::vector<Table::Column> columns = {{"ALLOCATION", Table::Align::kRight},
                                        {"MEMORY"},
                                        {"BYTES", Table::Align::kRight},
                                        {"OWNER"},
                                        {"PUBLISHED"},
                                        {"WATCHED"}};
  if (wide) {
    columns.push_back({"UID", Table::Align::kRight});
    columns.push_back({"PID", Table::Align::kRight});
    columns.push_back({"MAPPED BY OTHERS"});
  }
  Table t(columns);
  const auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
  for (const v1::AllocationInfo& a : r.allocations()) {
    const bool orphan = a.owner().session_id() == 0;
    std::vector<std::string> row = {
        StrCat(a.id()),
        a.memory(),
        FormatBytes(a.bytes()),
        orphan ? StrCat("orphan of ", a.owner().uid() < 0 ? std::string("a gRPC client")
                                                          : StrCat("uid ", a.owner().uid()))
               : OwnerCell(a.owner()),
        yes(a.published()),
        yes(a.watched())};
    if (wide) {
      row.push_back(UidText(a.owner().uid()));
      row.push_back(UidText(a.owner().pid()));
      row.push_back(yes(a.mapped_by_others()));
    }
    t.AddRow(row);
  }
  return t.empty() ? std::string("no allocation\n") : t.Render();
}

}  // namespace

Status RunSessions(DaemonClient& client, const Output& out) {
  v1::ListSessionsResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListSessions, v1::ListSessionsRequest(), &resp));
  return Print(
      out, resp, [](const v1::ListSessionsResponse& r) { return SessionsTable(r, false); },
      [](const v1::ListSessionsResponse& r) { return SessionsTable(r, true); });
}

Status RunAllocations(DaemonClient& client, const Output& out) {
  v1::ListAllocationsResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListAllocations, v1::ListAllocationsRequest(), &resp));
  return Print(
      out, resp, [](const v1::ListAllocationsResponse& r) { return AllocationsTable(r, false); },
      [](const v1::ListAllocationsResponse& r) { return AllocationsTable(r, true); });
}

Status RunWatches(DaemonClient& client, const Output& out) {
  v1::StatusResponse status;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::GetStatus, v1::StatusRequest(), &status));
  if (out.format == Format::kJson || out.format == Format::kYaml) {
    Json watches = Json::array();
    for (const v1::WatchInfo& w : status.watches()) watches.push_back(ToJsonValue(w));
    return PrintDocument(out, Json{{"watches", std::move(watches)}});
  }
  const std::string table = RenderWatches(status);
  return PrintText(out, table.empty() ? std::string("no watched allocation\n") : table);
}

Status RunStatus(DaemonClient& client, const Output& out) {
  v1::StatusResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::GetStatus, v1::StatusRequest(), &resp));
  return Print(out, resp, RenderStatus, RenderStatusWide);
}

Status RunMemories(DaemonClient& client, const Output& out) {
  v1::ListMemoriesResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListMemories, v1::ListMemoriesRequest(), &resp));
  return Print(out, resp, RenderMemories, RenderMemoriesWide);
}

Status RunPeers(DaemonClient& client, const Output& out) {
  v1::ListPeersResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListPeers, v1::ListPeersRequest(), &resp));
  return Print(out, resp, RenderPeers, RenderPeersWide);
}

Status RunChannels(DaemonClient& client, const Output& out) {
  v1::ListChannelsResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListChannels, v1::ListChannelsRequest(), &resp));
  return Print(out, resp, RenderChannels, RenderChannelsWide);
}

Status RunTransfers(DaemonClient& client, const Output& out, std::optional<uint64_t> id,
                    bool recent) {
  if (id) {
    v1::GetTransferRequest req;
    req.set_transfer(*id);
    v1::TransferInfo resp;
    ISO_RETURN_IF_ERROR(client.Call(&Stub::GetTransfer, req, &resp));
    return Print(out, resp, RenderTransfer, RenderTransferWide);
  }
  v1::ListTransfersRequest req;
  req.set_recent(recent);
  v1::ListTransfersResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListTransfers, req, &resp));
  if (recent) {
    return Print(out, resp, RenderRecentTransfers, RenderRecentTransfersWide);
  }
  return Print(out, resp, RenderTransfers, RenderTransfersWide);
}

Status RunCalibrate(DaemonClient& client, const Output& out) {
  v1::CalibrateResponse resp;
  // Measuring takes the daemon about calibration_budget_ms: no short deadline.
  ISO_RETURN_IF_ERROR(client.Call(&Stub::Calibrate, v1::CalibrateRequest(), &resp,
                                  {.timeout = std::chrono::milliseconds(0)}));
  return Print(out, resp, RenderCalibration);
}

Status RunPlan(DaemonClient& client, const Output& out, const PlanArgs& args) {
  v1::ExplainPlanRequest req;
  req.set_src_memory(args.src_memory);
  req.set_dst_memory(args.dst_memory);
  if (args.src_type) {
    wire::DatatypeToProto(*args.src_type, req.mutable_src_datatype());
    req.set_src_count(args.src_count);
  } else {
    req.set_src_layout(args.shape.src_layout);
  }
  if (args.dst_type) {
    wire::DatatypeToProto(*args.dst_type, req.mutable_dst_datatype());
    req.set_dst_count(args.dst_count);
  } else {
    req.set_dst_layout(args.shape.dst_layout);
  }
  if (!args.src_type || !args.dst_type) {
    BoxToProto(args.shape.extents, req.mutable_bounds());
    FieldsToProto(args.shape.fields, req.mutable_fields());
  }
  v1::ExplainPlanResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ExplainPlan, req, &resp));
  return Print(out, resp, RenderPlan);
}

Status RunCancel(DaemonClient& client, const Output& out, uint64_t id) {
  v1::CancelRequest req;
  req.set_transfer(id);
  v1::CancelResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::Cancel, req, &resp));
  return Print(out, resp, [id](const v1::CancelResponse&) {
    return StrCat("cancel requested for transfer ", id,
                  " (a transfer that already ended is left as it was)\n");
  });
}

Status RunQos(DaemonClient& client, const Output& out) {
  v1::GetQosResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::GetQos, v1::GetQosRequest(), &resp));
  return Print(out, resp, RenderQos, RenderQosWide);
}

Status RunQosMove(DaemonClient& client, uint64_t session, const std::string& class_name) {
  v1::SetSessionClassRequest req;
  req.set_session(session);
  req.set_class_name(class_name);
  v1::SetSessionClassResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::SetSessionClass, req, &resp));
  std::printf("session %llu is now in class '%s'\n", static_cast<unsigned long long>(session),
              class_name.c_str());
  return OkStatus();
}

Status RunExplain(DaemonClient& client, const Output& out, uint64_t id) {
  v1::ExplainTransferRequest req;
  req.set_transfer(id);
  v1::ExplainTransferResponse resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ExplainTransfer, req, &resp));
  return Print(out, resp, RenderExplain);
}

Status RunCompactCheckpoint(DaemonClient& client, const Output& out, const std::string& memory,
                            const std::string& file) {
  ISO_ASSIGN_OR_RETURN(Session session, Session::Open(client, "isoctl checkpoint-compact"));
  v1::CompactCheckpointRequest req;
  req.set_memory(memory);
  req.set_file(file);
  v1::CompactCheckpointResponse resp;
  ISO_RETURN_IF_ERROR(session.Call(&Stub::CompactCheckpoint, req, &resp));
  return Print(out, resp, [&](const v1::CompactCheckpointResponse& r) {
    return StrCat("merged ", r.deltas(), " delta records (", r.pages_applied(), " pages) into ",
                  memory, ":", file, "\n");
  });
}

Status RunOrphans(DaemonClient& client, const Output& out, const OrphansArgs& args) {
  v1::ListOrphansResponse list;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListOrphans, v1::ListOrphansRequest(), &list));
  if (args.free.empty() && !args.free_all) {
    return Print(out, list, [](const v1::ListOrphansResponse& r) {
      Table t({{"ALLOCATION", Table::Align::kRight},
               {"MEMORY"},
               {"BYTES", Table::Align::kRight},
               {"PUBLISHER"}});
      for (const v1::Orphan& o : r.orphans()) {
        t.AddRow({StrCat(o.allocation()), o.memory(), FormatBytes(o.bytes()),
                  o.uid() < 0 ? std::string("a gRPC client") : StrCat("uid ", o.uid())});
      }
      return t.empty() ? std::string("no orphaned published allocation\n") : t.Render();
    });
  }
  // Every id named must be an orphan before anything is freed: a typo
  // frees nothing.
  auto listed = [&](uint64_t id) {
    return std::any_of(list.orphans().begin(), list.orphans().end(),
                       [id](const v1::Orphan& o) { return o.allocation() == id; });
  };
  for (const uint64_t id : args.free) {
    if (!listed(id)) return NotFound("allocation ", id, " is not an orphan (see isoctl orphans)");
  }
  v1::ListOrphansResponse freed;
  for (const v1::Orphan& o : list.orphans()) {
    const bool named = args.free_all || std::find(args.free.begin(), args.free.end(),
                                                  o.allocation()) != args.free.end();
    if (!named) continue;
    v1::FreeRequest req;
    req.set_allocation(o.allocation());
    v1::FreeResponse resp;
    ISO_RETURN_IF_ERROR(client.Call(&Stub::Free, req, &resp));
    *freed.add_orphans() = o;
  }
  return Print(out, freed, [](const v1::ListOrphansResponse& r) {
    std::string text;
    for (const v1::Orphan& o : r.orphans()) {
      text += StrCat("freed allocation ", o.allocation(), " (", o.bytes(), " bytes of memory '",
                     o.memory(), "')\n");
    }
    return text.empty() ? std::string("no orphan to free\n") : text;
  });
}

Status RunWait(DaemonClient& client, const Output& out, const WaitArgs& args) {
  v1::WaitRequest req;
  req.set_transfer(args.id);
  req.set_timeout_ms(args.timeout_ms);
  // The daemon enforces the wait's own timeout; the call gets the global
  // timeout on top of it to cover the round trip, and no deadline when
  // either is unbounded.
  const auto deadline = args.timeout_ms == 0 || client.timeout().count() == 0
                            ? std::chrono::milliseconds(0)
                            : std::chrono::milliseconds(args.timeout_ms) + client.timeout();
  v1::TransferInfo resp;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::Wait, req, &resp, {.timeout = deadline}));
  ISO_RETURN_IF_ERROR(Print(out, resp, RenderTransfer));
  return TransferOutcome(resp);
}

}  // namespace isometry::isoctl
