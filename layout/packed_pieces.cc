#include "layout/packed_pieces.h"

#include <algorithm>
#include <utility>

namespace isometry {
namespace {

// `op` without its outermost loop (the loop's first iteration).
CopyOp DropOuterLoop(const CopyOp& op) {
  CopyOp out = op;
  std::copy(op.loops.begin() + 1, op.loops.begin() + op.num_loops, out.loops.begin());
  --out.num_loops;
  out.loops[out.num_loops] = CopyLoop{};
  return out;
}

// `op` advanced past its outermost loop's first `k` iterations (k < count).
void SkipIterations(CopyOp& op, uint64_t k) {
  op.src_offset += k * op.loops[0].src_stride;  // strides wrap modulo 2^64
  op.dst_offset += k * op.loops[0].dst_stride;
  op.loops[0].count -= k;
  if (op.loops[0].count == 1) op = DropOuterLoop(op);
}

class Cutter {
 public:
  Cutter(uint64_t piece_bytes, PackSide side) : piece_(piece_bytes), side_(side) {}

  void Add(CopyOp op) {
    while (op.bytes() > 0) {
      const uint64_t bytes = op.bytes();
      if (bytes <= Room()) {
        Emit(op);
        return;
      }
      if (op.num_loops == 0) {  // one run longer than the room: cut it
        const uint64_t take = Room();
        CopyOp head = op;
        head.run_bytes = take;
        Emit(head);
        op.src_offset += take;
        op.dst_offset += take;
        op.run_bytes -= take;
        continue;
      }
      const uint64_t inner = bytes / op.loops[0].count;
      if (inner <= Room()) {  // as many whole iterations as fit
        const uint64_t k = Room() / inner;
        CopyOp head = op;
        head.loops[0].count = k;
        Emit(k == 1 ? DropOuterLoop(head) : head);
        SkipIterations(op, k);
        Close();
        continue;
      }
      if (filled_ > 0) {  // not one iteration fits: the next piece
        Close();
        continue;
      }
      // One iteration is larger than a piece: cut it on its own.
      Add(DropOuterLoop(op));
      SkipIterations(op, 1);
    }
  }

  std::vector<CopyProgram> Finish() {
    Close();
    return std::move(out_);
  }

 private:
  uint64_t Room() const { return piece_ - filled_; }

  void Close() {
    if (current_.ops.empty()) return;
    TallyProgram(current_);
    out_.push_back(std::move(current_));
    current_ = CopyProgram{};
    filled_ = 0;
  }

  // Appends `op` (it fits) with the slot side packed from `filled_`: the
  // slot's strides are those of a dense loop nest of the op's shape.
  void Emit(const CopyOp& op) {
    std::vector<CopyLoop> loops(op.loops.begin(), op.loops.begin() + op.num_loops);
    uint64_t dense = op.run_bytes;
    for (size_t i = loops.size(); i-- > 0;) {
      (side_ == PackSide::kPack ? loops[i].dst_stride : loops[i].src_stride) = dense;
      dense *= loops[i].count;
    }
    CopyOp out;
    out.run_bytes = op.run_bytes;
    out.src_offset = side_ == PackSide::kPack ? op.src_offset : filled_;
    out.dst_offset = side_ == PackSide::kPack ? filled_ : op.dst_offset;
    FoldLoops(std::move(loops), out);
    filled_ += op.bytes();
    current_.ops.push_back(out);
    if (Room() == 0) Close();
  }

  const uint64_t piece_;
  const PackSide side_;
  std::vector<CopyProgram> out_;
  CopyProgram current_;
  uint64_t filled_ = 0;  // bytes of current_
};

}  // namespace

std::vector<CopyProgram> CutPacked(const CopyProgram& p, uint64_t piece_bytes, PackSide side) {
  Cutter cutter(std::max<uint64_t>(piece_bytes, 1), side);
  for (const CopyOp& op : p.ops) cutter.Add(op);
  return cutter.Finish();
}

}  // namespace isometry
