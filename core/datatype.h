// MPI-style derived datatypes as a first-class description of memory.
//
// A Datatype is an immutable tree of shared nodes, built by the constructors
// below, which are named and parameterised as MPI users expect
// (MPI_Type_contiguous, MPI_Type_vector, ...). No MPI library is involved:
// the semantics are reimplemented here, following the MPI 4.0 standard and,
// where the standard leaves room, MPICH 4.0 (tests/unit/datatype_mpi_test.cc
// checks them byte for byte against MPICH and Open MPI).
//
// Every constructor validates its arguments and returns an error, never
// crashes: descriptions arrive from clients over the network. All sizes,
// bounds and extents are int64 byte counts (MPI_Aint); every computation is
// checked and a result outside +-kMaxDatatypeBytes is an error. A description
// is bounded (kMaxDatatypeDepth, kMaxDatatypeWeight), so building, printing
// and walking one element costs at most O(weight + segments).
//
// Semantics worth knowing (all as MPICH 4.0 defines them):
//  - lb/ub/extent follow MPICH's formulas, also for corner cases the standard
//    leaves open: a vector or indexed_block with blocklength 0 still spans
//    its strides; zero-length blocks of indexed/hindexed/struct are ignored;
//    a type with count 0, an all-zero-length indexed/struct or a zero-size
//    old type in contiguous/vector/indexed becomes the empty type (size 0,
//    lb = ub = true_lb = true_ub = 0).
//  - Struct pads its extent up to a multiple of the largest alignment of its
//    entries with blocklength > 0 (the standard's epsilon; the empty type,
//    and a subarray or darray holding no data, have no alignment), unless every
//    entry has the same old type, which MPICH treats as hindexed: no padding.
//    "Same" is SameType, except that integers of one size are one type and
//    a wrapper holding exactly one X at offset 0 with X's bounds (e.g.
//    contiguous(1, X)) is X, as MPICH 4.0 behaves. A struct holding no data
//    is the empty type.
//    Indexed/hindexed/vector and the others never pad. Open MPI differs: it
//    pads hindexed/hvector extents of unaligned blocks too, and never pads a
//    struct whose entries are resized types (it keeps their ub as sticky
//    markers); it also gives blocklength-0 vectors and indexed_blocks an
//    empty extent. We follow MPICH.
//  - Resized sets lb and extent (which may be negative); true bounds, size
//    and alignment are the old type's.
//  - count > 1 elements repeat at the extent.
#pragma once

#include <absl/functional/function_ref.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace isometry {

// Predefined types. The C aliases (MPI_SHORT, MPI_INT, MPI_LONG, ...) are the
// fixed-width ones of the same size on LP64 Linux.
enum class BasicType : uint8_t {
  kByte,  // MPI_BYTE
  kChar,  // MPI_CHAR
  kInt8,
  kInt16,  // MPI_SHORT
  kInt32,  // MPI_INT
  kInt64,  // MPI_LONG, MPI_LONG_LONG
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kFloat,       // 4 bytes, alignment 4
  kDouble,      // 8 bytes, alignment 8
  kLongDouble,  // x86-64 long double: 16 bytes (10 significant), alignment 16
};
inline constexpr int kNumBasicTypes = 13;
int64_t BasicTypeSize(BasicType t);
// Used only for the padding of struct extents.
int64_t BasicTypeAlignment(BasicType t);
const char* BasicTypeName(BasicType t);  // "int32"

enum class DatatypeKind : uint8_t {
  kBasic,
  kContiguous,
  kVector,        // vector and hvector (stride kept in bytes)
  kIndexed,       // indexed and hindexed (displacements kept in bytes)
  kIndexedBlock,  // indexed_block and hindexed_block
  kStruct,
  kResized,
  kSubarray,
  kDarray,
};

enum class ArrayOrder : uint8_t { kC, kFortran };
enum class Distribution : uint8_t { kNone, kBlock, kCyclic };
// MPI_DISTRIBUTE_DFLT_DARG.
inline constexpr int64_t kDefaultDarg = -1;

// Limits on one description (documented in docs/concepts/datatypes.md, "Datatypes").
inline constexpr int kMaxDatatypeDepth = 32;
// Nodes plus array entries, each counted once per reference from a parent:
// bounds memory, ToString and the per-element walking overhead.
inline constexpr int64_t kMaxDatatypeWeight = int64_t{1} << 20;
inline constexpr int kMaxArrayDims = 32;                        // subarray/darray ndims
inline constexpr int64_t kMaxDatatypeBytes = int64_t{1} << 60;  // |any bound|

// One dimension of a subarray or darray, in pack order's nesting (slowest
// first): the local indices are, for k < full_blocks, first + k * cycle +
// [0, block), then first + full_blocks * cycle + [0, tail). One element of the
// old type at index i lies at i * elem_stride bytes from the array origin.
// A subarray dimension is one block (full_blocks 1, tail 0).
struct ArrayDim {
  int64_t first = 0;
  int64_t block = 0;
  int64_t cycle = 0;
  int64_t full_blocks = 0;
  int64_t tail = 0;
  int64_t elem_stride = 0;  // bytes
  int64_t local_count() const { return full_blocks * block + tail; }
};

class Datatype;

// Derived properties of a node (all in bytes).
struct DatatypeInfo {
  int64_t size = 0;
  int64_t lb = 0;
  int64_t extent = 0;
  int64_t true_lb = 0;
  int64_t true_extent = 0;
  int64_t alignment = 1;  // 0 for the empty type
  // One element is exactly one run [lb, lb + size) in pack order and
  // extent == size (so consecutive elements are one run too).
  bool dense = false;
  uint64_t max_segments = 0;  // upper bound of runs per element (saturating)
  int64_t weight = 1;         // see kMaxDatatypeWeight
  int depth = 1;
};

// The node of a tree. Fields not used by a kind are empty/zero.
struct DatatypeNode {
  DatatypeKind kind = DatatypeKind::kBasic;
  BasicType basic = BasicType::kByte;  // kBasic
  // How the user wrote it, for ToString only: element units (vector,
  // indexed, indexed_block) versus bytes (hvector, hindexed, ...).
  bool in_elements = false;
  int64_t count = 0;                   // contiguous, vector; entries of indexed/struct
  int64_t blocklength = 0;             // vector, indexed_block
  int64_t stride = 0;                  // vector, bytes
  std::vector<int64_t> blocklengths;   // indexed, struct
  std::vector<int64_t> displacements;  // indexed, indexed_block, struct: bytes
  std::vector<Datatype> children;      // one old type; struct: one per entry
  int64_t new_lb = 0;                  // resized
  int64_t new_extent = 0;              // resized
  // subarray/darray: the arguments as given, plus dims in pack nesting
  // order (slowest first) for walkers and compilers.
  ArrayOrder order = ArrayOrder::kC;
  std::vector<int64_t> sizes;             // sizes / gsizes
  std::vector<int64_t> subsizes, starts;  // subarray
  int64_t nprocs = 0, rank = 0;           // darray
  std::vector<Distribution> distribs;     // darray
  std::vector<int64_t> dargs, psizes;     // darray
  std::vector<ArrayDim> dims;             // both
  DatatypeInfo info;
};

// A handle to an immutable node; cheap to copy, safe to share between
// threads. Always valid (there is no null Datatype).
class Datatype {
 public:
  // --- Constructors (MPI names; all arguments are validated) ---
  static Datatype Basic(BasicType t);
  static Result<Datatype> Contiguous(int64_t count, const Datatype& old);
  // Stride in elements of `old` (its extent).
  static Result<Datatype> Vector(int64_t count, int64_t blocklength, int64_t stride,
                                 const Datatype& old);
  // Stride in bytes.
  static Result<Datatype> Hvector(int64_t count, int64_t blocklength, int64_t stride_bytes,
                                  const Datatype& old);
  // Displacements in elements of `old`.
  static Result<Datatype> Indexed(std::span<const int64_t> blocklengths,
                                  std::span<const int64_t> displacements, const Datatype& old);
  // Displacements in bytes.
  static Result<Datatype> Hindexed(std::span<const int64_t> blocklengths,
                                   std::span<const int64_t> displacements_bytes,
                                   const Datatype& old);
  static Result<Datatype> IndexedBlock(int64_t blocklength, std::span<const int64_t> displacements,
                                       const Datatype& old);
  static Result<Datatype> HindexedBlock(int64_t blocklength,
                                        std::span<const int64_t> displacements_bytes,
                                        const Datatype& old);
  static Result<Datatype> Struct(std::span<const int64_t> blocklengths,
                                 std::span<const int64_t> displacements_bytes,
                                 std::span<const Datatype> types);
  static Result<Datatype> Resized(const Datatype& old, int64_t lb, int64_t extent);
  // MPI_Type_create_subarray. 0 <= subsizes[i], starts[i] + subsizes[i] <=
  // sizes[i] (a zero subsize gives an empty type, as in MPICH; Open MPI
  // rejects it). The result has lb 0 and the extent of the whole array.
  static Result<Datatype> Subarray(std::span<const int64_t> sizes,
                                   std::span<const int64_t> subsizes,
                                   std::span<const int64_t> starts, ArrayOrder order,
                                   const Datatype& old);
  // MPI_Type_create_darray; dargs[i] may be kDefaultDarg.
  static Result<Datatype> Darray(int64_t size, int64_t rank, std::span<const int64_t> gsizes,
                                 std::span<const Distribution> distribs,
                                 std::span<const int64_t> dargs, std::span<const int64_t> psizes,
                                 ArrayOrder order, const Datatype& old);

  // --- Properties (MPI_Type_size, MPI_Type_get_extent, ..._true_extent) ---
  int64_t size() const { return node_->info.size; }
  int64_t lb() const { return node_->info.lb; }
  int64_t ub() const { return node_->info.lb + node_->info.extent; }
  int64_t extent() const { return node_->info.extent; }
  int64_t true_lb() const { return node_->info.true_lb; }
  int64_t true_extent() const { return node_->info.true_extent; }
  const DatatypeInfo& info() const { return node_->info; }
  DatatypeKind kind() const { return node_->kind; }
  const DatatypeNode& node() const { return *node_; }

  // One line, e.g. "vector(4,1,8B; int32)"; nested types inline; long
  // lists abbreviated; at most max_chars (then "..."). ParseDatatype
  // (core/datatype_text.h) reads an unabbreviated one back.
  std::string ToString(size_t max_chars = 4096) const;

 private:
  explicit Datatype(std::shared_ptr<const DatatypeNode> n) : node_(std::move(n)) {}
  friend struct DatatypeFactory;  // core/datatype_internal.h
  std::shared_ptr<const DatatypeNode> node_;
};

// Same tree (same node, or equal kinds, arguments as written and children):
// what makes a struct "homogeneous" (no padding). MPICH compares type
// handles there, so two equal trees built separately are the same type here
// but not in MPICH; a description sent over the network has no handles.
bool SameType(const Datatype& a, const Datatype& b);

// --- The typemap of `count` elements, in pack order ---

// A contiguous run of the typemap: `length` bytes at `offset` from the
// buffer origin (MPI's buf; may be negative when lb < 0).
struct Segment {
  int64_t offset = 0;
  int64_t length = 0;
  bool operator==(const Segment&) const = default;
};

// Calls fn for each run of `count` elements in pack order, adjacent runs
// merged, zero-length ones skipped; fn returns false to stop early. Nothing
// is allocated. Errors: count < 0, or the span of count elements overflows.
Status ForEachSegment(const Datatype& type, int64_t count,
                      absl::FunctionRef<bool(const Segment&)> fn);
// The same runs as a vector; ResourceExhausted past max_segments.
Result<std::vector<Segment>> Segments(const Datatype& type, int64_t count, size_t max_segments);

// The bytes of buffer that `count` elements touch are [origin + true_lb,
// origin + (count - 1) * extent + true_ub) for extent >= 0 (see
// SpanOfElements); Pack/Unpack check every run against the buffer.
struct ByteSpan {
  int64_t begin = 0;  // relative to the origin; may be negative
  int64_t end = 0;
};
Result<ByteSpan> SpanOfElements(const Datatype& type, int64_t count);

// MPI_Pack / MPI_Unpack of `count` elements whose origin (MPI's buf) is
// buffer[origin]. `packed` must hold count * size() bytes. OutOfRange if a
// run falls outside buffer, InvalidArgument for a short `packed`.
Status Pack(std::span<const uint8_t> buffer, int64_t origin, const Datatype& type, int64_t count,
            std::span<uint8_t> packed);
Status Unpack(std::span<const uint8_t> packed, const Datatype& type, int64_t count,
              std::span<uint8_t> buffer, int64_t origin);

}  // namespace isometry
