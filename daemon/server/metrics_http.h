// The HTTP side of the metrics endpoint ([metrics] in the config): GET (or
// HEAD) /metrics answers `render()` as Prometheus text; any other path or
// method gets 404. Plain HTTP with no authentication: bind it to loopback
// or a management network (docs/reference/metrics.md, "Metrics").
//
// Threads: one, which polls the listener and every connection without
// blocking on any of them: a scrape (rendered in well under a
// millisecond) never waits behind another client, however slowly that
// one sends. Bounds (Limits): connections open at once (a new one beyond
// closes the oldest), the time a connection has to send its whole request
// (kMaxRequestBytes at most) and, again, to take its answer; each answer
// closes its connection (no keep-alive).
//
// Lifetime: Start either returns a server that is listening or an error
// naming the address (a port in use: "Address already in use"); the
// destructor stops listening, closes every connection and joins the
// thread, so whatever `render` uses must outlive the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"

namespace isometry {

class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;
  static constexpr size_t kMaxRequestBytes = 8192;  // request line and headers

  struct Limits {
    uint32_t max_connections = 64;            // metrics.max_connections
    std::chrono::milliseconds timeout{2000};  // metrics.request_timeout_ms
  };

  // `listen`: "host:port" or "[v6]:port", already validated by the config.
  static Result<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen, Render render,
                                                          Limits limits);
  virtual ~MetricsHttpServer() = default;

 protected:
  MetricsHttpServer() = default;
};

}  // namespace isometry
