// The one way a chunk of a copy becomes a program: a request's two ends
// (layout/copy_end.h) and its chunk in, the copy program and where it
// starts at each end out, memoized (FALCON-X §4.3).
//
// Between two layout ends, the layout compiler (layout/compiler.h) over
// the chunk's box, cached by both shapes and the box (ProgramCache). When
// either end has a form, the chunk is bytes [lo, hi) of the stream on
// every hop: each form end's chunk is its form restricted to that range
// (or its layout's runs walked), a dense end's is those bytes from its
// first, and the pair is compiled by the form compiler
// (layout/form_compiler.h), cached by both forms moved to offset 0
// (FormProgramCache), so chunks that differ only by where they start
// share one program. A layout end described chunk by chunk against a
// dense one is a layout program (LayoutSlotProgram), no pairing.
//
// Both stores are bounded by entries and bytes; their counts are reported
// apart (isoctl shows "programs" and "datatype programs").
//
// Thread-safe: every call may come from any channel thread; compilation
// runs outside the stores' locks.
#pragma once

#include <cstdint>
#include <memory>

#include "core/box.h"
#include "core/status.h"
#include "layout/copy_end.h"
#include "layout/copy_program.h"
#include "layout/form_cache.h"
#include "layout/program_cache.h"

namespace isometry {

// A chunk's program. Its offsets are relative to `src_shift` and
// `dst_shift` bytes past each end's first storage byte (0 for layout
// programs and for dense ends).
struct ChunkProgram {
  std::shared_ptr<const CopyProgram> program;
  uint64_t src_shift = 0;
  uint64_t dst_shift = 0;
};

// The program of a whole copy between two ends, uncached (a direct read's
// lease hands it to a client, docs/guides/client-memory.md "Direct
// reads"): between layout ends the layout compiler's over the source's
// bounds; else the forms paired, a destination layout end described chunk
// by chunk standing as its dense stream from offset 0 (its reader unpacks
// that piece by piece, LayoutSlotProgram; such a source is refused). Compiling may take
// milliseconds for an irregular type: callers hold no lock.
Result<FormCopy> CompileWhole(const CopyEnd& src, const CopyEnd& dst);

class ChunkCompiler {
 public:
  // Each store's bounds: entries and bytes.
  ChunkCompiler(size_t layout_entries, uint64_t layout_bytes, size_t form_entries,
                uint64_t form_bytes)
      : layouts_(layout_entries, layout_bytes), forms_(form_entries, form_bytes) {}

  Result<ChunkProgram> Get(const CopyEnd& src, const CopyEnd& dst, const Box& chunk);

  const ProgramCache& layouts() const { return layouts_; }
  const FormProgramCache& forms() const { return forms_; }

 private:
  ProgramCache layouts_;
  FormProgramCache forms_;
};

}  // namespace isometry
