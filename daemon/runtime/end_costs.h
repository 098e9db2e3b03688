// What a copy's ends cost on its path, beyond what the planner saw.
//
// The planner plans a copy between form ends (layout/copy_end.h) as the
// dense stream both move; the hops that read the source and write the
// destination move that end's runs instead (its average run, bytes /
// runs), so their throughput is read at that size (on cma, one iovec or
// system call per run). A cma hop reading a fragmented source may instead
// read the extent of each chunk in one call and gather it here
// (procmem/cma_gather.h); it is costed at the better of the two, as the
// channel chooses.
#pragma once

#include <cstdint>

#include "layout/copy_end.h"
#include "planner/topology.h"

namespace isometry {

// Costs `path` for its ends' forms: nothing changes for layout ends, nor
// for a path nobody evaluated.
void CostEnds(Path& path, const EndForm* src, const EndForm* dst, const Topology& topo);

// Whether hop 0 of `path` reads PROCESS memory over cma.
bool ReadsProcess(const Path& path, const Topology& topo);

// Whether a cma hop reading `src` chunk by chunk gathers (by the channel's
// own rule, for a chunk of average density) rather than reading run by
// run.
bool CmaGathers(const EndForm& src, uint64_t chunk_bytes);

}  // namespace isometry
