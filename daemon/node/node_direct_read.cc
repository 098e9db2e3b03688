// Direct reads (docs/guides/client-memory.md, "Direct reads"): a lease that lets a local client
// copy another process's published private range into its own private
// memory with its own process_vm_readv calls, FALCON-X's receiver-side CMA
// zero-copy. The daemon checks the pair, compiles the copy program once
// and hands it over with a pidfd of the source; every later copy of the
// pair runs in the client, with no daemon thread between the processes.
//
// Why it is safe: the client's own system calls move the bytes, so the
// kernel checks the client's own right to read the source (same uid,
// dumpable, Yama); the daemon only tells it where, for a range the client
// could already register instances over (its own, or published by its
// uid). The destination must be memory the session registered itself:
// process_vm_readv writes the caller's own address space. The pidfd lets
// the client prove after each read that the source process was the one
// that registered (cma_copy.h); the session's lease_epoch tells it that
// the range ended (ReleasePrivateLocked -> RevokeLeasesLocked).
#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "layout/chunk_compiler.h"
#include "layout/hop_window.h"
#include "layout/layout_chunk.h"
#include "layout/serve_window.h"
#include "procmem/cma_gather.h"

namespace isometry {
namespace {

// What a lease's program may weigh in its response (the local socket's
// frames are at most 1 MiB): irregular types past it go through the daemon.
constexpr uint64_t kMaxLeaseProgramBytes = 768 << 10;

// Why a datatype copy against a layout whose stream is a list of runs is
// no direct read (empty: it may be one): one program of the whole box
// would pair every run. A datatype source into such a layout is a staged
// lease (LeaseEnds) when its publisher serves reads (`served`); else the
// daemon's path takes it chunk by chunk, each chunk a layout program
// against a slot. (Contiguous bytes against such a layout are a layout
// copy, which a lease runs.)
std::string ChunkedLayoutEnd(const CopyRequest& r, bool served) {
  if (served && r.src.form && !r.src.form->layout && r.dst.form && r.dst.form->layout) {
    return "";
  }
  const InstanceRef* refs[2] = {&r.src, &r.dst};
  for (int i = 0; i < 2; ++i) {
    if (refs[i]->form && refs[i]->form->layout) {
      return StrCat("the ", i ? "destination" : "source",
                    " layout's fields are addressed differently (SOA over fields of different "
                    "sizes): the daemon copies it against a datatype chunk by chunk");
    }
  }
  return "";
}

// Why two instances are no pair a lease may copy (null: they may be).
const char* EndsRefusal(const Instance& src, const Instance& dst, uint64_t session) {
  if (!src.private_range || !dst.private_range) return "both ends must lie in private ranges";
  // Two layouts' packed streams (each its whole box in AOS C order) match
  // byte for byte when their fields and bounds are the same. Other pairs
  // the daemon's path checks and places (the source's box inside larger
  // bounds).
  if (!src.form && !dst.form &&
      (!(src.shape.fields == dst.shape.fields) || src.shape.bounds != dst.shape.bounds)) {
    return "layouts of different fields or bounds go through the daemon";
  }
  if (dst.private_range->session != session) {
    return "the destination must lie in a range this session registered (a direct read writes "
           "the reader's own memory)";
  }
  return nullptr;
}

// What a lease copies: the form ends when a datatype is on either end,
// else two layouts of the same fields and bounds (or contiguous bytes as
// the AOS C-order layout over them, PackEndsLocked), whose program is the
// layout compiler's (each field looped at its own stride) rather than a
// pairing of their forms, which are lists of runs for SOA over fields of
// different sizes.
//
// A staged lease (a datatype source against a layout end described chunk
// by chunk) packs the source's stream densely, and each served piece is
// unpacked by the layout compiler's program for its bytes of the stream
// (LayoutSlotProgram): the publisher packs the datatype, the reader
// unpacks the layout, and no program pairs the two sides' runs.
struct LeaseEnds {
  std::array<std::shared_ptr<const EndForm>, 2> forms;
  std::array<InstanceShape, 2> shapes;

  bool staged() const { return forms[1] && forms[1]->layout.has_value(); }
  Result<FormCopy> Compile() const {
    return CompileWhole({shapes[0], forms[0].get()}, {shapes[1], forms[1].get()});
  }
  // The staged lease's pieces, at most `budget` bytes of records in all.
  Result<std::vector<CopyProgram>> Pieces(uint64_t piece_bytes, uint64_t budget) const {
    std::vector<CopyProgram> out;
    const uint64_t bytes = forms[1]->bytes;
    for (uint64_t at = 0; at < bytes; at += piece_bytes) {
      ISO_ASSIGN_OR_RETURN(
          CopyProgram p, LayoutSlotProgram(*forms[1]->layout, at, std::min(bytes, at + piece_bytes),
                                           /*to_layout=*/true));
      const uint64_t encoded = hop_window::EncodedBytes(p);
      if (encoded > budget || out.size() == serve_window::kMaxPieces) {
        return ResourceExhausted("pieces over ", kMaxLeaseProgramBytes, " bytes");
      }
      budget -= encoded;
      out.push_back(std::move(p));
    }
    return out;
  }
  // A staged lease's pieces into `out` (`encoded`: the program's records);
  // why not, when they cannot be (empty: staged).
  std::string Stage(const FormCopy& copy, uint64_t encoded,
                    node::Instances::DirectRead& out) const {
    // The pieces must sit at stream positions: the dense end from 0.
    if (copy.dst_shift != 0) return "the packed stream does not start at 0";
    out.piece_bytes = serve_window::PieceBytesFor(copy.program.bytes);
    Result<std::vector<CopyProgram>> pieces =
        Pieces(out.piece_bytes, kMaxLeaseProgramBytes - encoded);
    if (!pieces.ok()) {
      return StrCat("a datatype against this layout takes ", pieces.status().message(),
                    ": the daemon copies it chunk by chunk");
    }
    out.unpack = *std::move(pieces);
    return "";
  }
  uint64_t span(int i) const { return StorageBytes(shapes[i], forms[i].get()); }
};

}  // namespace

void Node::Impl::RevokeLeasesLocked(uint64_t id) {
  for (auto& [number, s] : sessions) {
    if (s->leased_ranges.erase(id) == 0 || !s->lease_epoch) continue;
    s->lease_epoch->fetch_add(1, std::memory_order_seq_cst);
    ++leases_revoked;
  }
}

Result<node::Instances::DirectRead> node::Instances::GrantDirectRead(SessionRef session,
                                                                     uint64_t src, uint64_t dst,
                                                                     std::atomic<uint32_t>* epoch,
                                                                     bool served_reads) {
  Node::Impl& n = *impl_;
  const auto refuse = [&n](const auto&... why) {
    ++n.leases_refused;
    return FailedPrecondition("no direct read: ", why...);
  };
  if (!n.config.daemon.direct_reads) {
    return refuse("leases are off on this node (daemon.direct_reads = false)");
  }
  LeaseEnds lease;
  std::shared_ptr<PrivateRange> ranges[2];
  uint64_t offsets[2] = {0, 0};
  {
    absl::MutexLock lock(&n.mu);
    ISO_ASSIGN_OR_RETURN(Session * s, n.FindSession(session));
    const Instance* ends[2] = {nullptr, nullptr};
    const uint64_t ids[2] = {src, dst};
    for (int i = 0; i < 2; ++i) {
      auto it = n.instances.find(ids[i]);
      if (it == n.instances.end() || it->second.session != s->id) {
        return NotFound("direct read: no instance ", ids[i], " in this session");
      }
      ends[i] = &it->second;
    }
    if (const char* why = EndsRefusal(*ends[0], *ends[1], s->id)) return refuse(why);
    ISO_ASSIGN_OR_RETURN(ranges[0], n.UsablePrivateRange(*s, ends[0]->private_range->id));
    ISO_ASSIGN_OR_RETURN(ranges[1], n.UsablePrivateRange(*s, ends[1]->private_range->id));
    CopyRequest request;
    request.src.shape = ends[0]->shape;
    request.dst.shape = ends[1]->shape;
    if (ends[0]->form || ends[1]->form) {  // contiguous bytes become a layout
      ISO_RETURN_IF_ERROR(n.PackEndsLocked(ends, std::nullopt, request, /*local=*/true));
    }
    const bool served = ranges[0]->serve && served_reads;
    if (const std::string why = ChunkedLayoutEnd(request, served); !why.empty()) return refuse(why);
    lease = {{request.src.form, request.dst.form}, {request.src.shape, request.dst.shape}};
    offsets[0] = ends[0]->offset;
    offsets[1] = ends[1]->offset;
  }
  // Compiling may take milliseconds for an irregular type: not under the
  // node lock.
  ISO_ASSIGN_OR_RETURN(FormCopy copy, lease.Compile());
  const std::optional<ProgramExtent> extent = SourceExtent(copy.program);
  const uint64_t span = extent ? extent->end - extent->begin : 0;
  // A publisher that serves reads packs its own memory, for a reader that
  // uses its window: no run costs a system call.
  if (!(ranges[0]->serve && served_reads) && span > kMaxGatherBytes &&
      RunsCostMoreThanExtent(copy.program.runs, span)) {
    return refuse(copy.program.runs, " runs over ", span,
                  " bytes: the daemon gathers that in chunks faster than one system call a run");
  }
  const uint64_t encoded = hop_window::EncodedBytes(copy.program);
  if (encoded > kMaxLeaseProgramBytes) {
    return refuse("the copy program has ", copy.program.ops.size(), " ops (over ",
                  kMaxLeaseProgramBytes, " bytes)");
  }
  DirectRead out;
  if (const std::string why = lease.staged() ? lease.Stage(copy, encoded, out) : ""; !why.empty()) {
    return refuse(why);
  }
  absl::MutexLock lock(&n.mu);
  // Again under the lock that ends ranges: alive now and recorded in the
  // session's leases, so an end from here on bumps the epoch read below.
  ISO_ASSIGN_OR_RETURN(Session * s, n.FindSession(session));
  for (const auto& r : ranges) {
    if (!r->alive) return NotFound("direct read: private range ", r->id, " has ended");
  }
  out.pidfd.reset(::fcntl(ranges[0]->process->pidfd(), F_DUPFD_CLOEXEC, 0));
  if (!out.pidfd.valid()) return Internal("direct read: dup of a pidfd: ", ErrnoString(errno));
  out.pid = ranges[0]->process->pid();
  out.remote_address = ranges[0]->address + offsets[0] + static_cast<uint64_t>(copy.src_shift);
  out.local_address = ranges[1]->address + offsets[1] + static_cast<uint64_t>(copy.dst_shift);
  // The program's offsets start at the shifts: its own spans are what is
  // left of each end's storage after them.
  out.src_span = lease.span(0) - std::min<uint64_t>(lease.span(0), copy.src_shift);
  out.dst_span = lease.span(1) - std::min<uint64_t>(lease.span(1), copy.dst_shift);
  out.program = std::make_shared<const CopyProgram>(std::move(copy.program));
  out.serve = ranges[0]->serve;
  if (ranges[0]->session != s->id) s->leased_ranges.insert(ranges[0]->id);
  s->lease_epoch = epoch;
  out.epoch = epoch->load(std::memory_order_seq_cst);
  ++n.leases;
  spdlog::debug("session {}: direct read lease, pid {} range {} into range {} ({} ops)", s->id,
                out.pid, ranges[0]->id, ranges[1]->id, out.program->ops.size());
  return out;
}

}  // namespace isometry
