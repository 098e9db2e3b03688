// One data connection's byte stream: plain TCP, or mutual TLS 1.3 over it
// (OpenSSL; the kernel's kTLS where it offers it).
//
// TLS: both ends present a certificate signed by the cluster's CA; a
// node's identity is its certificate's name (a DNS subjectAltName, or the
// common name when it has none), which must be the node's cluster name.
//
// Threading: a Wire is read by one thread and written by another at once
// (a connection's reader and writer). Plain TCP needs nothing for that;
// with TLS the socket is non-blocking and every OpenSSL call on the
// connection is made under one mutex, never held across a wait, because
// one SSL object is not safe for concurrent use.
//
// Plain sends never raise SIGPIPE; TLS sends go through OpenSSL's write(2),
// so a process using TLS wires ignores SIGPIPE (isometryd does).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "channels/tcp/frame.h"
#include "core/status.h"
#include "core/unique_fd.h"

struct ssl_ctx_st;
struct ssl_st;

namespace isometry::net {

// Where a node's TLS material lives (PEM files). All empty: no TLS.
struct TlsFiles {
  std::string ca_file;    // the CA that signs every node's certificate
  std::string cert_file;  // this node's certificate (chain)
  std::string key_file;   // its private key; never logged
  bool enabled() const { return !ca_file.empty(); }
};

// An SSL_CTX for both roles (connecting and accepting), TLS 1.3 only,
// peer certificates required and verified against the CA. Immutable after
// Create; shared by every connection.
class TlsContext {
 public:
  // Loads and checks the files: the key must match the certificate, and
  // the certificate must name `node_name`. Errors name the file.
  static Result<std::shared_ptr<TlsContext>> Create(const TlsFiles& files,
                                                    const std::string& node_name);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  ssl_ctx_st* get() const { return ctx_; }

 private:
  explicit TlsContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* const ctx_;
};

class Wire {
 public:
  // `remote`: the other end's address, for log lines and errors.
  Wire(UniqueFd fd, std::string remote);
  ~Wire();
  Wire(const Wire&) = delete;
  Wire& operator=(const Wire&) = delete;

  int fd() const { return fd_.get(); }
  const std::string& remote() const { return remote_; }
  bool tls() const { return ssl_ != nullptr; }
  // Whether the kernel encrypts (kTLS) each direction; false without TLS.
  bool ktls_send() const { return ktls_send_; }
  bool ktls_recv() const { return ktls_recv_; }

  // The TLS handshake, within `timeout_ms`. Connecting: the server's
  // certificate must name `expect_name`. Accepting: any certificate the CA
  // signed; check its name with PeerIs() once the peer says who it is.
  Status StartTls(const TlsContext& ctx, bool accepting, const std::string& expect_name,
                  uint32_t timeout_ms) ABSL_LOCKS_EXCLUDED(mu_);
  // True when the peer's verified certificate names `name` (always true
  // without TLS).
  bool PeerIs(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);

  // Whole-buffer I/O. `timeout_ms` bounds a receive while the connection
  // says hello (0: wait for ever, as established connections do).
  Status Send(struct iovec* iov, int count) ABSL_LOCKS_EXCLUDED(mu_);
  Status SendFrame(const FrameHeader& h, const void* payload = nullptr);
  Status Recv(void* data, uint64_t length, uint32_t timeout_ms = 0) ABSL_LOCKS_EXCLUDED(mu_);
  Status RecvFrame(FrameHeader& h, std::string* payload, uint32_t timeout_ms = 0);
  Status Discard(uint64_t length);
  // Wakes both directions for good (the reader and writer then fail).
  void Shutdown();

 private:
  // Waits until the socket is ready for `events`; false on timeout.
  bool WaitFor(short events, uint32_t timeout_ms) const;
  Status TlsError(const char* what, int err) const;

  UniqueFd fd_;
  const std::string remote_;
  mutable absl::Mutex mu_;
  ssl_st* ssl_ = nullptr;  // set once by StartTls, before the threads start
  bool ktls_send_ = false, ktls_recv_ = false;
};

}  // namespace isometry::net
