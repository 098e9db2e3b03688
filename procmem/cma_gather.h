// Fragmented reads of another process, packed here: instead of one system
// call per remote run (on /proc/<pid>/mem, each with its own page-table
// walk; docs/benchmarks/design-measurements.md, "Direct and served
// reads"), read the whole extent the program's runs lie in with one
// contiguous CmaCopy into a bounce buffer, then run the program from that
// buffer with the layout executor (FALCON-X's pack/unpack choice, made per request from the
// program's fragmentation). Only for reads: writing an extent back would
// overwrite bytes between the runs that the client may change meanwhile.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "core/status.h"
#include "layout/copy_program.h"
#include "procmem/cma_copy.h"

namespace isometry {

// The cost model both the channel and the planner use: a remote run costs
// about kCmaRunNanos, reading a byte of extent about kCmaExtentByteNanos
// (read + the local gather pass). Gathering wins when runs * run cost
// exceeds extent * byte cost; extents above kMaxGatherBytes never gather.
inline constexpr double kCmaRunNanos = 1500;
inline constexpr double kCmaExtentByteNanos = 0.4;
inline constexpr uint64_t kMaxGatherBytes = uint64_t{32} << 20;

// [begin, end) of the source offsets `program` reads (end exclusive).
struct ProgramExtent {
  uint64_t begin = 0;
  uint64_t end = 0;
};
std::optional<ProgramExtent> SourceExtent(const CopyProgram& program);

// Whether, by the cost model above, `runs` reads cost more than reading
// their `extent` bytes once and gathering (size bound aside).
bool RunsCostMoreThanExtent(uint64_t runs, uint64_t extent);

// Whether reading `runs` runs spread over `extent` bytes goes faster as one
// read of the extent and a local gather (extents up to kMaxGatherBytes).
bool GatherPays(uint64_t runs, uint64_t extent);

// Runs a read request (target.direction kRead) by gathering when it pays;
// nullopt when it does not (the caller copies run by run). A gather whose
// extent read fails (a page between the runs is not mapped) also answers
// nullopt: the runs themselves may still be readable.
std::optional<Status> TryGatherRead(const CopyProgram& program, const CmaTarget& target,
                                    const std::atomic<bool>* cancelled);

}  // namespace isometry
