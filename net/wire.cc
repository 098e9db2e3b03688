#include "net/wire.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "core/strings.h"

namespace isometry::net {

namespace {

std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

// The certificate's names (DNS subjectAltNames, or its common name), for
// errors that say whose certificate was presented.
std::string NamesOf(X509* cert) {
  std::string out;
  if (auto* sans = static_cast<GENERAL_NAMES*>(
          X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr))) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
      if (g->type != GEN_DNS) continue;
      const ASN1_STRING* s = g->d.dNSName;
      StrAppend(&out, out.empty() ? "" : ", ",
                std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                            static_cast<size_t>(ASN1_STRING_length(s))));
    }
    GENERAL_NAMES_free(sans);
  }
  if (out.empty()) {
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    out = cn;
  }
  return out;
}

bool CertNames(X509* cert, const std::string& name) {
  return X509_check_host(cert, name.data(), name.size(), 0, nullptr) == 1;
}

}  // namespace

// ---- TlsContext ----

Result<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsFiles& files,
                                                       const std::string& node_name) {
  SSL_CTX* raw = SSL_CTX_new(TLS_method());
  if (!raw) return Internal("SSL_CTX_new: ", OpenSslErrors());
  std::shared_ptr<TlsContext> ctx(new TlsContext(raw));
  SSL_CTX_set_min_proto_version(raw, TLS1_3_VERSION);
  // No session tickets: nothing arrives after the handshake but data, which
  // lets the kernel take over both directions.
  SSL_CTX_set_num_tickets(raw, 0);
  // Room for many records per read(2) once read-ahead is on (EndHello,
  // for a peer that does not seal records).
  SSL_CTX_set_default_read_buffer_len(raw, 256 << 10);
  SSL_CTX_set_options(raw, SSL_OP_ENABLE_KTLS | SSL_OP_NO_RENEGOTIATION);
  // Whole writes (a write resumed after WANT_WRITE passes the same
  // buffer again); AES-128-GCM first, the fastest suite with AES-NI.
  SSL_CTX_set_mode(raw, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_ciphersuites(raw,
                           "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                           "TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  ERR_clear_error();
  if (SSL_CTX_load_verify_locations(raw, files.ca_file.c_str(), nullptr) != 1) {
    return InvalidArgument("cluster.tls.ca_file '", files.ca_file,
                           "' is not a readable PEM CA certificate: ", OpenSslErrors());
  }
  if (SSL_CTX_use_certificate_chain_file(raw, files.cert_file.c_str()) != 1) {
    return InvalidArgument("cluster.tls.cert_file '", files.cert_file,
                           "' is not a readable PEM certificate: ", OpenSslErrors());
  }
  EVP_PKEY* key = nullptr;
  if (BIO* in = BIO_new_file(files.key_file.c_str(), "r")) {
    key = PEM_read_bio_PrivateKey(in, nullptr, nullptr, nullptr);
    BIO_free(in);
  }
  if (!key) {
    ERR_clear_error();  // its text may quote the file
    return InvalidArgument("cluster.tls.key_file '", files.key_file,
                           "' is not a readable PEM private key (without a passphrase)");
  }
  const int used = SSL_CTX_use_PrivateKey(raw, key);
  EVP_PKEY_free(key);
  if (used != 1 || SSL_CTX_check_private_key(raw) != 1) {
    ERR_clear_error();
    return InvalidArgument("cluster.tls.key_file '", files.key_file,
                           "' does not match the certificate in '", files.cert_file, "'");
  }
  X509* own = SSL_CTX_get0_certificate(raw);
  if (!CertNames(own, node_name)) {
    return InvalidArgument("the certificate in cluster.tls.cert_file '", files.cert_file,
                           "' is for '", NamesOf(own), "', not this node '", node_name,
                           "' (a node's certificate must name its cluster.node_name)");
  }
  // The own certificate must verify against the CA too, or every peer
  // would refuse it: say so here rather than at each connection.
  X509_STORE_CTX* check = X509_STORE_CTX_new();
  X509_STORE_CTX_init(check, SSL_CTX_get_cert_store(raw), own, nullptr);
  const bool verified = X509_verify_cert(check) == 1;
  const int err = X509_STORE_CTX_get_error(check);
  X509_STORE_CTX_free(check);
  if (!verified) {
    return InvalidArgument("the certificate in cluster.tls.cert_file '", files.cert_file,
                           "' does not verify against cluster.tls.ca_file '", files.ca_file,
                           "': ", X509_verify_cert_error_string(err));
  }
  return ctx;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

// ---- Wire ----

// (Wire's constructor and destructor: wire_records.cc, where Sealed is
// complete.)

void Wire::Shutdown() { ::shutdown(fd_.get(), SHUT_RDWR); }

bool Wire::WaitFor(short events, uint32_t timeout_ms) const {
  pollfd p{fd_.get(), events, 0};
  while (true) {
    const int rc = ::poll(&p, 1, timeout_ms ? static_cast<int>(timeout_ms) : -1);
    if (rc < 0 && errno == EINTR) continue;
    return rc != 0;  // ready, or an error the next call reports
  }
}

Status Wire::TlsError(const char* what, int err) const {
  if (err == SSL_ERROR_ZERO_RETURN) return Unavailable("connection closed by the peer");
  if (err == SSL_ERROR_SYSCALL) {
    const int e = errno;
    return Unavailable(StrCat(what, " (TLS) from ", remote_, ": ",
                              e ? ErrnoString(e) : "connection closed by the peer"));
  }
  return Unavailable(StrCat(what, " (TLS) from ", remote_, ": ", OpenSslErrors()));
}

Status Wire::StartTls(const TlsContext& ctx, bool accepting, const std::string& expect_name,
                      uint32_t timeout_ms) {
  absl::MutexLock lock(&mu_);
  ssl_ = SSL_new(ctx.get());
  if (!ssl_) return Internal("SSL_new: ", OpenSslErrors());
  ::fcntl(fd_.get(), F_SETFL, ::fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
  SSL_set_fd(ssl_, fd_.get());
  if (!accepting) {
    SSL_set1_host(ssl_, expect_name.c_str());
    SSL_set_tlsext_host_name(ssl_, expect_name.c_str());
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    ERR_clear_error();
    const int rc = accepting ? SSL_accept(ssl_) : SSL_connect(ssl_);
    if (rc == 1) break;
    const int err = SSL_get_error(ssl_, rc);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if ((err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) && left.count() > 0) {
      if (WaitFor(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                  static_cast<uint32_t>(left.count()))) {
        continue;
      }
    }
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      return Unavailable("TLS handshake with ", remote_, " timed out after ", timeout_ms, " ms");
    }
    const long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK) {
      return absl::UnauthenticatedError(StrCat("TLS handshake with ", remote_,
                                               " failed: its certificate was refused (",
                                               X509_verify_cert_error_string(verify), ")"));
    }
    return absl::UnauthenticatedError(
        StrCat("TLS handshake with ", remote_, " failed: ", TlsError("handshake", err).message()));
  }
  ktls_send_ = BIO_get_ktls_send(SSL_get_wbio(ssl_)) != 0;
  ktls_recv_ = BIO_get_ktls_recv(SSL_get_rbio(ssl_)) != 0;
  // Read-ahead waits for EndHello: a read of the hello's last frame must
  // not take the sealed records that may follow it into OpenSSL's buffer.
  return OkStatus();
}

bool Wire::PeerIs(const std::string& name) const {
  if (!ssl_) return true;
  absl::MutexLock lock(&mu_);
  X509* cert = SSL_get0_peer_certificate(ssl_);
  return cert && SSL_get_verify_result(ssl_) == X509_V_OK && CertNames(cert, name);
}

Status Wire::Send(struct iovec* iov, int count) {
  if (!ssl_) return SendAll(fd_.get(), iov, count);
  if (send_) return SealedSend(iov, count);
  for (int i = 0; i < count; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    size_t left = iov[i].iov_len;
    while (left > 0) {
      size_t n = 0;
      int rc, err = 0;
      {
        absl::MutexLock lock(&mu_);
        ERR_clear_error();
        rc = SSL_write_ex(ssl_, p, std::min<size_t>(left, 1u << 30), &n);
        if (rc != 1) err = SSL_get_error(ssl_, rc);
      }
      if (rc == 1) {
        p += n;
        left -= n;
      } else if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
        WaitFor(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, 0);
      } else {
        return TlsError("send", err);
      }
    }
  }
  return OkStatus();
}

Status Wire::SendFrame(const FrameHeader& h, const void* payload) {
  iovec iov[2] = {{const_cast<FrameHeader*>(&h), sizeof h},
                  {const_cast<void*>(payload), static_cast<size_t>(h.length)}};
  return Send(iov, h.length ? 2 : 1);
}

Status Wire::Recv(void* data, uint64_t length, uint32_t timeout_ms) {
  auto* p = static_cast<char*>(data);
  if (!ssl_ && !timeout_ms) return RecvAll(fd_.get(), data, length);
  if (recv_) return SealedRecv(p, length, timeout_ms);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto wait = [&](short events) -> bool {
    if (!timeout_ms) return WaitFor(events, 0);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    return left.count() > 0 && WaitFor(events, static_cast<uint32_t>(left.count()));
  };
  while (length > 0) {
    if (!ssl_) {
      if (!wait(POLLIN)) return Unavailable("no answer from ", remote_, " in ", timeout_ms, " ms");
      const ssize_t n =
          ::recv(fd_.get(), p, std::min<uint64_t>(length, kMaxBytesPerCall), MSG_DONTWAIT);
      if (n == 0) return Unavailable("connection closed by ", remote_);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return Unavailable(StrCat("receive from ", remote_, ": ", ErrnoString(errno)));
      }
      p += n;
      length -= static_cast<uint64_t>(n);
      continue;
    }
    size_t n = 0;
    int rc, err = 0;
    {
      absl::MutexLock lock(&mu_);
      ERR_clear_error();
      rc = SSL_read_ex(ssl_, p, std::min<uint64_t>(length, 1u << 30), &n);
      if (rc != 1) err = SSL_get_error(ssl_, rc);
    }
    if (rc == 1) {
      p += n;
      length -= n;
    } else if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      if (!wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) {
        return Unavailable("no answer from ", remote_, " in ", timeout_ms, " ms");
      }
    } else {
      return TlsError("receive", err);
    }
  }
  return OkStatus();
}

Status Wire::RecvFrame(FrameHeader& h, std::string* payload, uint32_t timeout_ms) {
  ISO_RETURN_IF_ERROR(Recv(&h, sizeof h, timeout_ms));
  ISO_RETURN_IF_ERROR(CheckHeader(h));
  if (!payload) return OkStatus();
  if (h.length > kMaxControlPayload) {
    return absl::DataLossError(StrCat("control frame of ", h.length, " bytes"));
  }
  payload->assign(h.length, '\0');
  return Recv(payload->data(), h.length, timeout_ms);
}

Status Wire::Discard(uint64_t length) {
  std::string sink(std::min<uint64_t>(length, 1 << 20), '\0');
  while (length > 0) {
    const uint64_t n = std::min<uint64_t>(length, sink.size());
    ISO_RETURN_IF_ERROR(Recv(sink.data(), n));
    length -= n;
  }
  return OkStatus();
}

}  // namespace isometry::net
