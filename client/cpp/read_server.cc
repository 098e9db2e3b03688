#include "client/cpp/read_server.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>

#include <cstring>

#include "core/strings.h"
#include "layout/hop_window.h"
#include "layout/packed_pieces.h"

namespace isometry::client {
namespace {

using serve_window::Lane;
using Clock = std::chrono::steady_clock;

// A reader that unpacks nothing for this long has its request ended
// (DEADLINE_EXCEEDED), so that one stalled reader cannot hold the thread
// from the others' lanes.
constexpr auto kReaderStall = std::chrono::seconds(2);
constexpr uint32_t kSleepUs = 100000;  // a sleeping thread looks at stop_ this often
// Pieces of at least this size are timed and packed the way that has been
// faster (pack_chooser.h): a lane goes round 16 of them, 1 MiB or more,
// and each is long enough for its time to say something. Smaller ones go
// the staged way when their runs are short (PackChooser::KindOf), as the
// slot's lines are then still in the reader's cache.
constexpr uint64_t kTimedPieceBytes = 64 << 10;

}  // namespace

Result<std::unique_ptr<ReadServer>> ReadServer::Start(std::chrono::microseconds spin) {
  std::unique_ptr<ReadServer> s(new ReadServer());
  s->spin_ = spin;
  s->fd_.reset(::memfd_create("isometry-serve", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!s->fd_.valid()) return Internal("memfd_create: ", ErrnoString(errno));
  if (::ftruncate(s->fd_.get(), static_cast<off_t>(serve_window::kWindowBytes)) != 0 ||
      ::fcntl(s->fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Internal("serve window: ", ErrnoString(errno));
  }
  void* m = ::mmap(nullptr, serve_window::kWindowBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                   s->fd_.get(), 0);
  if (m == MAP_FAILED) return Internal("mmap of the serve window: ", ErrnoString(errno));
  s->window_ = static_cast<std::byte*>(m);
  s->header_ = reinterpret_cast<serve_window::Header*>(s->window_);
  if (::getrandom(&s->token_, sizeof s->token_, 0) != sizeof s->token_) {
    return Internal("getrandom: ", ErrnoString(errno));
  }
  s->token_ |= 1;  // never 0
  serve_window::InitHeader(*s->header_, s->token_);
  s->stage_.resize(serve_window::kSlotBytes);
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

ReadServer::~ReadServer() {
  stop_.store(true, std::memory_order_seq_cst);
  if (header_) serve_window::Wake(header_->doorbell.value);
  if (thread_.joinable()) thread_.join();
  if (window_) ::munmap(window_, serve_window::kWindowBytes);
}

void ReadServer::Serve(uint64_t address, uint64_t bytes) {
  std::lock_guard lock(ranges_mu_);
  ranges_.emplace_back(address, address + bytes);
}

bool ReadServer::Inside(uint64_t lo, uint64_t hi) const {
  std::lock_guard lock(ranges_mu_);
  for (const auto& [b, e] : ranges_) {
    if (lo >= b && hi <= e) return true;
  }
  return false;
}

bool ReadServer::AnyRequest() const {
  for (uint32_t i = 0; i < serve_window::kLanes; ++i) {
    if (header_->lanes_[i].request.seq.load(std::memory_order_seq_cst) != done_[i]) return true;
  }
  return false;
}

void ReadServer::Loop() {
  auto idle_since = Clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    bool worked = false;
    for (uint32_t i = 0; i < serve_window::kLanes; ++i) {
      const uint32_t seq = header_->lanes_[i].request.seq.load(std::memory_order_acquire);
      if (seq == done_[i]) continue;
      ServeLane(i, seq);
      done_[i] = seq;
      worked = true;
    }
    if (worked) {
      idle_since = Clock::now();
      continue;
    }
    if (const auto spun = Clock::now() - idle_since; spun < spin_) {
      serve_window::Relax();
      continue;
    }
    // Sleep on the doorbell: a reader posts (seq), then looks at
    // server_idle and, when set, rings (the doorbell) and wakes; this
    // thread says it is idle, then reads the doorbell, then looks at the
    // requests. Either it sees the request, or the reader sees it idle.
    header_->server_idle.value.store(1, std::memory_order_seq_cst);
    const uint32_t bell = header_->doorbell.value.load(std::memory_order_seq_cst);
    if (!AnyRequest() && !stop_.load(std::memory_order_seq_cst)) {
      serve_window::Wait(header_->doorbell.value, bell, kSleepUs);
    }
    header_->server_idle.value.store(0, std::memory_order_seq_cst);
    idle_since = Clock::now();
  }
}

Status ReadServer::Prepare(uint32_t lane) {
  const serve_window::Request& r = header_->lanes_[lane].request;
  LaneCache want;
  Asked& a = want.asked;
  a.program_id = r.program_id.load(std::memory_order_relaxed);
  a.program_ops = r.program_ops.load(std::memory_order_relaxed);
  a.program_bytes = r.program_bytes.load(std::memory_order_relaxed);
  a.remote_address = r.remote_address.load(std::memory_order_relaxed);
  a.piece_bytes = r.piece_bytes.load(std::memory_order_relaxed);
  a.bytes = r.bytes.load(std::memory_order_relaxed);
  LaneCache& c = cache_[lane];
  if (c.valid && c.asked == a) return OkStatus();
  c.valid = false;
  if (a.program_id == 0 || a.program_bytes > serve_window::kProgramBytes || a.piece_bytes == 0 ||
      a.piece_bytes > serve_window::kSlotBytes) {
    return InvalidArgument("served read: a request outside the window's limits");
  }
  // The reader may write the area at any time: decode a copy of it.
  std::vector<std::byte> records(a.program_bytes);
  std::memcpy(records.data(), serve_window::ProgramArea(window_, lane), records.size());
  ISO_ASSIGN_OR_RETURN(CopyProgram program,
                       hop_window::DecodeProgram(records.data(), a.program_ops, records.size()));
  if (program.bytes != a.bytes) return InvalidArgument("served read: the program's bytes");
  const std::optional<hop_window::Span> span = hop_window::SideSpan(program, true);
  const __int128 base = a.remote_address;
  if (!span || program.bytes == 0 || base + span->lo < 0 || base + span->hi > UINT64_MAX ||
      !Inside(static_cast<uint64_t>(base + span->lo), static_cast<uint64_t>(base + span->hi))) {
    return PermissionDenied("served read: the program reads outside the ranges served");
  }
  if (program.bytes / a.piece_bytes >= serve_window::kMaxPieces) {
    return InvalidArgument("served read: too many pieces");
  }
  std::vector<CopyProgram> pieces = CutPacked(program, a.piece_bytes, PackSide::kPack);
  if (pieces.size() > serve_window::kMaxPieces) {
    return InvalidArgument("served read: too many pieces");
  }
  want.pieces = Flatten(pieces);
  want.valid = true;
  c = std::move(want);
  return OkStatus();
}

bool ReadServer::WaitForSlot(Lane& l, uint32_t seq, uint64_t piece) {
  const auto consumed = [&] {
    return serve_window::CountFor(l.drain.consumed.load(std::memory_order_acquire), seq);
  };
  auto last = Clock::now();
  uint32_t seen = consumed();
  while (piece >= uint64_t{seen} + serve_window::kSlots) {
    if (stop_.load(std::memory_order_relaxed) ||
        l.drain.cancel.load(std::memory_order_acquire) == seq) {
      return false;
    }
    const auto now = Clock::now();
    if (now - last > spin_) {
      l.progress.server_sleeps.store(1, std::memory_order_seq_cst);
      const uint32_t word = l.drain.consumed.load(std::memory_order_seq_cst);
      if (serve_window::CountFor(word, seq) == seen) {
        serve_window::Wait(l.drain.consumed, word, 1000);
        // Woken by the reader: maybe onto its core.
        serve_window::LeaveCpu(l.request.reader_cpu.load(std::memory_order_relaxed));
        l.progress.server_cpu.store(static_cast<uint32_t>(::sched_getcpu()),
                                    std::memory_order_relaxed);
      }
      l.progress.server_sleeps.store(0, std::memory_order_relaxed);
    } else {
      serve_window::Relax();
    }
    const uint32_t now_seen = consumed();
    if (now_seen != seen) {
      seen = now_seen;
      last = Clock::now();
    } else if (Clock::now() - last > kReaderStall) {
      return false;
    }
  }
  return true;
}

void ReadServer::ServeLane(uint32_t lane, uint32_t seq) {
  Lane& l = header_->lanes_[lane];
  serve_window::Progress& p = l.progress;
  const auto end = [&](absl::StatusCode code) {
    p.result.store(static_cast<uint32_t>(code), std::memory_order_relaxed);
    p.finished.store(seq, std::memory_order_seq_cst);
    // The reader sleeps on `produced`; a wake there makes it look again.
    if (l.drain.reader_sleeps.load(std::memory_order_seq_cst)) serve_window::Wake(p.produced);
  };
  if (const Status s = Prepare(lane); !s.ok()) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    end(s.code());
    return;
  }
  serve_window::LeaveCpu(l.request.reader_cpu.load(std::memory_order_relaxed));
  p.server_cpu.store(static_cast<uint32_t>(::sched_getcpu()), std::memory_order_relaxed);
  const LaneCache& c = cache_[lane];
  const auto* base = reinterpret_cast<const std::byte*>(  // NOLINT(performance-no-int-to-ptr)
      static_cast<uintptr_t>(c.asked.remote_address));
  const bool timed = c.asked.piece_bytes >= kTimedPieceBytes;
  for (uint64_t k = 0; k < c.pieces.size(); ++k) {
    if (!WaitForSlot(l, seq, k)) {
      end(absl::StatusCode::kDeadlineExceeded);
      return;
    }
    const FlatProgram& piece = c.pieces[k];
    std::byte* slot =
        serve_window::Slot(window_, lane, static_cast<uint32_t>(k % serve_window::kSlots));
    // Staged: packed here (in this core's cache) and copied into the slot
    // in one memcpy, which writes whole lines the core fetches many at a
    // time; direct: packed straight into the slot, one copy less. Which
    // is faster depends on where the slot's lines are and on this machine
    // at this moment (pack_chooser.h).
    const int kind = PackChooser::KindOf(piece.bytes(), piece.runs());
    const PackWay way = timed                             ? chooser_.Next(kind)
                        : kind == PackChooser::kShortRuns ? PackWay::kStaged
                                                          : PackWay::kDirect;
    const auto t0 = timed ? Clock::now() : Clock::time_point();
    if (way == PackWay::kStaged) {
      piece.Execute(base, stage_.data());
      std::memcpy(slot, stage_.data(), piece.bytes());
    } else {
      piece.Execute(base, slot);
    }
    if (timed) chooser_.Took(kind, way, piece.bytes(), Clock::now() - t0);
    (way == PackWay::kStaged ? staged_ : direct_).fetch_add(1, std::memory_order_relaxed);
    p.produced.store(serve_window::Tagged(seq, static_cast<uint32_t>(k + 1)),
                     std::memory_order_seq_cst);
    if (l.drain.reader_sleeps.load(std::memory_order_seq_cst)) serve_window::Wake(p.produced);
  }
  served_.fetch_add(1, std::memory_order_relaxed);
  end(absl::StatusCode::kOk);
}

}  // namespace isometry::client
