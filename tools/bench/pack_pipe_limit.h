// What a served read's design can reach on this machine, for the datatype
// rows (docs/benchmarks/datatypes.md): two threads of one process run a
// vector copy's pack and unpack pieces through a ring of slots, as the
// publisher and the reader of a served read do
// (docs/guides/client-memory.md, "Served reads"), with the same piece size
// and ring and nothing else: no second process, no lane protocol, no
// sleeping, no daemon. A copy between two processes' private memories
// that moves the bytes twice (packed by one process, unpacked by the
// other; MPI's shared-memory transports do the same) cannot run faster
// than this; where the kernel moves them once instead (process_vm_readv,
// the rows' vs_cma_zero_copy), a small block costs it a page lookup each.
#pragma once

#include <chrono>
#include <cstdint>

namespace isometry::bench {

// Payload GB/s of a vector of 2 MiB in blocks of `block` bytes at a stride
// of twice that (the datatype rows' vector kernel, the same layout on both
// sides), packed on one thread and unpacked on another, over about
// `budget`: the best of a few windows, packing straight into the slots and
// packing aside then copying into them, the faster kept (the publisher
// times both ways and keeps the faster). `block` divides 2 MiB.
double PackPipeLimitGBps(uint64_t block, std::chrono::milliseconds budget);

}  // namespace isometry::bench
