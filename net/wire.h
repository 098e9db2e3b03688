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
// Sealed records (wire_records.cc): without kTLS, a TLS connection whose
// two ends agree in the hello leaves OpenSSL's record layer once the hello
// is done. Its bytes then travel as AES-128-GCM records keyed from the TLS
// handshake (RFC 8446 exporter, one key per direction and per 2^20
// records): a record is a 4-byte plaintext length (the AAD), the
// ciphertext (at most 64 KiB) and a 16-byte tag; its nonce is the
// direction's IV XOR the record's sequence number. Writes seal straight
// from the caller's memory and send up to 256 KiB of records per system
// call; reads open a record straight into the caller's buffer when it
// fits, and hand back no byte of a record before its tag is verified.
// Each direction has its own state: no lock on the data path.
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
#include "core/status.h"
#include "core/unique_fd.h"
#include "net/frame.h"

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

// Whether a TLS server answers at `address` within `timeout_ms`: a client
// handshake that trusts any certificate gets the server's. Tells "the peer
// requires TLS" from an outage, for a node without TLS.
bool AnswersTls(const std::string& address, uint32_t timeout_ms);

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
  // Whether this TLS connection may use sealed records (no kTLS either
  // way), and whether it does (after EndHello).
  bool CanSeal() const { return ssl_ && !ktls_send_ && !ktls_recv_; }
  bool sealed() const { return send_ != nullptr; }

  // The TLS handshake, within `timeout_ms`. Connecting: the server's
  // certificate must name `expect_name`. Accepting: any certificate the CA
  // signed; check its name with PeerIs() once the peer says who it is.
  Status StartTls(const TlsContext& ctx, bool accepting, const std::string& expect_name,
                  uint32_t timeout_ms) ABSL_LOCKS_EXCLUDED(mu_);
  // True when the peer's verified certificate names `name` (always true
  // without TLS).
  bool PeerIs(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);
  // The hello is over (both ends at the same point of the stream): with
  // `seal`, the following bytes are sealed records (`accepting` as in
  // StartTls; a new key every `records_per_key` records); without,
  // OpenSSL reads ahead many records per system call. No-op without TLS.
  Status EndHello(bool seal, bool accepting, uint64_t records_per_key = 1ull << 20)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Whole-buffer I/O. `timeout_ms` bounds a receive while the connection
  // says hello (0: wait for ever, as established connections do).
  Status Send(struct iovec* iov, int count) ABSL_LOCKS_EXCLUDED(mu_);
  Status SendFrame(const FrameHeader& h, const void* payload = nullptr);
  Status Recv(void* data, uint64_t length, uint32_t timeout_ms = 0) ABSL_LOCKS_EXCLUDED(mu_);
  Status RecvFrame(FrameHeader& h, std::string* payload, uint32_t timeout_ms = 0);
  Status Discard(uint64_t length);
  // Wakes both directions for good (the reader and writer then fail).
  void Shutdown();

  // ---- The accepting side's hello on a non-blocking socket ----
  // (wire_nonblocking.cc; one thread, the data port's event loop, calls
  // these until the hello is over.) What a step waits for next.
  enum class Want { kNothing, kRead, kWrite };
  // One step of the TLS handshake as the accepting end: kNothing once it
  // is done; an error refuses the connection. The socket must be
  // non-blocking. Until EndHello, OpenSSL keeps small buffers.
  Result<Want> AcceptTlsStep(const TlsContext& ctx) ABSL_LOCKS_EXCLUDED(mu_);
  // Up to `length` bytes that have arrived, without waiting: their count;
  // 0 when none has (`want` then says what to wait for).
  Result<size_t> RecvNow(void* data, size_t length, Want& want) ABSL_LOCKS_EXCLUDED(mu_);
  // A whole frame without waiting (a hello's frames fit in any socket's
  // send buffer); an error when the socket does not take it all now.
  Status SendFrameNow(const FrameHeader& h, const void* payload = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Waits until the socket is ready for `events`; false on timeout.
  bool WaitFor(short events, uint32_t timeout_ms) const;
  Status TlsError(const char* what, int err) const;
  // wire_records.cc.
  struct Sealed;
  Status Rekey(Sealed& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status SealedSend(struct iovec* iov, int count);
  Status SealedFlush(Sealed& s);
  Status SealedRecv(char* p, uint64_t length, uint32_t timeout_ms);
  Status SealedFill(Sealed& s, size_t need, uint32_t timeout_ms);

  UniqueFd fd_;
  const std::string remote_;
  mutable absl::Mutex mu_;
  ssl_st* ssl_ = nullptr;  // set once by StartTls, before the threads start
  bool ktls_send_ = false, ktls_recv_ = false;
  // Set once by EndHello, before the threads start; each then used by
  // one thread only (the writer, the reader).
  std::unique_ptr<Sealed> send_, recv_;
};

}  // namespace isometry::net
