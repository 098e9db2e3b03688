#include "layout/copy_program.h"

namespace isometry {

uint64_t CopyOp::runs() const {
  uint64_t n = 1;
  for (int i = 0; i < num_loops; ++i) {
    n *= loops[i].count;
  }
  return n;
}

uint64_t CopyOp::bytes() const { return runs() * run_bytes; }

std::shared_ptr<const CopyProgram> ContiguousProgram(uint64_t bytes) {
  auto p = std::make_shared<CopyProgram>();
  CopyOp op;
  op.run_bytes = bytes;
  p->ops.push_back(op);
  p->bytes = bytes;
  p->runs = 1;
  return p;
}

}  // namespace isometry
