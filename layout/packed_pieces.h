// A copy program cut into pieces of its packed stream, so that two
// processes can run it through shared memory with no system call a run:
// the source process packs each piece from its own memory into a slot,
// and the destination process unpacks it from the slot into its own
// (docs/guides/client-memory.md, "Served reads"). The packed stream is the program's bytes in
// program order (op by op, each op's loops outermost first), so packing
// then unpacking every piece copies exactly what the program copies.
//
// The cut is a pure function of (program, piece_bytes): both processes
// compute it from the same program and agree on every piece without
// sending one.
#pragma once

#include <cstdint>
#include <vector>

#include "layout/copy_program.h"

namespace isometry {

enum class PackSide : uint8_t {
  kPack,    // source offsets -> [0, piece bytes) of a slot
  kUnpack,  // [0, piece bytes) of a slot -> destination offsets
};

// `p` cut into consecutive pieces of its packed stream, each of at most
// `piece_bytes` (> 0) bytes, as that side's programs: pieces[i].bytes is
// piece i's size, and piece i covers the packed bytes after pieces
// [0, i). A piece ends early where the next whole iteration of an op's
// loop would not fit, so pieces are full only for regular programs; a
// single run longer than a piece is cut within the run.
std::vector<CopyProgram> CutPacked(const CopyProgram& p, uint64_t piece_bytes, PackSide side);

}  // namespace isometry
