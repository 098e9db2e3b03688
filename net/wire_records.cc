// Sealed records of a TLS data connection (the format: wire.h).
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/strings.h"
#include "net/wire.h"

namespace isometry::net {

namespace {

constexpr size_t kRecordPlain = 64 << 10;  // plaintext bytes of a record, at most
constexpr size_t kHeader = 4, kTag = 16;
constexpr size_t kSendBatch = 256 << 10;  // records per send(2), about
constexpr size_t kRecvBuffer = 512 << 10;
constexpr char kLabel[] = "EXPORTER-isometry sealed records";

}  // namespace

struct Wire::Sealed {
  explicit Sealed(bool to_server, uint64_t per_key) : to_server(to_server), per_key(per_key) {}
  ~Sealed() {
    EVP_CIPHER_CTX_free(ctx);
    OPENSSL_cleanse(iv.data(), iv.size());
  }
  const bool to_server;    // the direction: client to server, or back
  const uint64_t per_key;  // records sealed with one key, at most
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  std::array<unsigned char, 12> iv{};
  uint64_t epoch = 0;                // keys derived so far
  uint64_t seq = 0;                  // records under the current key
  std::vector<unsigned char> buf;    // send: records to write; receive: ciphertext read
  size_t begin = 0, end = 0;         // receive: buf[begin, end) not opened yet
  std::vector<unsigned char> plain;  // receive: an opened record larger than asked
  size_t plain_begin = 0, plain_end = 0;

  void Nonce(unsigned char out[12]) const {
    std::memcpy(out, iv.data(), 12);
    for (int i = 0; i < 8; ++i) out[11 - i] ^= static_cast<unsigned char>(seq >> (8 * i));
  }
};

Wire::Wire(UniqueFd fd, std::string remote) : fd_(std::move(fd)), remote_(std::move(remote)) {}

Wire::~Wire() {
  if (ssl_) SSL_free(ssl_);
}

// Key and IV of the direction's next epoch, from the TLS exporter: both
// ends derive them from the handshake's secrets, nothing travels.
Status Wire::Rekey(Sealed& s) {
  unsigned char context[9];
  context[0] = s.to_server ? 'c' : 's';
  for (int i = 0; i < 8; ++i) context[1 + i] = static_cast<unsigned char>(s.epoch >> (8 * i));
  unsigned char material[16 + 12];
  if (SSL_export_keying_material(ssl_, material, sizeof material, kLabel, sizeof kLabel - 1,
                                 context, sizeof context, 1) != 1 ||
      EVP_CipherInit_ex(s.ctx, EVP_aes_128_gcm(), nullptr, material, nullptr,
                        s.to_server == !SSL_is_server(ssl_)) != 1) {
    OPENSSL_cleanse(material, sizeof material);
    return Internal("sealed records with ", remote_, ": no key from the TLS session");
  }
  std::memcpy(s.iv.data(), material + 16, 12);
  OPENSSL_cleanse(material, sizeof material);
  ++s.epoch;
  s.seq = 0;
  return OkStatus();
}

Status Wire::EndHello(bool seal, bool accepting, uint64_t records_per_key) {
  if (!ssl_) return OkStatus();
  absl::MutexLock lock(&mu_);
  // An accepted connection kept small buffers through its hello
  // (AcceptTlsStep): the large one from now on.
  SSL_set_default_read_buffer_len(ssl_, 256 << 10);
  SSL_clear_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
  if (!seal) {
    if (!ktls_recv_) SSL_set_read_ahead(ssl_, 1);  // many records per read(2)
    return OkStatus();
  }
  if (!CanSeal()) return Internal("sealed records over kTLS");
  // The hello's last frame ended a TLS record, and OpenSSL read no
  // further (no read-ahead yet): anything it holds came out of turn.
  if (SSL_has_pending(ssl_)) {
    return absl::DataLossError(StrCat("bytes from ", remote_, " after the hello, in TLS"));
  }
  auto send = std::make_unique<Sealed>(!accepting, records_per_key);
  auto recv = std::make_unique<Sealed>(accepting, records_per_key);
  ISO_RETURN_IF_ERROR(Rekey(*send));
  ISO_RETURN_IF_ERROR(Rekey(*recv));
  send->buf.resize(kSendBatch + kRecordPlain + kHeader + kTag);
  recv->buf.resize(kRecvBuffer);
  recv->plain.resize(kRecordPlain);
  send_ = std::move(send);
  recv_ = std::move(recv);
  return OkStatus();
}

Status Wire::SealedFlush(Sealed& s) {
  size_t done = 0;
  while (done < s.end) {
    const ssize_t n = ::send(fd_.get(), s.buf.data() + done, s.end - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        WaitFor(POLLOUT, 0);
        continue;
      }
      return Unavailable(StrCat("send (TLS) to ", remote_, ": ", ErrnoString(errno)));
    }
    done += static_cast<size_t>(n);
  }
  s.end = 0;
  return OkStatus();
}

Status Wire::SealedSend(struct iovec* iov, int count) {
  Sealed& s = *send_;
  s.end = 0;
  for (int i = 0; i < count; ++i) {
    const auto* p = static_cast<const unsigned char*>(iov[i].iov_base);
    size_t left = iov[i].iov_len;
    while (left > 0) {
      const size_t n = std::min(left, kRecordPlain);
      if (s.end >= kSendBatch) ISO_RETURN_IF_ERROR(SealedFlush(s));
      if (s.seq == s.per_key) {
        absl::MutexLock lock(&mu_);
        ISO_RETURN_IF_ERROR(Rekey(s));
      }
      unsigned char* out = s.buf.data() + s.end;
      const uint32_t length = static_cast<uint32_t>(n);
      std::memcpy(out, &length, kHeader);
      unsigned char nonce[12];
      s.Nonce(nonce);
      int l1 = 0, l2 = 0, l3 = 0;
      const bool ok =
          EVP_EncryptInit_ex(s.ctx, nullptr, nullptr, nullptr, nonce) == 1 &&
          EVP_EncryptUpdate(s.ctx, nullptr, &l1, out, kHeader) == 1 &&
          EVP_EncryptUpdate(s.ctx, out + kHeader, &l2, p, static_cast<int>(n)) == 1 &&
          EVP_EncryptFinal_ex(s.ctx, out + kHeader + l2, &l3) == 1 &&
          static_cast<size_t>(l2) + static_cast<size_t>(l3) == n &&
          EVP_CIPHER_CTX_ctrl(s.ctx, EVP_CTRL_GCM_GET_TAG, kTag, out + kHeader + n) == 1;
      if (!ok) return Internal("sealing a record for ", remote_, " failed");
      ++s.seq;
      s.end += kHeader + n + kTag;
      p += n;
      left -= n;
    }
  }
  return SealedFlush(s);
}

// Until buf[begin, end) holds `need` bytes.
Status Wire::SealedFill(Sealed& s, size_t need, uint32_t timeout_ms) {
  if (s.end - s.begin >= need) return OkStatus();
  if (s.buf.size() - s.begin < need) {
    std::memmove(s.buf.data(), s.buf.data() + s.begin, s.end - s.begin);
    s.end -= s.begin;
    s.begin = 0;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (s.end - s.begin < need) {
    const ssize_t n = ::recv(fd_.get(), s.buf.data() + s.end, s.buf.size() - s.end, MSG_DONTWAIT);
    if (n > 0) {
      s.end += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Unavailable("connection closed by ", remote_);
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      return Unavailable(StrCat("receive (TLS) from ", remote_, ": ", ErrnoString(errno)));
    }
    uint32_t wait = 0;
    if (timeout_ms) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return Unavailable("no answer from ", remote_, " in ", timeout_ms, " ms");
      }
      wait = static_cast<uint32_t>(left.count());
    }
    WaitFor(POLLIN, wait);
  }
  return OkStatus();
}

Status Wire::SealedRecv(char* p, uint64_t length, uint32_t timeout_ms) {
  Sealed& s = *recv_;
  while (length > 0) {
    if (s.plain_begin < s.plain_end) {
      const size_t n = std::min<uint64_t>(length, s.plain_end - s.plain_begin);
      std::memcpy(p, s.plain.data() + s.plain_begin, n);
      s.plain_begin += n;
      p += n;
      length -= n;
      continue;
    }
    ISO_RETURN_IF_ERROR(SealedFill(s, kHeader, timeout_ms));
    uint32_t n = 0;
    std::memcpy(&n, s.buf.data() + s.begin, kHeader);
    if (n == 0 || n > kRecordPlain) {
      return absl::DataLossError(
          StrCat("sealed record of ", n, " bytes from ", remote_, " (at most ", kRecordPlain, ")"));
    }
    ISO_RETURN_IF_ERROR(SealedFill(s, kHeader + n + kTag, timeout_ms));
    if (s.seq == s.per_key) {
      absl::MutexLock lock(&mu_);
      ISO_RETURN_IF_ERROR(Rekey(s));
    }
    unsigned char* in = s.buf.data() + s.begin;
    // Straight into the caller's buffer when the record fits: the caller
    // sees none of it unless the tag holds.
    unsigned char* out = n <= length ? reinterpret_cast<unsigned char*>(p) : s.plain.data();
    unsigned char nonce[12];
    s.Nonce(nonce);
    int l1 = 0, l2 = 0, l3 = 0;
    const bool ok = EVP_DecryptInit_ex(s.ctx, nullptr, nullptr, nullptr, nonce) == 1 &&
                    EVP_DecryptUpdate(s.ctx, nullptr, &l1, in, kHeader) == 1 &&
                    EVP_DecryptUpdate(s.ctx, out, &l2, in + kHeader, static_cast<int>(n)) == 1 &&
                    EVP_CIPHER_CTX_ctrl(s.ctx, EVP_CTRL_GCM_SET_TAG, kTag, in + kHeader + n) == 1 &&
                    EVP_DecryptFinal_ex(s.ctx, out + l2, &l3) == 1;
    if (!ok) {
      return absl::DataLossError(
          StrCat("a sealed record from ", remote_, " failed authentication (altered or forged)"));
    }
    ++s.seq;
    s.begin += kHeader + n + kTag;
    if (out == s.plain.data()) {
      s.plain_begin = 0;
      s.plain_end = n;
    } else {
      p += n;
      length -= n;
    }
  }
  return OkStatus();
}

}  // namespace isometry::net
