// The HTTP side of the metrics endpoint ([metrics] in the config): GET
// /metrics answers `render()` as Prometheus text; any other path or method
// gets 404. Plain HTTP with no authentication: bind it to loopback or a
// management network (README, Metrics).
//
// Threads: one accepts, kThreads answer (a scrape renders in well under a
// millisecond); a slow client is cut off by the read and write timeouts.
//
// Lifetime: Start either returns a server that is listening or an error
// naming the address (a port in use: "Address already in use"); the
// destructor stops listening and waits for requests being answered, so
// whatever `render` uses must outlive the server.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"

namespace isometry {

class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;
  static constexpr int kThreads = 2;

  // `listen`: "host:port" or "[v6]:port", already validated by the config.
  static Result<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen, Render render);
  virtual ~MetricsHttpServer() = default;

 protected:
  MetricsHttpServer() = default;
};

}  // namespace isometry
