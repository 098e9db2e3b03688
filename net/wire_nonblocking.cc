// The accepting side's hello on a non-blocking socket (wire.h): what the
// data port's event loop (hello_acceptor.h) drives, one step per readiness
// event, so a connection that says nothing holds no thread.
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/strings.h"
#include "net/frame.h"
#include "net/wire.h"

namespace isometry::net {

bool AnswersTls(const std::string& address, uint32_t timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Result<UniqueFd> fd = ConnectTo(address, timeout_ms);
  if (!fd.ok()) return false;
  ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        &SSL_CTX_free);
  if (!ctx) return false;
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), &SSL_free);
  if (!ssl) return false;
  SSL_set_fd(ssl.get(), fd->get());
  bool answered = false;
  while (true) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl.get());
    answered = rc == 1 || SSL_get0_peer_certificate(ssl.get()) != nullptr;
    const int err = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl.get(), rc);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    if (answered || (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) || left <= 0) {
      break;
    }
    pollfd p{fd->get(), static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
  }
  ERR_clear_error();
  return answered;
}

Result<Wire::Want> Wire::AcceptTlsStep(const TlsContext& ctx) {
  absl::MutexLock lock(&mu_);
  if (!ssl_) {
    ssl_ = SSL_new(ctx.get());
    if (!ssl_) {
      ERR_clear_error();
      return absl::ResourceExhaustedError("out of memory for a TLS connection (SSL_new)");
    }
    // Small buffers, and none while idle, until the peer proved who it is
    // (EndHello gives the large read buffer back).
    SSL_set_default_read_buffer_len(ssl_, 0);
    SSL_set_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
    SSL_set_fd(ssl_, fd_.get());
  }
  ERR_clear_error();
  const int rc = SSL_accept(ssl_);
  if (rc == 1) {
    ktls_send_ = BIO_get_ktls_send(SSL_get_wbio(ssl_)) != 0;
    ktls_recv_ = BIO_get_ktls_recv(SSL_get_rbio(ssl_)) != 0;
    return Want::kNothing;
  }
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ) return Want::kRead;
  if (err == SSL_ERROR_WANT_WRITE) return Want::kWrite;
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) {
    ERR_clear_error();
    return absl::UnauthenticatedError(StrCat("TLS handshake with ", remote_,
                                             " failed: its certificate was refused (",
                                             X509_verify_cert_error_string(verify), ")"));
  }
  return absl::UnauthenticatedError(
      StrCat("TLS handshake with ", remote_, " failed: ", TlsError("handshake", err).message()));
}

Result<size_t> Wire::RecvNow(void* data, size_t length, Want& want) {
  want = Want::kNothing;
  if (!ssl_) {
    while (true) {
      const ssize_t n = ::recv(fd_.get(), data, length, MSG_DONTWAIT);
      if (n > 0) return static_cast<size_t>(n);
      if (n == 0) return Unavailable("connection closed by ", remote_);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        want = Want::kRead;
        return 0;
      }
      return Unavailable(StrCat("receive from ", remote_, ": ", ErrnoString(errno)));
    }
  }
  absl::MutexLock lock(&mu_);
  ERR_clear_error();
  size_t n = 0;
  const int rc = SSL_read_ex(ssl_, data, length, &n);
  if (rc == 1) return n;
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    want = err == SSL_ERROR_WANT_READ ? Want::kRead : Want::kWrite;
    return 0;
  }
  return TlsError("receive", err);
}

Status Wire::SendFrameNow(const FrameHeader& h, const void* payload) {
  std::string bytes(sizeof h + h.length, '\0');
  std::memcpy(bytes.data(), &h, sizeof h);
  if (h.length) std::memcpy(bytes.data() + sizeof h, payload, h.length);
  if (!ssl_) {
    const ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(bytes.size())) return OkStatus();
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unavailable(StrCat("send to ", remote_, ": ", ErrnoString(errno)));
    }
    return Unavailable("send to ", remote_, ": its socket takes no more (it reads nothing)");
  }
  absl::MutexLock lock(&mu_);
  ERR_clear_error();
  size_t n = 0;
  const int rc = SSL_write_ex(ssl_, bytes.data(), bytes.size(), &n);
  if (rc == 1 && n == bytes.size()) return OkStatus();
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    return Unavailable("send to ", remote_, ": its socket takes no more (it reads nothing)");
  }
  return TlsError("send", err);
}

}  // namespace isometry::net
