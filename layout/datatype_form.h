// Canonical forms: one normal shape for "where the bytes of a packed stream
// live", whatever described them (an MPI-style datatype, or an instance
// shape and a box). Equal packed streams have equal forms, so equivalent
// descriptions built differently hash alike and share one compiled program
// (FALCON-X §4.3, memoized translation).
//
// A form is a list of pieces in pack order. A simple piece is `run`
// contiguous bytes repeated over a loop nest (outermost loop first) from
// `offset`:
//
//   for i0 < loops[0].count: ... for ik < loops[k].count:
//     the run at offset + sum(i_j * loops[j].stride)
//
// A group piece (non-empty `body`, run 0) repeats a short list of simple
// pieces instead: at every point of its loop nest, each body piece moved by
// offset + sum(i_j * loops[j].stride) (body offsets are relative, the first
// is 0). Groups hold arrays of structs with holes between fields of
// different sizes, e.g. {int; double} padded to 16 bytes.
//
// Definition (what makes the form canonical): take the typemap's runs in
// pack order with adjacent runs merged (exactly ForEachSegment's runs), then
// group greedily, level by level: level 1 turns each maximal chain of
// consecutive equal-length runs at a constant stride into one piece with one
// loop; level m does the same to consecutive pieces with m-1 loops and equal
// run and loops, adding an outer loop. Chains start left to right and are
// maximal; pieces get at most kMaxFormLoops loops. Then a period pass: left
// to right, the repetition (at least twice, at a constant step) of a block
// of 2..kMaxFormPeriod consecutive simple pieces that covers the most pieces
// (ties: the shorter block) becomes one group piece with one loop; then
// consecutive equal groups at a constant step gain outer loops as above.
// The form is a function of
// the stream alone, so equal streams <=> equal forms. In consequence: unit
// loops never appear, every count is >= 2, a dense level is folded into the
// run or the loop inside it, nested vectors become one multi-level piece, an
// indexed type with regular displacements becomes a vector-like piece, and
// an irregular remainder stays a list of pieces (an index list).
//
// Cost: a regular tree (contiguous, vector, subarray, resized, and
// indexed/struct whose blocks repeat regularly) is combined from its
// children's forms in O(tree), never expanded; so is a count or vector of
// a small irregular element (a group). A group repeated again is walked. Irregular nodes are walked
// segment by segment (ForEachSegment), at most kMaxFormWalkSegments runs,
// and a form holds at most kMaxFormPieces pieces; past either the result is
// ResourceExhausted (the caller then packs/unpacks instead).
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/box.h"
#include "core/datatype.h"
#include "core/instance.h"
#include "core/status.h"

namespace isometry {

inline constexpr int kMaxFormLoops = 12;                           // = kMaxCopyLoops
inline constexpr size_t kMaxFormPieces = size_t{1} << 20;          // pieces of one form
inline constexpr int64_t kMaxFormWalkSegments = int64_t{1} << 21;  // runs walked
inline constexpr size_t kMaxFormPeriod = 8;                        // pieces in a group's body

struct FormLoop {
  int64_t count = 0;   // >= 2
  int64_t stride = 0;  // bytes, any sign
  bool operator==(const FormLoop&) const = default;
};

struct FormPiece {
  int64_t offset = 0;           // bytes from the origin (may be negative)
  int64_t run = 0;              // bytes, > 0
  std::vector<FormLoop> loops;  // outermost first, at most kMaxFormLoops
  std::vector<FormPiece> body;  // a group's simple pieces; empty: a simple piece
  bool operator==(const FormPiece&) const = default;

  uint64_t iterations() const;  // product of the loop counts
  uint64_t runs() const;        // contiguous runs
  uint64_t bytes() const;
  int64_t lowest() const;  // smallest offset any run starts at
};

struct CanonicalForm {
  std::vector<FormPiece> pieces;  // pack order
  bool operator==(const CanonicalForm&) const = default;

  // Bytes of the packed stream (saturating at 2^64-1).
  uint64_t bytes() const;
  // Contiguous runs of the stream (its fragmentation, for the planner's
  // CMA-vs-pack choice); O(pieces x loops), nothing expanded.
  uint64_t runs() const;
  // The most negative offset touched (a datatype's true lb for count 1);
  // 0 for an empty form.
  int64_t lowest() const;
};

// The form of `count` elements of `type` from its origin (MPI's buf).
// Errors: InvalidArgument/OutOfRange as SpanOfElements; ResourceExhausted
// past the bounds above.
Result<CanonicalForm> DatatypeForm(const Datatype& type, int64_t count);

// The form of `box` of an instance in AOS C order, the order an MPI user
// expects of an array of structs: for each point of the box in row-major
// order (the last dimension fastest), each field in field order, its bytes.
// Offsets are from the instance's first byte. Errors: the shape or box is
// invalid, the box lies outside the shape's bounds, or the bounds above.
Result<CanonicalForm> LayoutForm(const InstanceShape& shape, const Box& box);
// Whether LayoutForm(shape, box) is one piece, found without walking the
// box (AOS, or SOA over fields of equal sizes, with affine dimensions).
// False for a list of runs, or an invalid shape or box.
bool LayoutFormRegular(const InstanceShape& shape, const Box& box);

// The canonical serialization: "ISOFORM1" magic, then little-endian int64s:
// the piece count, then per piece offset, run, loop count, (count, stride)
// for each loop, body piece count and the body pieces the same way.
// Stable across processes, builds and hosts.
std::string SerializeForm(const CanonicalForm& form);
// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) of
// SerializeForm: stable, so peers may refer to a form by its hash. Not
// collision resistant against an adversary: a cache keyed by it must
// compare the forms (operator==) before trusting a hit.
uint64_t FormHash(const CanonicalForm& form);
// FormHash of bytes already serialized (what a peer sent).
uint64_t SerializedFormHash(std::string_view serialized);

// The most bytes ParseForm takes (a form past it is not sent to peers).
inline constexpr size_t kMaxSerializedForm = size_t{8} << 20;
// The form SerializeForm wrote into `bytes`, checked as input from
// outside: magic, every count and size in range (loops 2..2^40 iterations,
// at most kMaxFormLoops per piece, groups of simple pieces only, runs > 0),
// every piece's reach and the packed size below 2^62, no trailing bytes.
// It need not be canonical. Errors: InvalidArgument saying what is wrong.
Result<CanonicalForm> ParseForm(std::string_view bytes);
// The form for people (isoctl plan, RegisterDatatype's answer): pieces in
// pack order, "; "-separated; a simple piece is "RUN@OFFSET" followed by
// "xCOUNT/STRIDE" per loop, outermost first; a group is its body in
// parentheses, e.g. "8@0 x1024/16" (vector(1024, 8, 16) of bytes) or
// "(4@0, 8@8)@0 x100/16". Past `max_pieces` pieces: "; ... (N more)".
std::string FormText(const CanonicalForm& form, size_t max_pieces = 16);

// The grouping of the definition above applied to merged runs in pack order
// (pieces without loops), e.g. from ForEachSegment.
std::vector<FormPiece> GroupPieces(std::vector<FormPiece> pieces);

}  // namespace isometry
