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
// goes this way, since the image replaces every byte of the range; and
// only up to kMaxImageBytes per rank, kLiveImages at once, each charged to
// Setup::image_budgets while held (without room there, piece by piece).
#include <algorithm>
#include <cstdlib>
#include <limits>

#include "daemon/node/redistribute_op.h"

namespace isometry {
namespace {

using redistribution::Run;

// A rank's storage, at most, that goes through an image (larger ranks'
// pieces write their files directly, as before).
constexpr uint64_t kMaxImageBytes = uint64_t{256} << 20;

// Images held at once: the rank whose pieces run and the one being written.
constexpr int kLiveImages = 2;

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
  const std::span<const Run> list = inner == 0 ? std::span<const Run>(t.dim0) : t.runs[inner];
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

// Whether consumer rank `end`'s storage may go through an image: a file
// here, written in place, that its elements fill.
bool ImageCandidate(const RankEnd& end) {
  if (end.empty || !end.node.empty() || !end.ref.file_in_place || end.ref.packed) {
    return false;
  }
  const uint64_t span = StorageBytes(end.ref);
  const uint64_t elements = end.ref.shape.bounds.volume();
  const uint64_t element_bytes = end.ref.shape.fields.total_bytes();
  return span > 0 && span <= kMaxImageBytes && element_bytes > 0 &&
         elements <= span / element_bytes && elements * element_bytes == span;
}

}  // namespace

std::vector<std::optional<ConsumerImagePlan>> PlanImages(const Topology& topo,
                                                         RedistributionOp::Setup& setup) {
  const size_t n = setup.consumers.size();
  std::vector<std::optional<ConsumerImagePlan>> plans(n);
  std::vector<uint64_t> bytes(n, 0), runs(n, 0);
  std::vector<size_t> pieces(n, 0);
  for (const PieceTask& t : setup.tasks) {
    const RankEnd& end = setup.consumers[t.consumer];
    if (!ImageCandidate(end)) {
      continue;
    }
    AddRuns(t, end.storage, end.ref.shape.fields.total_bytes(), setup.dims, bytes[t.consumer],
            runs[t.consumer]);
    ++pieces[t.consumer];
  }
  for (size_t q = 0; q < n; ++q) {
    if (pieces[q] == 0 || runs[q] == 0 || bytes[q] / runs[q] >= kSmallRunBytes) {
      continue;
    }
    const RankEnd& end = setup.consumers[q];
    const std::optional<MemoryId> memory = ImageMemory(topo, end.ref.memory, setup.producers);
    if (memory) {
      plans[q] = ConsumerImagePlan{*memory, StorageBytes(end.ref), pieces[q]};
    }
  }
  // Imaged ranks' pieces first, rank by rank, each rank's in their dealt
  // order (spread over producers); the rest after, as dealt.
  std::stable_sort(
      setup.tasks.begin(), setup.tasks.end(), [&](const PieceTask& a, const PieceTask& b) {
        const uint64_t none = std::numeric_limits<uint64_t>::max();
        return (plans[a.consumer] ? a.consumer : none) < (plans[b.consumer] ? b.consumer : none);
      });
  return plans;
}

bool RedistributionOp::ImageReadyLocked(uint64_t consumer, std::byte*& image) {
  image = nullptr;
  const std::optional<ConsumerImagePlan>& plan = image_plans_[consumer];
  if (!plan) {
    return true;
  }
  Image& im = images_[consumer];
  if (im.direct) {
    return true;
  }
  if (!im.data) {
    // Each image is held from its rank's first piece to its write; ranks
    // come one after another, so a bound on live images bounds memory.
    if (live_images_ >= kLiveImages) {
      return false;
    }
    Result<std::shared_ptr<void>> charge =
        ByteBudget::Take(setup_->image_budgets, plan->bytes, "a redistribution's image");
    if (!charge.ok()) {
      im.direct = true;  // decided before any of its pieces ran
      return true;
    }
    im.charge = *std::move(charge);
    im.data = std::make_unique_for_overwrite<std::byte[]>(plan->bytes);
    ++live_images_;
  }
  image = im.data.get();
  return true;
}

void RedistributionOp::WriteImage(uint64_t consumer) {
  std::shared_ptr<const Setup> setup;
  std::byte* data = nullptr;
  {
    absl::MutexLock lock(&mu_);
    setup = setup_;
    data = images_[consumer].data.get();
  }
  if (!setup || data == nullptr) {
    OnImageWritten(consumer, absl::AbortedError("redistribution ended"));
    return;
  }
  const ConsumerImagePlan& plan = *image_plans_[consumer];
  const RankEnd& dst = setup->consumers[consumer];
  CopyRequest req;
  req.src = InstanceRef{plan.memory, data, plan.bytes, PackedShape(plan.bytes)};
  req.dst = dst.ref;  // the file, written in place
  req.dst.shape = PackedShape(plan.bytes);
  req.disk_owner = setup->disk_owner;
  req.disk_uid = setup->disk_uid;
  std::weak_ptr<RedistributionOp> self = weak_from_this();
  req.on_complete = [self, consumer](const Status& s) {
    if (auto op = self.lock()) {
      op->OnImageWritten(consumer, s);
    }
  };
  Result<Transfer> t = runtime_.Copy(std::move(req));
  if (!t.ok()) {
    OnImageWritten(consumer, t.status());
    return;
  }
  Status failed;
  {
    absl::MutexLock lock(&mu_);
    if (!images_[consumer].written) {
      running_.emplace(task_count_ + consumer, Running{*t, nullptr});
    }
    failed = failure_;
  }
  if (!failed.ok()) {
    t->Abort(failed);
  }
}

void RedistributionOp::OnImageWritten(uint64_t consumer, const Status& s) {
  std::vector<Running> abort;
  Status why;
  {
    absl::MutexLock lock(&mu_);
    Image& im = images_[consumer];
    if (im.written) {
      return;
    }
    im.written = true;
    im.data.reset();
    im.charge.reset();
    --live_images_;
    --in_flight_;
    running_.erase(task_count_ + consumer);
    if (s.ok()) {
      ++images_written_;
    } else if (failure_.ok()) {
      failure_ = Status(s.code(), StrCat("redistribution ", setup_ ? setup_->what : "",
                                         ": writing consumer rank ", consumer,
                                         "'s file from its image in memory failed: ", s.message()));
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
