#include "daemon/node/checkpoint_files.h"

#include <absl/status/status.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "core/random.h"
#include "core/strings.h"
#include "daemon/runtime/beneath.h"
#include "daemon/runtime/disk_endpoint.h"
#include "daemon/runtime/disk_memory.h"

namespace isometry {
namespace {

constexpr size_t kSecretHex = 64;  // 32 random bytes, hex

// "a//./b/" -> "a/b": one spelling per file, for the chain's key.
std::string Normalised(const std::string& file) {
  std::string out;
  size_t start = 0;
  while (start <= file.size()) {
    const size_t end = std::min(file.find('/', start), file.size());
    const std::string_view part(file.data() + start, end - start);
    if (!part.empty() && part != ".") {
      if (!out.empty()) out += '/';
      out += part;
    }
    start = end + 1;
  }
  return out;
}

// Opens one file of the checkpoint in `parent` (a directory fd beneath the
// memory's), creating it 0600 (and giving it to the owner's uid) with
// `create`.
Result<UniqueFd> OpenOne(const DiskMemory& disk, int parent, const std::string& name, bool create,
                         const CheckpointOwner& owner, const std::string& shown, uint64_t& bytes,
                         uid_t& uid) {
  const int flags = O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC;
  bool created = false;
  UniqueFd fd;
  for (int attempt = 0; attempt < 4 && !fd.valid(); ++attempt) {
    fd.reset(::openat(parent, name.c_str(), flags));
    if (fd.valid() || errno != ENOENT || !create) break;
    // O_EXCL with mode 0600: nobody else can open it between its creation
    // and a chmod (there is none).
    fd.reset(::openat(parent, name.c_str(), flags | O_CREAT | O_EXCL, 0600));
    created = fd.valid();
    if (!fd.valid() && errno != EEXIST) break;
  }
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT) return NotFound(shown, " does not exist");
    if (err == ELOOP) {
      return PermissionDenied(shown, " is a symbolic link; checkpoints refuse links");
    }
    if (err == EEXIST) {
      return absl::AbortedError(StrCat(shown, " was created and removed meanwhile; retry"));
    }
    return Internal("open ", shown, ": ", ErrnoString(err));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Internal("fstat ", shown, ": ", ErrnoString(errno));
  if (!S_ISREG(st.st_mode) || (st.st_nlink > 1 && !disk.allow_hard_links())) {
    return PermissionDenied(shown, " is not a regular file with one link");
  }
  const uid_t daemon = ::geteuid();
  const uid_t want = owner.uid.value_or(daemon);
  if (created) {
    // Root gives the file to the session's uid; a daemon that may not
    // (the systemd unit's user) keeps it, mode 0600 either way.
    if (want != daemon && daemon == 0) {
      if (::fchown(fd.get(), want, static_cast<gid_t>(-1)) != 0) {
        return Internal("chown ", shown, " to uid ", want, ": ", ErrnoString(errno));
      }
      st.st_uid = want;
    }
  } else if (st.st_uid != want && !(st.st_uid == daemon && (daemon != 0 || want == daemon))) {
    // Where the daemon can give files away (root), a session may use only
    // its own uid's; elsewhere every checkpoint file is the daemon's.
    return PermissionDenied(
        shown, " belongs to uid ", st.st_uid, "; this session's checkpoints are ",
        owner.uid ? StrCat("uid ", *owner.uid, "'s") : std::string("the daemon's (gRPC session)"),
        " (a checkpoint file is used only by the uid that made it)");
  } else if ((st.st_mode & 077) != 0) {
    ::fchmod(fd.get(), 0600);  // made before checkpoints had owners: close it now
  }
  bytes = static_cast<uint64_t>(st.st_size);
  uid = st.st_uid;
  return fd;
}

class ChainMac final : public active::DeltaMac {
 public:
  explicit ChainMac(const std::string& key) : mac_(EVP_MAC_fetch(nullptr, "HMAC", nullptr)) {
    if (mac_ != nullptr) base_ = EVP_MAC_CTX_new(mac_);
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_END};
    if (base_ == nullptr || EVP_MAC_init(base_, reinterpret_cast<const unsigned char*>(key.data()),
                                         key.size(), params) != 1) {
      failed_ = true;
    }
  }
  ~ChainMac() override {
    EVP_MAC_CTX_free(ctx_);
    EVP_MAC_CTX_free(base_);
    EVP_MAC_free(mac_);
  }
  ChainMac(const ChainMac&) = delete;
  ChainMac& operator=(const ChainMac&) = delete;

  void Start() override {
    EVP_MAC_CTX_free(ctx_);
    ctx_ = failed_ ? nullptr : EVP_MAC_CTX_dup(base_);
  }
  void Update(const void* data, size_t n) override {
    if (ctx_ != nullptr && n > 0) {
      if (EVP_MAC_update(ctx_, static_cast<const unsigned char*>(data), n) != 1) {
        EVP_MAC_CTX_free(ctx_);
        ctx_ = nullptr;
      }
    }
  }
  // A MAC that could not be computed is all ones: never a record's (and
  // never equal to what a working one computes, in practice).
  active::DeltaMacValue Finish() override {
    active::DeltaMacValue out;
    out.fill(std::byte{0xFF});
    size_t len = 0;
    if (ctx_ == nullptr ||
        EVP_MAC_final(ctx_, reinterpret_cast<unsigned char*>(out.data()), &len, out.size()) != 1 ||
        len != out.size()) {
      out.fill(std::byte{0xFF});
    }
    EVP_MAC_CTX_free(ctx_);
    ctx_ = nullptr;
    return out;
  }

 private:
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* base_ = nullptr;
  EVP_MAC_CTX* ctx_ = nullptr;
  bool failed_ = false;
};

std::string HmacSha256(const std::string& key, const std::string& message) {
  ChainMac m(key);
  m.Start();
  m.Update(message.data(), message.size());
  const active::DeltaMacValue v = m.Finish();
  return std::string(reinterpret_cast<const char*>(v.data()), v.size());
}

Result<std::string> LoadOrCreateSecret(const std::string& state_dir) {
  const std::string path = state_dir + "/checkpoint.key";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid() && errno == ENOENT) {
    UniqueFd made(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (made.valid()) {
      const std::string secret = RandomHex(kSecretHex / 2);
      ISO_RETURN_IF_ERROR(PWriteAll(made.get(), reinterpret_cast<const std::byte*>(secret.data()),
                                    secret.size(), 0, path));
      if (::fsync(made.get()) != 0) return Internal("fsync ", path, ": ", ErrnoString(errno));
      return secret;
    }
    if (errno != EEXIST) {
      return FailedPrecondition("cannot create the checkpoint key ", path, ": ",
                                ErrnoString(errno));
    }
    fd.reset(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!fd.valid()) {
    return FailedPrecondition("cannot read the checkpoint key ", path, ": ", ErrnoString(errno));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Internal("fstat ", path, ": ", ErrnoString(errno));
  if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 || st.st_uid != ::geteuid()) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return FailedPrecondition("the checkpoint key ", path, " must be a regular file of the ",
                              "daemon's uid with mode 0600 (it has mode ", mode, ", uid ",
                              st.st_uid, "): chmod 600 it, or remove it (every delta chain ",
                              "then needs a full checkpoint)");
  }
  std::string secret(kSecretHex, '\0');
  if (static_cast<uint64_t>(st.st_size) != kSecretHex) {
    return FailedPrecondition("the checkpoint key ", path, " holds ", st.st_size, " bytes, not ",
                              kSecretHex, " (being written by another daemon? ",
                              "remove it if not)");
  }
  ISO_RETURN_IF_ERROR(
      PReadAll(fd.get(), reinterpret_cast<std::byte*>(secret.data()), kSecretHex, 0, path));
  return secret;
}

}  // namespace

Result<CheckpointFiles> CheckpointFiles::Open(const DiskMemory& disk, const std::string& file,
                                              bool create, const CheckpointOwner& owner,
                                              bool exclusive) {
  // The rules of DSK instance names (absolute names and `..` refused).
  if (Status s = CheckRelativePath(file); !s.ok()) {
    return Status(s.code(), StrCat("checkpoint file: ", s.message()));
  }
  CheckpointFiles f;
  f.memory = disk.name();
  f.name = Normalised(file);
  f.shown = StrCat(disk.name(), ":", file);
  f.shown_delta = f.shown + ".delta";
  if (f.name.empty()) return InvalidArgument("checkpoint file '", file, "' names no file");
  const size_t slash = f.name.rfind('/');
  const std::string leaf = slash == std::string::npos ? f.name : f.name.substr(slash + 1);
  UniqueFd parent;
  if (slash != std::string::npos) {
    ISO_ASSIGN_OR_RETURN(
        parent, OpenBeneath(disk.dir_fd(), f.name.substr(0, slash), O_PATH | O_DIRECTORY, f.shown));
  }
  const int dir = parent.valid() ? parent.get() : disk.dir_fd();
  ISO_ASSIGN_OR_RETURN(f.base,
                       OpenOne(disk, dir, leaf, create, owner, f.shown, f.base_bytes, f.owner_uid));
  uid_t delta_uid = 0;
  // A base without a chain is a valid checkpoint (a full one, or one
  // written before chains existed): the chain is created empty.
  ISO_ASSIGN_OR_RETURN(f.delta, OpenOne(disk, dir, leaf + ".delta", true, owner, f.shown_delta,
                                        f.delta_bytes, delta_uid));
  if (::flock(f.delta.get(), (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::AbortedError(StrCat("another checkpoint, restore or compaction is using ",
                                       f.shown, "; retry when it has finished"));
    }
    return Internal("flock ", f.shown_delta, ": ", ErrnoString(errno));
  }
  return f;
}

Result<std::shared_ptr<const std::string>> CheckpointSecret(const std::string& state_dir) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const std::string>>* secrets =
      new std::map<std::string, std::shared_ptr<const std::string>>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = secrets->find(state_dir);
  if (it != secrets->end()) return it->second;
  ISO_ASSIGN_OR_RETURN(std::string secret, LoadOrCreateSecret(state_dir));
  auto shared = std::make_shared<const std::string>(std::move(secret));
  secrets->emplace(state_dir, shared);
  return shared;
}

std::unique_ptr<active::DeltaMac> MakeChainMac(const std::string& secret,
                                               const CheckpointFiles& f) {
  // Each part is length-prefixed: no two identities share a message.
  std::string identity = "isometry checkpoint chain v2";
  for (const std::string& part : {f.memory, f.name, StrCat("uid ", f.owner_uid)}) {
    StrAppend(&identity, "\n", part.size(), ":", part);
  }
  return std::make_unique<ChainMac>(HmacSha256(secret, identity));
}

Status PWriteAll(int fd, const std::byte* data, uint64_t n, uint64_t offset,
                 const std::string& shown) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return Internal("checkpoint write of ", n, " bytes at offset ", offset, " of ", shown, ": ",
                      w < 0 ? ErrnoString(errno) : std::string("no progress"));
    }
    data += w;
    offset += static_cast<uint64_t>(w);
    n -= static_cast<uint64_t>(w);
  }
  return OkStatus();
}

Status PReadAll(int fd, std::byte* data, uint64_t n, uint64_t offset, const std::string& shown) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, data, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      return Internal("checkpoint read at offset ", offset, " of ", shown, ": ",
                      ErrnoString(errno));
    }
    if (r == 0) {
      return absl::DataLossError(
          StrCat(shown, " ends at offset ", offset, " with ", n, " bytes still expected"));
    }
    data += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
  return OkStatus();
}

Status SyncData(int fd, const std::string& shown) {
  if (::fdatasync(fd) != 0) return Internal("fdatasync ", shown, ": ", ErrnoString(errno));
  return OkStatus();
}

Result<active::DeltaWalk> WalkChain(const CheckpointFiles& f, uint64_t image_bytes,
                                    uint64_t max_records, active::DeltaMac& mac,
                                    const active::DeltaPageSink& sink) {
  const int fd = f.delta.get();
  auto read = [&](uint64_t offset, std::byte* out, uint64_t n) {
    return PReadAll(fd, out, n, offset, f.shown_delta);
  };
  auto w = active::WalkDeltaChain(f.delta_bytes, read, image_bytes, max_records, mac, sink);
  if (!w.ok()) return Status(w.status().code(), StrCat(f.shown_delta, ": ", w.status().message()));
  return w;
}

Result<active::DeltaWalk> CompactDeltaChain(CheckpointFiles& f, uint64_t max_records,
                                            active::DeltaMac& mac, bool* base_written) {
  if (base_written != nullptr) *base_written = false;
  if (f.delta_bytes == 0) return active::DeltaWalk{};
  // First the whole chain is verified, nothing written; then it is walked
  // again into the base (the files are locked against other checkpoint
  // calls, and a chain that changed anyway fails the second walk's checks).
  ISO_ASSIGN_OR_RETURN(active::DeltaWalk checked, WalkChain(f, f.base_bytes, max_records, mac));
  const int base = f.base.get();
  if (base_written != nullptr) *base_written = true;
  auto write = [&](uint64_t page, const std::byte* data, uint64_t n) {
    return PWriteAll(base, data, n, page * active::kCheckpointPage, f.shown);
  };
  auto applied = WalkChain(f, f.base_bytes, max_records, mac, write);
  if (!applied.ok()) {
    return Status(applied.status().code(),
                  StrCat("the delta chain changed while it was merged (the base may hold part ",
                         "of it): ", applied.status().message()));
  }
  (void)checked;
  ISO_RETURN_IF_ERROR(SyncData(base, f.shown));
  if (::ftruncate(f.delta.get(), 0) != 0) {
    return Internal("truncate ", f.shown_delta, ": ", ErrnoString(errno));
  }
  ISO_RETURN_IF_ERROR(SyncData(f.delta.get(), f.shown_delta));
  f.delta_bytes = 0;
  return applied;
}

std::string CheckpointMarks::KeyOf(const CheckpointFiles& f) {
  // A NUL, which no file name holds, between memory and name.
  return StrCat(f.memory, std::string_view("\0", 1), f.name);
}

std::string CheckpointMarks::Shown(const std::string& key) {
  std::string out = key;
  std::replace(out.begin(), out.end(), '\0', ':');
  return out;
}

uint64_t CheckpointMarks::Last(const CheckpointFiles& f) const {
  struct stat st {};
  if (fstat(f.base.get(), &st) != 0) return 0;
  absl::MutexLock lock(&mu_);
  auto it = marks_.find(KeyOf(f));
  if (it == marks_.end() || it->second.dev != st.st_dev || it->second.ino != st.st_ino) return 0;
  return it->second.generation;
}

uint64_t CheckpointMarks::Wrote(const CheckpointFiles& f) {
  struct stat st {};
  const bool known = fstat(f.base.get(), &st) == 0;
  absl::MutexLock lock(&mu_);
  const uint64_t generation = ++next_;
  if (!known) {
    marks_.erase(KeyOf(f));
    return generation;  // matches no mark: the next checkpoint is full
  }
  if (marks_.size() >= kMaxMarks) marks_.clear();
  marks_[KeyOf(f)] = Mark{generation, st.st_dev, st.st_ino};
  return generation;
}

void CheckpointMarks::Forget(const CheckpointFiles& f) {
  absl::MutexLock lock(&mu_);
  marks_.erase(KeyOf(f));
}

}  // namespace isometry
