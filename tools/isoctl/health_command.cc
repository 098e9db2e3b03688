// `isoctl health`: one verdict over what an operator checks first, for a
// person (a table and a summary line) and for a monitor (the exit code:
// 0 healthy, 4 degraded, 5 unhealthy; 3 as ever when the daemon does not
// answer at all).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/log_escape.h"
#include "tools/isoctl/commands.h"
#include "tools/isoctl/exit_codes.h"
#include "tools/isoctl/format.h"
#include "tools/isoctl/json.h"

namespace isometry::isoctl {

namespace {

using Stub = v1::Isometry::Stub;

enum class Severity { kOk, kWarning, kCritical };

const char* Name(Severity s) {
  switch (s) {
    case Severity::kOk:
      return "ok";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "?";
}

struct Finding {
  std::string check;
  Severity severity = Severity::kOk;
  std::string detail;
};

// A pool this full refuses the next allocations soon; fuller still, now.
constexpr double kPoolWarning = 0.90;
constexpr double kPoolCritical = 0.98;

void CheckPeers(const v1::ListPeersResponse& peers, std::vector<Finding>& out) {
  for (const v1::PeerInfo& p : peers.peers()) {
    Finding f{"peer " + ForLog(p.name(), 96), Severity::kOk, p.state()};
    if (p.state() == "up") {
      f.detail = StrCat("up, round trip ", p.rtt_ms(), " ms");
    } else if (p.state() == "connecting") {
      f.severity = Severity::kWarning;
    } else {
      f.severity = Severity::kCritical;  // down or refused: copies to it fail
    }
    if (f.severity != Severity::kOk && !p.last_error().empty()) {
      f.detail += ": " + p.last_error();
    }
    out.push_back(std::move(f));
  }
}

void CheckMemories(const v1::ListMemoriesResponse& memories, std::vector<Finding>& out) {
  for (const v1::Memory& m : memories.memories()) {
    if (m.pool_capacity() == 0) {
      continue;  // not allocatable: nothing to run out of
    }
    const double used = static_cast<double>(m.pool_used()) / static_cast<double>(m.pool_capacity());
    Finding f{"memory " + m.name(), Severity::kOk,
              StrCat("pool ", FormatBytes(m.pool_used()), " of ", FormatBytes(m.pool_capacity()),
                     " used")};
    if (used >= kPoolCritical) {
      f.severity = Severity::kCritical;
    } else if (used >= kPoolWarning) {
      f.severity = Severity::kWarning;
    }
    out.push_back(std::move(f));
  }
}

void CheckChannels(const v1::ListChannelsResponse& channels, std::vector<Finding>& out) {
  for (const v1::ChannelInfo& c : channels.channels()) {
    Finding f{"channel " + c.name(), Severity::kOk,
              StrCat(c.requests_in_flight(), " in flight, ", FormatRate(c.current_bytes_per_s()))};
    // Requests out and not a byte moved in the last second: a stuck disk, a
    // peer that stopped reading, a client that stopped serving its hops.
    if (c.requests_in_flight() > 0 && c.current_bytes_per_s() == 0) {
      f.severity = Severity::kWarning;
      f.detail = StrCat(c.requests_in_flight(),
                        " requests in flight and no bytes moved in the last second");
    }
    out.push_back(std::move(f));
  }
}

Severity Worst(const std::vector<Finding>& findings) {
  Severity worst = Severity::kOk;
  for (const Finding& f : findings) {
    worst = std::max(worst, f.severity);
  }
  return worst;
}

// The document has every field the table shows: -o wide is the table.
Status Print(const Output& out, const std::vector<Finding>& findings, Severity worst) {
  if (out.format == Format::kJson || out.format == Format::kYaml) {
    Json checks = Json::array();
    for (const Finding& f : findings) {
      checks.push_back({{"check", f.check}, {"state", Name(f.severity)}, {"detail", f.detail}});
    }
    return PrintDocument(out, Json{{"state", Name(worst)}, {"checks", checks}});
  }
  Table table({{"CHECK"}, {"STATE"}, {"DETAIL"}});
  for (const Finding& f : findings) {
    table.AddRow({f.check, Name(f.severity), f.detail});
  }
  const char* verdict = worst == Severity::kOk        ? "healthy"
                        : worst == Severity::kWarning ? "degraded"
                                                      : "unhealthy";
  return PrintText(out, StrCat(table.Render(), verdict, "\n"));
}

}  // namespace

Status RunHealth(DaemonClient& client, const Output& out) {
  v1::StatusResponse status;
  v1::ListPeersResponse peers;
  v1::ListMemoriesResponse memories;
  v1::ListChannelsResponse channels;
  ISO_RETURN_IF_ERROR(client.Call(&Stub::GetStatus, v1::StatusRequest(), &status));
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListPeers, v1::ListPeersRequest(), &peers));
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListMemories, v1::ListMemoriesRequest(), &memories));
  ISO_RETURN_IF_ERROR(client.Call(&Stub::ListChannels, v1::ListChannelsRequest(), &channels));

  std::vector<Finding> findings{
      {"daemon", Severity::kOk,
       StrCat("isometryd ", status.version(), ", up ", FormatDuration(status.uptime_s()), ", ",
              status.sessions(), " sessions")}};
  CheckPeers(peers, findings);
  CheckMemories(memories, findings);
  CheckChannels(channels, findings);
  const Severity worst = Worst(findings);
  ISO_RETURN_IF_ERROR(Print(out, findings, worst));
  size_t bad = 0;
  for (const Finding& f : findings) {
    bad += f.severity == worst ? 1 : 0;
  }
  if (worst == Severity::kCritical) {
    return HealthError(StrCat("unhealthy: ", bad, " critical finding(s)"), kExitUnhealthy);
  }
  if (worst == Severity::kWarning) {
    return HealthError(StrCat("degraded: ", bad, " warning(s)"), kExitDegraded);
  }
  return OkStatus();
}

}  // namespace isometry::isoctl
