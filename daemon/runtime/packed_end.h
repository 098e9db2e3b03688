// A copy end described by a canonical form instead of a layout: a datatype
// instance, or a layout instance copied against one (docs/concepts/datatypes.md, "Datatypes").
// Such a copy moves a packed stream of `bytes` bytes: the i-th byte of the
// source's stream goes to the i-th byte of the destination's.
//
// The runtime plans and chunks such a copy as a one-dimensional array of
// `bytes` one-byte entries (PackedShape), so paths, chunks, ring slots and
// the network see dense packed bytes; only a hop that reads or writes a
// user's end compiles its chunk [a, b) of the stream from the end's form
// (RestrictForm, then CompileFormCopy), which is where fragmentation costs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/instance.h"
#include "core/status.h"
#include "layout/datatype_form.h"
#include "layout/form_cache.h"
#include "layout/layout_chunk.h"
#include "planner/topology.h"

namespace isometry {

struct PackedEnd {
  // Offsets from the instance's first storage byte, all >= 0: the node
  // rebases a datatype's form (whose offsets may be negative) onto the
  // first byte it touches. Empty when `layout` is set.
  CanonicalForm form;
  // A layout end whose stream is a list of runs (SOA over fields of
  // different sizes), described chunk by chunk (layout/layout_chunk.h)
  // rather than by a form of the whole box: no bound applies to the box,
  // only per chunk. Set only for copies on this node (a peer, a watch or a
  // direct read needs `form`).
  std::optional<LayoutBox> layout;
  uint64_t bytes = 0;  // of the packed stream
  uint64_t span = 0;   // storage bytes: every run lies in [0, span)
  uint64_t runs = 0;   // contiguous runs (the fragmentation)
  std::string what;    // what the user named, for plans and errors
};

// Checks and completes an end: the form's offsets must be >= 0 and its
// runs inside `span`; `bytes` must be > 0.
Result<std::shared_ptr<const PackedEnd>> MakePackedEnd(CanonicalForm form, uint64_t span,
                                                       std::string what);

// The end of `l`'s box described chunk by chunk (`layout` set); `runs` is
// an upper bound (a run a field a point). InvalidArgument for an empty box.
Result<std::shared_ptr<const PackedEnd>> MakeLayoutChunksEnd(LayoutBox l, std::string what);

// `form` with every offset moved by `delta` (groups' bodies are relative).
CanonicalForm ShiftForm(CanonicalForm form, int64_t delta);

// How the runtime sees a packed end: `bytes` entries of one byte in one
// dimension; both ends of a packed copy have this shape.
InstanceShape PackedShape(uint64_t bytes);

// The cost model's view of a packed copy's path: the hops that read the
// source and write the destination move that end's runs (its average run,
// bytes / runs), not the dense packed array the planner saw, so their
// throughput is read at that size (on cma, one iovec or system call per
// run). A cma hop reading a fragmented source may instead read the extent
// of each chunk in one call and gather it here (procmem/cma_gather.h);
// it is costed at the better of the two, as the channel chooses. Does
// nothing to a path nobody evaluated.
void CostPackedEnds(Path& path, const PackedEnd& src, const PackedEnd& dst, const Topology& topo);
// Whether hop 0 of `path` reads PROCESS memory over cma.
bool ReadsProcess(const Path& path, const Topology& topo);

// Whether a cma hop reading `src` chunk by chunk gathers (by the channel's
// own rule, for a chunk of average density) rather than reading run by
// run.
bool CmaGathers(const PackedEnd& src, uint64_t chunk_bytes);

// The program for chunk [begin, end) of a packed copy. A null end is a
// ring slot (the chunk's bytes dense from its first byte). `src_shift` and
// `dst_shift` are what the program's offsets are relative to, from the
// end's first storage byte (0 for slots). A chunk-described layout end
// against a slot is a layout program (LayoutSlotProgram, no pairing);
// against a datatype its chunk's runs are walked and paired, with the
// form bounds applying to the chunk. Forms are cached moved to offset 0,
// so chunks that differ only by where they start share one program.
struct PackedChunk {
  std::shared_ptr<const CopyProgram> program;
  uint64_t src_shift = 0;
  uint64_t dst_shift = 0;
};
Result<PackedChunk> CompilePackedChunk(FormProgramCache& cache, const PackedEnd* src,
                                       const PackedEnd* dst, uint64_t begin, uint64_t end);

}  // namespace isometry
