// `isoctl top`: a refreshing view of channels and transfers in flight; the
// full screen (top_screen.h) on a terminal, else frames printed one after
// another.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <optional>
#include <thread>

#include "tools/isoctl/commands.h"
#include "tools/isoctl/json.h"
#include "tools/isoctl/render.h"
#include "tools/isoctl/top_screen.h"
#include "tools/isoctl/watch.h"

namespace isometry::isoctl {

namespace {

using Stub = v1::Isometry::Stub;

std::string Clock() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

}  // namespace

Status RunTop(DaemonClient& client, const Output& out, const TopArgs& args) {
  StopSignals signals;
  if (!out.json && !args.once && FullScreenPossible()) {
    if (std::optional<Status> s = RunTopScreen(client, args, StopFlag())) {
      return *s;
    }
    // curses does not know this terminal: frames, as on a pipe.
  }
  const bool tty = !out.json && !args.once && ::isatty(STDOUT_FILENO);
  const int iterations = args.once ? 1 : args.iterations;
  for (int i = 0; iterations == 0 || i < iterations; ++i) {
    if (i > 0) {
      SleepUnlessStopped(std::chrono::milliseconds(args.interval_ms));
    }
    if (StopRequested()) {
      break;
    }
    v1::StatusResponse status;
    v1::ListChannelsResponse channels;
    v1::ListTransfersResponse transfers;
    ISO_RETURN_IF_ERROR(client.Call(&Stub::GetStatus, v1::StatusRequest(), &status));
    ISO_RETURN_IF_ERROR(client.Call(&Stub::ListChannels, v1::ListChannelsRequest(), &channels));
    ISO_RETURN_IF_ERROR(client.Call(&Stub::ListTransfers, v1::ListTransfersRequest(), &transfers));
    if (out.json) {
      // One JSON Lines document a frame, stamped, so a consumer can plot it.
      const Json frame = {{"time", UtcStamp()},
                          {"status", ToJsonValue(status)},
                          {"channels", ToJsonValue(channels)["channels"]},
                          {"transfers", ToJsonValue(transfers)["transfers"]}};
      ISO_RETURN_IF_ERROR(PrintJson(frame, JsonStyle::kLine));
      continue;
    }
    // The whole frame is written at once, so a redraw does not flicker.
    std::string frame = tty ? "\x1b[H\x1b[2J" : (i > 0 ? "\n" : "");
    frame += "--- " + Clock() + "  unix:" + client.socket() + "  every " +
             std::to_string(args.interval_ms) + " ms" + (tty ? "  (Ctrl-C to quit)" : "") + "\n";
    frame += RenderStatusLine(status) + "\n";
    frame += RenderChannels(channels) + "\n";
    frame += RenderTransfers(transfers);
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
  }
  return OkStatus();
}

}  // namespace isometry::isoctl
