// Consumer images (redistribute_op.h, ConsumerImagePlan): which consumer
// ranks' pieces go through memory, and the copies that do it.
//
// A piece copy into a file writes each of its runs with one I/O of its
// own, in place (the pieces of one file run concurrently, so none may
// read, modify and write back a range another writes). Where a consumer's
// storage is a file and the pieces' runs are small (cyclic rows into
// column-major storage: one element each), that is an I/O per element.
// Such a rank's pieces write an image of its storage in host memory
// instead, and one copy then writes the image into the file as one
// contiguous range: large I/Os and one fdatasync. Only storage that the
// rank's elements fill without gaps (no padding, no bytes between fields)
// goes this way, since the image replaces every byte of the range, and
// only where every producer rank is on this node (PlanImages). A rank
// larger than kWindowBytes is cut into windows along its outermost
// dimension (each a contiguous range of its storage), its pieces cut with
// it, and each window is imaged and written in turn: kLiveImages at once,
// each charged to Setup::image_budgets while held (without room there, the
// window's pieces write the file directly).
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <vector>

#include "daemon/node/redistribute_op.h"

namespace isometry {
namespace {

using redistribution::Run;

// The most bytes of a rank's storage one image holds: larger ranks are
// cut into windows of at most this along their outermost dimension.
constexpr uint64_t kWindowBytes = uint64_t{16} << 20;

// Images held at once: the window whose pieces run and those still being
// written, so that the file writes of consecutive windows overlap.
constexpr int kLiveImages = 3;

// The average file run below which a rank's pieces go through an image:
// the disk channel's own bound for small runs (channels/disk/disk_request.h,
// kSmallRun), under which it stages a dense range but lists a sparse one
// run by run.
constexpr uint64_t kSmallRunBytes = uint64_t{16} << 10;

// The bytes and contiguous runs one task writes in the consumer's storage,
// estimated from its innermost dimension: runs of elements where that
// dimension's stride is the element, an element each otherwise. Runs that
// continue across an outer dimension are counted apart (an estimate on the
// small side, which only sends more ranks through an image).
void AddRuns(const PieceTask& t, const StridedStorage& st, uint64_t element_bytes, int dims,
             uint64_t& bytes, uint64_t& runs) {
  const int inner = t.order[dims - 1];
  const std::span<const Run> list = t.RunsOf(inner);
  uint64_t count = 0, length = 0;
  for (const Run& r : list) {
    ++count;
    length += r.length;
  }
  if (count == 0 || length == 0) {
    return;
  }
  const uint64_t per_line = static_cast<uint64_t>(std::abs(st.stride[inner])) == element_bytes
                                ? count
                                : length;  // one run per element
  bytes += t.bytes;
  runs += per_line * (t.bytes / (length * element_bytes));
}

// A host memory the image may live in: an edge to `file_memory` (the
// image's write) and one from every producer rank's memory here (the
// pieces); a producer's own memory first. Nullopt when there is none.
std::optional<MemoryId> ImageMemory(const Topology& topo, MemoryId file_memory,
                                    const std::vector<RankEnd>& producers) {
  auto has_edge = [&](MemoryId a, MemoryId b) {
    return std::any_of(topo.edges.begin(), topo.edges.end(),
                       [&](const TopologyEdge& e) { return e.src == a && e.dst == b; });
  };
  std::vector<MemoryId> candidates;
  for (const RankEnd& p : producers) {
    if (!p.empty && p.node.empty()) {
      candidates.push_back(p.ref.memory);
    }
  }
  for (const TopologyMemory& m : topo.memories) {
    candidates.push_back(m.id);
  }
  for (const MemoryId& c : candidates) {
    const TopologyMemory* m = topo.FindMemory(c);
    if (m == nullptr || !IsHostMemory(m->kind) || !has_edge(c, file_memory)) {
      continue;
    }
    const bool reached = std::all_of(producers.begin(), producers.end(), [&](const RankEnd& p) {
      return p.empty || !p.node.empty() || has_edge(p.ref.memory, c);
    });
    if (reached) {
      return c;
    }
  }
  return std::nullopt;
}

// Whether consumer rank `end`'s storage may go through images: a file
// here, written in place, that its elements fill.
bool ImageCandidate(const RankEnd& end) {
  if (end.empty || !end.node.empty() || !end.ref.file_in_place || end.ref.form) {
    return false;
  }
  const uint64_t span = StorageBytes(end.ref);
  const uint64_t elements = end.ref.shape.bounds.volume();
  const uint64_t element_bytes = end.ref.shape.fields.total_bytes();
  return span > 0 && element_bytes > 0 && elements <= span / element_bytes &&
         elements * element_bytes == span;
}

// How a rank's storage is cut into windows: along dimension `dim`,
// `per_window` of its indices a window (of `stride` bytes each).
struct Windows {
  int dim = 0;
  uint64_t per_window = 0, stride = 0, extent = 0;
};

// The windows of rank `end`'s storage (one for storage of at most
// kWindowBytes); nullopt where a window along its outermost dimension is
// no contiguous range of it (a stride that is not positive, or elements
// not laid one after another: SOA of several fields) or one index of that
// dimension alone holds more than kWindowBytes.
std::optional<Windows> WindowsOf(const RankEnd& end, int dims) {
  const StridedStorage& st = end.storage;
  const uint64_t span = StorageBytes(end.ref);
  Windows w;
  uint64_t smallest = std::numeric_limits<uint64_t>::max();
  for (int d = 0; d < dims; ++d) {
    const auto stride = static_cast<uint64_t>(std::abs(st.stride[d]));
    smallest = std::min(smallest, stride);
    if (stride > static_cast<uint64_t>(std::abs(st.stride[w.dim]))) {
      w.dim = d;
    }
  }
  w.extent = static_cast<uint64_t>(end.ref.shape.bounds.hi[w.dim] - end.ref.shape.bounds.lo[w.dim]);
  if (span <= kWindowBytes) {
    w.per_window = w.extent;
    w.stride = w.extent == 0 ? 0 : span / w.extent;
    return w;
  }
  w.stride = static_cast<uint64_t>(std::abs(st.stride[w.dim]));
  if (st.stride[w.dim] <= 0 || smallest != end.ref.shape.fields.total_bytes() ||
      w.stride > kWindowBytes || w.extent == 0 || w.stride * w.extent != span) {
    return std::nullopt;
  }
  w.per_window = kWindowBytes / w.stride;
  return w;
}

// The runs of `list` whose remote indices lie in [lo, hi), cut to it, the
// remote indices counted from `lo`; their elements in `length`.
std::vector<Run> CutRuns(std::span<const Run> list, uint64_t lo, uint64_t hi, uint64_t& length) {
  std::vector<Run> out;
  length = 0;
  for (const Run& r : list) {
    const uint64_t a = std::max(r.remote, lo), b = std::min(r.remote + r.length, hi);
    if (a >= b) {
      continue;
    }
    const uint64_t skip = a - r.remote;
    out.push_back({r.global + skip, b - a, r.local + skip, a - lo});
    length += b - a;
  }
  return out;
}

// Adds the windows of consumer rank `q` to `plans` and marks (cutting them
// where the rank has several windows) its tasks in `tasks` with them.
void AddWindows(uint64_t q, const Windows& w, MemoryId memory, std::vector<PieceTask>& tasks,
                std::vector<ConsumerImagePlan>& plans) {
  const size_t first = plans.size();
  const uint64_t count = w.extent == 0 ? 0 : (w.extent + w.per_window - 1) / w.per_window;
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t lo = k * w.per_window, hi = std::min(w.extent, lo + w.per_window);
    plans.push_back(ConsumerImagePlan{q, memory, lo * w.stride, (hi - lo) * w.stride, 0});
  }
  std::vector<PieceTask> cut;
  for (PieceTask& t : tasks) {
    if (t.consumer != q) {
      continue;
    }
    if (count == 1) {
      t.image = static_cast<int64_t>(first);
      ++plans[first].pieces;
      continue;
    }
    // The parts share dimension 0's runs (or, cut in it, hold their own).
    std::vector<Run> whole0;  // cut in dimension 0: its runs, before the cut
    if (w.dim == 0) {
      whole0 = std::move(t.dim0);
    } else {
      t.shared_dim0 = std::make_shared<const std::vector<Run>>(std::move(t.dim0));
    }
    t.dim0 = {};
    const std::span<const Run> list = w.dim == 0 ? std::span<const Run>(whole0) : t.RunsOf(w.dim);
    uint64_t total = 0;
    for (const Run& r : list) {
      total += r.length;
    }
    for (uint64_t k = 0; k < count && total > 0; ++k) {
      uint64_t length = 0;
      std::vector<Run> runs = CutRuns(list, k * w.per_window, (k + 1) * w.per_window, length);
      if (length == 0) {
        continue;
      }
      PieceTask part = t;
      part.cut_dim = w.dim;
      part.cut = std::move(runs);
      part.bytes = t.bytes / total * length;
      part.image = static_cast<int64_t>(first + k);
      ++plans[first + k].pieces;
      cut.push_back(std::move(part));
    }
  }
  if (count > 1) {
    std::erase_if(tasks, [&](const PieceTask& t) { return t.consumer == q && t.image < 0; });
    tasks.insert(tasks.end(), std::make_move_iterator(cut.begin()),
                 std::make_move_iterator(cut.end()));
  }
}

}  // namespace

std::vector<ConsumerImagePlan> PlanImages(const Topology& topo, RedistributionOp::Setup& setup) {
  // A producer rank on another node has its pieces run by that node, which
  // writes them into this node's consumer files itself: an image here
  // holds only this node's pieces, and writing it would overwrite theirs
  // with whatever the image holds there (wrong bytes, whichever write
  // lands last). Images only where every producer rank is here.
  if (std::any_of(setup.producers.begin(), setup.producers.end(),
                  [](const RankEnd& p) { return !p.empty && !p.node.empty(); })) {
    return {};
  }
  const size_t n = setup.consumers.size();
  std::vector<uint64_t> bytes(n, 0), runs(n, 0);
  for (const PieceTask& t : setup.tasks) {
    const RankEnd& end = setup.consumers[t.consumer];
    if (ImageCandidate(end)) {
      AddRuns(t, end.storage, end.ref.shape.fields.total_bytes(), setup.dims, bytes[t.consumer],
              runs[t.consumer]);
    }
  }
  std::vector<ConsumerImagePlan> plans;
  for (size_t q = 0; q < n; ++q) {
    if (runs[q] == 0 || bytes[q] / runs[q] >= kSmallRunBytes) {
      continue;
    }
    const RankEnd& end = setup.consumers[q];
    const std::optional<Windows> windows = WindowsOf(end, setup.dims);
    const std::optional<MemoryId> memory = ImageMemory(topo, end.ref.memory, setup.producers);
    if (windows && memory) {
      AddWindows(q, *windows, *memory, setup.tasks, plans);
    }
  }
  // Windows' pieces first, window by window (a rank's in order), each
  // window's in their dealt order (spread over producers); the rest after,
  // as dealt.
  std::stable_sort(setup.tasks.begin(), setup.tasks.end(),
                   [](const PieceTask& a, const PieceTask& b) {
                     const auto key = [](const PieceTask& t) {
                       return t.image < 0 ? std::numeric_limits<int64_t>::max() : t.image;
                     };
                     return key(a) < key(b);
                   });
  return plans;
}

bool RedistributionOp::ImageReadyLocked(int64_t unit, std::byte*& image) {
  image = nullptr;
  if (unit < 0) {
    return true;
  }
  const ConsumerImagePlan* plan = &image_plans_[static_cast<size_t>(unit)];
  Image& im = images_[static_cast<size_t>(unit)];
  if (im.direct) {
    return true;
  }
  if (!im.buffer.data) {
    // Each image is held from its window's first piece to its write;
    // windows come one after another, so a bound on live images (and on
    // the spare buffers) bounds memory.
    if (live_images_ >= kLiveImages) {
      return false;
    }
    auto spare = std::find_if(spare_buffers_.begin(), spare_buffers_.end(),
                              [&](const ImageBuffer& b) { return b.capacity >= plan->bytes; });
    if (spare != spare_buffers_.end()) {
      im.buffer = std::move(*spare);
      spare_buffers_.erase(spare);
    } else {
      Result<std::shared_ptr<void>> charge =
          ByteBudget::Take(setup_->image_budgets, plan->bytes, "a redistribution's image");
      if (!charge.ok()) {
        im.direct = true;  // decided before any of its pieces ran
        return true;
      }
      im.buffer.charge = *std::move(charge);
      im.buffer.data = std::make_unique_for_overwrite<std::byte[]>(plan->bytes);
      im.buffer.capacity = plan->bytes;
    }
    ++live_images_;
  }
  image = im.buffer.data.get();
  return true;
}

void RedistributionOp::WriteImage(size_t unit) {
  std::shared_ptr<const Setup> setup;
  std::byte* data = nullptr;
  {
    absl::MutexLock lock(&mu_);
    setup = setup_;
    data = images_[unit].buffer.data.get();
  }
  if (!setup || data == nullptr) {
    OnImageWritten(unit, absl::AbortedError("redistribution ended"));
    return;
  }
  const ConsumerImagePlan& plan = image_plans_[unit];
  const RankEnd& dst = setup->consumers[plan.consumer];
  CopyRequest req;
  req.src = InstanceRef{plan.memory, data, plan.bytes, StreamShape(plan.bytes)};
  req.dst = dst.ref;  // the file, written in place
  req.dst.shape = StreamShape(plan.bytes);
  req.dst.file_offset += plan.offset;
  req.disk_owner = setup->disk_owner;
  req.disk_uid = setup->disk_uid;
  std::weak_ptr<RedistributionOp> self = weak_from_this();
  req.on_complete = [self, unit](const Status& s) {
    if (auto op = self.lock()) {
      op->OnImageWritten(unit, s);
    }
  };
  Result<Transfer> t = runtime_.Copy(std::move(req));
  if (!t.ok()) {
    OnImageWritten(unit, t.status());
    return;
  }
  Status failed;
  {
    absl::MutexLock lock(&mu_);
    if (!images_[unit].written) {
      running_.emplace(task_count_ + unit, Running{*t, nullptr});
    }
    failed = failure_;
  }
  if (!failed.ok()) {
    t->Abort(failed);
  }
}

void RedistributionOp::OnImageWritten(size_t unit, const Status& s) {
  std::vector<Running> abort;
  Status why;
  {
    absl::MutexLock lock(&mu_);
    Image& im = images_[unit];
    if (im.written) {
      return;
    }
    im.written = true;
    if (s.ok() && spare_buffers_.size() < static_cast<size_t>(kLiveImages)) {
      spare_buffers_.push_back(std::move(im.buffer));
    }
    im.buffer = ImageBuffer{};
    --live_images_;
    --in_flight_;
    running_.erase(task_count_ + unit);
    if (s.ok()) {
      ++images_written_;
    } else if (failure_.ok()) {
      failure_ =
          Status(s.code(),
                 StrCat("redistribution ", setup_ ? setup_->what : "", ": writing consumer rank ",
                        image_plans_[unit].consumer, "'s file (bytes ", image_plans_[unit].offset,
                        " to ", image_plans_[unit].offset + image_plans_[unit].bytes,
                        " of its storage) from its image in memory failed: ", s.message()));
      for (auto& [_, t] : running_) {
        abort.push_back(t);
      }
      why = failure_;
    }
  }
  for (const Running& t : abort) {
    t.Abort(why);
  }
  Pump();
}

}  // namespace isometry
