// A copy program laid out for running it again and again.
//
// A CopyOp keeps room for kMaxCopyLoops loops inline (320 bytes), so a
// program of many short ops (a datatype of scattered points: an indexed
// type over thousands of atoms) is mostly op bytes, and running it walks
// a loop nest for every two or three runs. A FlatProgram keeps each run
// of such ops as one 24-byte step and longer ops beside, in the
// program's order, so that a program run many times (a served read's
// pieces) reads little more than its runs' offsets and lengths.
//
// Immutable after construction; Execute is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "layout/copy_program.h"

namespace isometry {

class FlatProgram {
 public:
  FlatProgram() = default;
  explicit FlatProgram(const CopyProgram& program);

  uint64_t bytes() const { return bytes_; }
  uint64_t runs() const { return runs_; }

  // Runs every op of the program between two host buffers (its source
  // and destination offset 0), with cached stores, as ExecuteProgram does.
  void Execute(const std::byte* src, std::byte* dst) const;

 private:
  // A single run (`length` its bytes), or, with kLooped set in `length`,
  // the op looped_[length & ~kLooped].
  struct Step {
    uint64_t src = 0;
    uint64_t dst = 0;
    uint64_t length = 0;
  };
  static constexpr uint64_t kLooped = uint64_t{1} << 63;
  // Ops of at most this many runs become a step each run: a loop of two
  // or three short runs (which compilers make of scattered points that
  // happen to share a stride) costs more to walk than its runs do.
  static constexpr uint64_t kSpreadRuns = 8;

  std::vector<Step> steps_;
  std::vector<CopyOp> looped_;
  uint64_t bytes_ = 0;
  uint64_t runs_ = 0;
};

// Each of `programs`, flattened.
std::vector<FlatProgram> Flatten(const std::vector<CopyProgram>& programs);

}  // namespace isometry
