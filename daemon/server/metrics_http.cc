#include "daemon/server/metrics_http.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "config/runtime_config.h"
#include "core/strings.h"
#include "core/unique_fd.h"
#include "daemon/server/metrics_text.h"

namespace isometry {

namespace {

// Why binding `hp` fails, for the error: httplib says only that it did.
std::string BindError(const HostPort& hp) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(hp.port);
  if (int rc = ::getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return gai_strerror(rc);
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
  const UniqueFd fd(::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoString(errno);
  const int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (::bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0) return ErrnoString(errno);
  return "the HTTP server could not listen";
}

class HttplibServer final : public MetricsHttpServer {
 public:
  explicit HttplibServer(Render render) : render_(std::move(render)) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
    // httplib's default is SO_REUSEPORT, which would let a second daemon
    // share the port (scrapes landing on either); SO_REUSEADDR only allows
    // a restart while old connections linger.
    server_.set_socket_options([](socket_t sock) {
      const int on = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    });
    server_.set_read_timeout(5, 0);
    server_.set_write_timeout(5, 0);
    server_.set_keep_alive_timeout(2);
    server_.set_keep_alive_max_count(100);
    server_.set_payload_max_length(64 << 10);
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(render_(), kMetricsContentType);
    });
  }

  ~HttplibServer() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Status Listen(const HostPort& hp, const std::string& listen) {
    if (!server_.bind_to_port(hp.host, hp.port)) {
      return Unavailable("cannot serve metrics on ", listen, ": ", BindError(hp));
    }
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      ended_ = true;
    });
    // stop() before the loop runs would be lost (httplib stops only a
    // running server), and the destructor would wait forever.
    while (!server_.is_running() && !ended_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (ended_) return Internal("the metrics server on ", listen, " stopped at once");
    return OkStatus();
  }

 private:
  Render render_;
  httplib::Server server_;
  std::atomic<bool> ended_{false};
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& listen,
                                                                    Render render) {
  ISO_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(listen));
  auto server = std::make_unique<HttplibServer>(std::move(render));
  ISO_RETURN_IF_ERROR(server->Listen(hp, listen));
  return std::unique_ptr<MetricsHttpServer>(std::move(server));
}

}  // namespace isometry
