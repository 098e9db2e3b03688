// The datatypes of the datatype benchmark rows (issue #14) as core
// Datatypes: the same types tools/bench/mpi_datatype.c builds with MPI for
// the peers' side of each row (keep the two in step; its header comment
// describes each kernel).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/datatype.h"
#include "core/status.h"

namespace isometry::bench {

// One side of a kernel: `count` elements of `type` whose origin is byte 0
// of a buffer of `span` bytes.
struct KernelSide {
  Datatype type = Datatype::Basic(BasicType::kByte);
  int64_t count = 1;
  int64_t span = 0;
};

struct DatatypeKernel {
  std::string name;
  KernelSide send;
  KernelSide recv;
  // Packed bytes one message moves (send.type.size() x send.count).
  int64_t packed_bytes() const { return send.type.size() * send.count; }
};

// The kernel of mpi_datatype.c's KERNEL argument ("vector" takes `block`,
// a power of two from 1 to 2 MiB). InvalidArgument for an unknown name.
Result<DatatypeKernel> MakeDatatypeKernel(const std::string& name, int64_t block = 64);

// The DDTBench-style kernels, in the order the benchmark prints them.
std::vector<std::string> DatatypeKernelNames();

}  // namespace isometry::bench
