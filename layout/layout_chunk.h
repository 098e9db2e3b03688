// One chunk of a layout's packed stream, found from the layout itself.
//
// A box of an instance packs in AOS C order (LayoutForm, datatype_form.h):
// for each point in row-major order, each field in field order. When the
// fields are addressed differently (SOA over fields of different sizes)
// that stream is a list of runs, two or more a point, which no whole-box
// form may hold past its bounds. A copy of such a layout against a
// datatype is cut into chunks of the packed stream anyway (the runtime's
// chunks, layout/copy_end.h), so the layout end is described
// chunk by chunk instead:
//
//  - LayoutRangeForm: the runs of bytes [begin, end) of the stream, as a
//    form to pair against the other end's (CompileFormCopy). It walks only
//    the chunk's points, so its bounds apply per chunk.
//  - LayoutSlotProgram: the copy between those bytes packed densely (a
//    ring slot, staging) and the layout, compiled by the layout compiler
//    (CompileCopy loops each field at its own stride): no walk, no list, a
//    handful of ops per chunk whatever its size.
//
// Pure and thread-safe.
#pragma once

#include <cstdint>

#include "core/box.h"
#include "core/instance.h"
#include "core/status.h"
#include "layout/copy_program.h"
#include "layout/datatype_form.h"

namespace isometry {

// The box of a layout instance a copy packs; `shape` contains `box`.
struct LayoutBox {
  InstanceShape shape;
  Box box;
  // Bytes of the packed stream: points x the bytes of one point's fields.
  uint64_t bytes() const;
};

// Bytes [begin, end) of the box's AOS C-order stream as a form (pieces in
// pack order, offsets from the instance's first byte; not canonical).
// Errors: OutOfRange for a range outside the stream; ResourceExhausted
// naming the layout side past kMaxFormWalkSegments runs in the range.
Result<CanonicalForm> LayoutRangeForm(const LayoutBox& l, uint64_t begin, uint64_t end);

// The program copying bytes [begin, end) of the stream between a dense
// buffer holding them from its offset 0 (the slot) and the instance
// (offsets from its first byte): slot -> instance when `to_layout`, else
// instance -> slot. Whole points run as CompileCopy from/to the AOS
// row-major layout over them (at most 2 x dims - 1 boxes); a point cut
// by the range is a few single runs. Errors: OutOfRange as above.
Result<CopyProgram> LayoutSlotProgram(const LayoutBox& l, uint64_t begin, uint64_t end,
                                      bool to_layout);

}  // namespace isometry
