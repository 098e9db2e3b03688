// One end of a copy as the compiler sees it: an instance's shape and, for a
// datatype end, its form (docs/concepts/datatypes.md, "Datatypes";
// docs/architecture.md, "Copy ends").
//
// A layout end is its shape alone. A form end (a datatype instance, or a
// layout instance copied against one) moves a stream of `bytes` bytes: the
// i-th byte of the source's stream goes to the i-th byte of the
// destination's. Both ends of such a copy are then planned and chunked as
// that stream (StreamShape), so paths, chunks, ring slots and the network
// see dense bytes; only a hop that reads or writes a form end compiles its
// chunk [a, b) of the stream from the form (ChunkCompiler,
// layout/chunk_compiler.h), which is where fragmentation costs.
//
// Everything above this room asks these functions, never which kind an
// end is. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/box.h"
#include "core/instance.h"
#include "core/status.h"
#include "layout/datatype_form.h"
#include "layout/layout_chunk.h"

namespace isometry {

struct EndForm {
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
  uint64_t bytes = 0;  // of the stream
  uint64_t span = 0;   // storage bytes: every run lies in [0, span)
  uint64_t runs = 0;   // contiguous runs (the fragmentation)
  std::string what;    // what the user named, for plans and errors
};

// What the compiler needs of an end, borrowed for one call: `shape` (for a
// form end, the stream's) and the form, if any (null for a layout end and
// for ring slots, staging and the network, which hold the stream densely).
struct CopyEnd {
  const InstanceShape& shape;
  const EndForm* form = nullptr;
};

// Checks and completes a form end: the form's offsets must be >= 0 and its
// runs inside `span`; `bytes` must be > 0.
Result<std::shared_ptr<const EndForm>> MakeFormEnd(CanonicalForm form, uint64_t span,
                                                   std::string what);

// The end of `l`'s box described chunk by chunk (`layout` set); `runs` is
// an upper bound (a run a field a point). InvalidArgument for an empty box.
Result<std::shared_ptr<const EndForm>> MakeLayoutChunksEnd(LayoutBox l, std::string what);

// The stand-in for the far end of a cross-node copy whose end here is
// `here`: none for a layout end; for a form end, as many dense bytes from
// offset 0 (the far end's form stays on its node).
Result<std::shared_ptr<const EndForm>> FarEndForm(const EndForm* here);

// The box a copy with this end takes: a form end's copy moves whole
// streams (none), a layout end's keeps `box`.
std::optional<Box> CopyBox(const EndForm* form, std::optional<Box> box);

// `bytes` dense bytes from offset 0: a ring slot's, staging's or the
// network's view of a stream (bytes <= INT64_MAX).
CanonicalForm DenseForm(uint64_t bytes);

// `form` with every offset moved by `delta` (groups' bodies are relative).
CanonicalForm ShiftForm(CanonicalForm form, int64_t delta);

// How a form end is planned and chunked: `bytes` entries of one byte in
// one dimension; both ends of a form copy have this shape.
InstanceShape StreamShape(uint64_t bytes);

// Whether two ends may be copied one to the other as far as their forms
// go: both layout ends, or both form ends of streams of the same size
// (then the copy moves whole streams: `has_box` is refused).
// InvalidArgument naming both otherwise.
Status MatchForms(const EndForm* src, const EndForm* dst, bool has_box);

// Whether a copy between the two ends in one hop would pair every run of
// every chunk (a datatype against a layout described chunk by chunk):
// staged through a dense slot at either end instead, each hop is a
// compact program.
bool PairsEveryRun(const EndForm* src, const EndForm* dst);

// The bytes of storage a copy may touch from the instance's first byte.
uint64_t StorageBytes(const InstanceShape& shape, const EndForm* form);

// Whether a copy of `box` (of `shape`, for a layout end; a form end's copy
// moves its whole stream) writes every byte of the end's storage.
bool CoversStorage(const InstanceShape& shape, const EndForm* form, const Box& box);

// What the user named, for plans and errors: the form end's own words, or
// `fallback` (the caller's name for a layout end).
std::string DescribeEnd(const EndForm* form, std::string fallback);

}  // namespace isometry
