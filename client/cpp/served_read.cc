#include "client/cpp/served_read.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/strings.h"
#include "layout/hop_window.h"
#include "layout/packed_pieces.h"

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace isometry::client {
namespace {

using serve_window::Lane;
using Clock = std::chrono::steady_clock;

// A publisher that packs nothing for this long is given up on: the copy
// reads the other way.
constexpr auto kPublisherStall = std::chrono::seconds(1);
// How much longer than ClientOptions::spin_us a reader spins on a piece
// after the first (the publisher is then busy packing).
constexpr uint32_t kPieceSpinFactor = 20;

// Program ids start at a random point: a lane taken over from a process
// that exited must not match the publisher's cached cut of its program.
uint64_t RandomStart() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != sizeof v) v = static_cast<uint64_t>(::getpid()) << 32;
  return v | 1;
}
std::atomic<uint64_t> next_program_id{RandomStart()};

bool Exited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

}  // namespace

uint64_t PieceBytesFor(uint64_t bytes) { return serve_window::PieceBytesFor(bytes); }

namespace {

// `program`'s records and id, for a lane; the caller adds its pieces.
std::optional<std::unique_ptr<ServedProgram>> EncodedProgram(const CopyProgram& program,
                                                             uint64_t remote_address,
                                                             std::byte* local) {
  const uint64_t encoded = hop_window::EncodedBytes(program);
  if (encoded > serve_window::kProgramBytes || program.bytes == 0) return std::nullopt;
  auto p = std::make_unique<ServedProgram>();
  p->records.resize(encoded);
  if (!hop_window::EncodeProgram(program, reinterpret_cast<std::byte*>(p->records.data()),
                                 encoded)) {
    return std::nullopt;
  }
  do {
    p->id = next_program_id.fetch_add(1, std::memory_order_relaxed);
  } while (p->id == 0);
  p->ops = program.ops.size();
  p->bytes = program.bytes;
  p->remote_address = remote_address;
  p->local = local;
  return p;
}

}  // namespace

std::optional<std::unique_ptr<ServedProgram>> MakeServedProgram(const CopyProgram& program,
                                                                uint64_t remote_address,
                                                                std::byte* local) {
  std::optional<std::unique_ptr<ServedProgram>> p = EncodedProgram(program, remote_address, local);
  if (!p) return std::nullopt;
  (*p)->piece_bytes = PieceBytesFor(program.bytes);
  const std::vector<CopyProgram> pieces = CutPacked(program, (*p)->piece_bytes, PackSide::kUnpack);
  if (pieces.size() > serve_window::kMaxPieces) return std::nullopt;
  (*p)->unpack = Flatten(pieces);
  return p;
}

std::optional<std::unique_ptr<ServedProgram>> MakeStagedServedProgram(
    const CopyProgram& program, const std::vector<CopyProgram>& pieces, uint64_t piece_bytes,
    uint64_t remote_address, std::byte* local) {
  if (piece_bytes == 0 || piece_bytes > serve_window::kSlotBytes ||
      pieces.size() > serve_window::kMaxPieces ||
      pieces.size() != (program.bytes + piece_bytes - 1) / piece_bytes) {
    return std::nullopt;
  }
  std::optional<std::unique_ptr<ServedProgram>> p = EncodedProgram(program, remote_address, local);
  if (!p) return std::nullopt;
  (*p)->piece_bytes = piece_bytes;
  (*p)->unpack = Flatten(pieces);
  return p;
}

Result<std::shared_ptr<ServedWindow>> ServedWindow::Attach(int pidfd, int fd_number, uint64_t bytes,
                                                           uint64_t token) {
  std::shared_ptr<ServedWindow> w(new ServedWindow());
  w->fd_.reset(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, fd_number, 0)));
  if (!w->fd_.valid()) {
    return Unavailable("served read: pidfd_getfd of the publisher's window: ", ErrnoString(errno));
  }
  struct stat st {};
  const int seals = ::fcntl(w->fd_.get(), F_GET_SEALS);
  // A window that could shrink would let the publisher fault this process.
  if (::fstat(w->fd_.get(), &st) != 0 || static_cast<uint64_t>(st.st_size) != bytes ||
      bytes != serve_window::kWindowBytes || seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return Unavailable("served read: the publisher's fd ", fd_number,
                       " is not a sealed serve window of this library's size");
  }
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd_.get(), 0);
  if (m == MAP_FAILED) return Unavailable("served read: mmap: ", ErrnoString(errno));
  w->window_ = static_cast<std::byte*>(m);
  w->header_ = reinterpret_cast<serve_window::Header*>(w->window_);
  if (Status s = serve_window::CheckHeader(*w->header_, bytes, token); !s.ok()) {
    return Unavailable(s.message());
  }
  w->owner_ = static_cast<uint64_t>(::getpid());
  for (uint32_t i = 0; i < serve_window::kLanes && !w->lane_; ++i) {
    Lane& l = w->header_->lanes_[i];
    uint64_t owner = l.owner.load(std::memory_order_acquire);
    // A lane of a process that has exited is free again, once its last
    // request has ended (the publisher ends a request nobody unpacks).
    const bool dead = owner != 0 && ::kill(static_cast<pid_t>(owner), 0) != 0 && errno == ESRCH;
    if ((owner == 0 || dead) && l.owner.compare_exchange_strong(owner, w->owner_)) {
      w->lane_ = &l;
      w->lane_index_ = i;
    }
  }
  if (!w->lane_) return Unavailable("served read: every lane of the window is taken");
  w->seq_ = w->lane_->request.seq.load(std::memory_order_acquire);
  if (w->lane_->progress.finished.load(std::memory_order_acquire) != w->seq_) {
    w->GiveUp(w->seq_);
  }
  return w;
}

ServedWindow::~ServedWindow() {
  if (lane_ && !broken_) lane_->owner.store(0, std::memory_order_release);
  if (window_) ::munmap(window_, serve_window::kWindowBytes);
}

void ServedWindow::GiveUp(uint32_t seq) {
  lane_->drain.cancel.store(seq, std::memory_order_seq_cst);
  const auto deadline = Clock::now() + kPublisherStall;
  while (lane_->progress.finished.load(std::memory_order_acquire) != seq) {
    if (Clock::now() > deadline) {
      broken_ = true;  // its late pieces would land under the next request's
      return;
    }
    Sleep(seq);
  }
}

void ServedWindow::Sleep(uint32_t seq) {
  serve_window::Progress& p = lane_->progress;
  const uint32_t seen = p.produced.load(std::memory_order_acquire);
  lane_->drain.reader_sleeps.store(1, std::memory_order_seq_cst);
  if (p.produced.load(std::memory_order_seq_cst) == seen &&
      p.finished.load(std::memory_order_seq_cst) != seq) {
    serve_window::Wait(p.produced, seen, 1000);
    // Woken by the publisher: maybe onto its core.
    serve_window::LeaveCpu(p.server_cpu.load(std::memory_order_relaxed));
    lane_->request.reader_cpu.store(static_cast<uint32_t>(::sched_getcpu()),
                                    std::memory_order_relaxed);
  }
  lane_->drain.reader_sleeps.store(0, std::memory_order_relaxed);
}

ServedWindow::Waited ServedWindow::WaitForPiece(uint32_t seq, uint64_t piece, int pidfd,
                                                uint32_t spin_us) {
  serve_window::Progress& p = lane_->progress;
  // Past the last piece: the request's end.
  const auto ready = [&] {
    return serve_window::CountFor(p.produced.load(std::memory_order_acquire), seq) > piece;
  };
  const auto ended = [&] { return p.finished.load(std::memory_order_acquire) == seq; };
  const auto done = [&] { return ready() || ended(); };
  const auto start = Clock::now();
  // Past the first piece the publisher is packing this request: a piece
  // of scattered small runs out of cache takes it a few hundred
  // microseconds, and a sleep here costs a wakeup per piece (and may
  // land this thread on the publisher's core).
  const auto spin = std::chrono::microseconds(spin_us) * (piece == 0 ? 1 : kPieceSpinFactor);
  while (!done() && Clock::now() - start < spin) serve_window::Relax();
  auto last = Clock::now();
  uint32_t seen = p.produced.load(std::memory_order_acquire);
  while (!done()) {
    Sleep(seq);
    if (done()) break;
    if (Exited(pidfd)) return Waited::kExited;
    const uint32_t now_seen = p.produced.load(std::memory_order_acquire);
    if (now_seen != seen) {
      seen = now_seen;
      last = Clock::now();
    } else if (Clock::now() - last > kPublisherStall) {
      return Waited::kStalled;
    }
  }
  return ready() ? Waited::kReady : Waited::kEnded;
}

std::optional<Status> ServedWindow::Copy(const ServedProgram& p, int pidfd, uint32_t spin_us) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || broken_ || !p.usable.load(std::memory_order_relaxed)) {
    return std::nullopt;
  }
  Lane& l = *lane_;
  if (in_area_ != p.id) {
    std::memcpy(serve_window::ProgramArea(window_, lane_index_), p.records.data(),
                p.records.size());
    in_area_ = p.id;
  }
  serve_window::Request& r = l.request;
  r.program_id.store(p.id, std::memory_order_relaxed);
  r.program_ops.store(p.ops, std::memory_order_relaxed);
  r.program_bytes.store(p.records.size(), std::memory_order_relaxed);
  r.remote_address.store(p.remote_address, std::memory_order_relaxed);
  r.piece_bytes.store(p.piece_bytes, std::memory_order_relaxed);
  r.bytes.store(p.bytes, std::memory_order_relaxed);
  r.reader_cpu.store(static_cast<uint32_t>(::sched_getcpu()), std::memory_order_relaxed);
  const uint32_t seq = ++seq_;
  r.seq.store(seq, std::memory_order_seq_cst);
  // The doorbell only for a server that sleeps (see ReadServer::Loop):
  // ringing it always would move its cache line here at every copy.
  if (header_->server_idle.value.load(std::memory_order_seq_cst)) {
    header_->doorbell.value.fetch_add(1, std::memory_order_seq_cst);
    serve_window::Wake(header_->doorbell.value);
  }
  for (uint64_t k = 0; k < p.unpack.size(); ++k) {
    switch (WaitForPiece(seq, k, pidfd, spin_us)) {
      case Waited::kReady:
        break;
      case Waited::kExited:
        GiveUp(seq);
        return NotFound("process has exited (served read)");
      case Waited::kEnded:
        // The publisher refused the program (or stopped): not this one again.
        if (l.progress.result.load(std::memory_order_acquire) !=
            static_cast<uint32_t>(absl::StatusCode::kDeadlineExceeded)) {
          p.usable.store(false, std::memory_order_relaxed);
        }
        return std::nullopt;
      case Waited::kStalled:
        GiveUp(seq);
        return std::nullopt;
    }
    p.unpack[k].Execute(
        serve_window::Slot(window_, lane_index_, static_cast<uint32_t>(k % serve_window::kSlots)),
        p.local);
    l.drain.consumed.store(serve_window::Tagged(seq, static_cast<uint32_t>(k + 1)),
                           std::memory_order_seq_cst);
    if (l.progress.server_sleeps.load(std::memory_order_seq_cst)) {
      serve_window::Wake(l.drain.consumed);
    }
  }
  // Every piece is here; the publisher ends the request right after its
  // last one (bounded: a publisher that never does is given up on).
  switch (WaitForPiece(seq, p.unpack.size(), pidfd, spin_us)) {
    case Waited::kEnded:
      break;
    case Waited::kExited:
      GiveUp(seq);
      return NotFound("process has exited (served read)");
    case Waited::kReady:  // more pieces than the program has: not a publisher of ours
    case Waited::kStalled:
      GiveUp(seq);
      return std::nullopt;
  }
  if (l.progress.result.load(std::memory_order_acquire) != 0) return std::nullopt;
  copies_.fetch_add(1, std::memory_order_relaxed);
  return OkStatus();
}

}  // namespace isometry::client
