// Constructors of the block-structured datatypes (contiguous, vector,
// indexed, struct, resized) and the bounds arithmetic they share. The lb/ub
// formulas are MPICH's (see core/datatype.h for the corner cases).
#include "core/datatype.h"

#include <algorithm>
#include <utility>

#include "core/datatype_internal.h"

namespace isometry {

namespace {

struct BasicSpec {
  int64_t size;
  int64_t align;
  const char* name;
};
constexpr BasicSpec kBasics[kNumBasicTypes] = {
    {1, 1, "byte"},  {1, 1, "char"},   {1, 1, "int8"},          {2, 2, "int16"},  {4, 4, "int32"},
    {8, 8, "int64"}, {1, 1, "uint8"},  {2, 2, "uint16"},        {4, 4, "uint32"}, {8, 8, "uint64"},
    {4, 4, "float"}, {8, 8, "double"}, {16, 16, "long_double"},
};

// lb/ub of `n` consecutive old elements at `disp`, MPICH's
// MPII_DATATYPE_BLOCK_LB_UB: n == 0 still reaches back one extent.
void BlockBounds(Arith& a, int64_t n, int64_t disp, const DatatypeInfo& old, int64_t* lb,
                 int64_t* ub) {
  const int64_t old_ub = a.Add(old.lb, old.extent);
  const int64_t span = a.Mul(old.extent, n - 1);
  *lb = a.Add(disp, old.extent >= 0 ? old.lb : a.Add(old.lb, span));
  *ub = a.Add(disp, old.extent >= 0 ? a.Add(old_ub, span) : old_ub);
}

// True bounds move with the bounds (MPICH shifts them by the same amount).
void SetTrue(Arith& a, const DatatypeInfo& old, int64_t lb, int64_t ub, int64_t* true_lb,
             int64_t* true_ub) {
  *true_lb = a.Add(lb, a.Sub(old.true_lb, old.lb));
  const int64_t old_true_ub = a.Add(old.true_lb, old.true_extent);
  *true_ub = a.Add(ub, a.Sub(old_true_ub, a.Add(old.lb, old.extent)));
}

void SetBounds(Arith& a, int64_t lb, int64_t ub, int64_t true_lb, int64_t true_ub,
               DatatypeInfo* info) {
  info->lb = lb;
  info->extent = a.Sub(ub, lb);
  info->true_lb = true_lb;
  info->true_extent = a.Sub(true_ub, true_lb);
}

Status Overflow(const char* what) {
  return OutOfRange(what, ": size or bounds overflow 64-bit byte offsets");
}

Status CheckCount(const char* what, const char* name, int64_t v) {
  if (v < 0) {
    return InvalidArgument(what, ": ", name, " must be >= 0, got ", v);
  }
  return OkStatus();
}

// Properties every derived node inherits from its old type.
DatatypeNode Derived(DatatypeKind kind, const Datatype& old) {
  DatatypeNode n;
  n.kind = kind;
  n.children.push_back(old);
  n.info.alignment = old.info().alignment;
  n.info.depth = old.info().depth + 1;
  n.info.weight = SatWeight(old.info().weight, 1);
  return n;
}

// The empty result of a constructor, keeping its arguments for ToString.
Result<Datatype> MakeEmpty(const char* what, DatatypeNode n) {
  const int depth = n.info.depth;
  const int64_t weight = n.info.weight;
  n.info = EmptyInfo();
  n.info.depth = depth;
  n.info.weight = weight;
  return DatatypeFactory::Make(what, std::move(n));
}

// Common to vector and hvector.
Result<Datatype> MakeVector(const char* what, int64_t count, int64_t blocklength,
                            int64_t stride_bytes, bool in_elements, const Datatype& old) {
  ISO_RETURN_IF_ERROR(CheckCount(what, "count", count));
  ISO_RETURN_IF_ERROR(CheckCount(what, "blocklength", blocklength));
  DatatypeNode n = Derived(DatatypeKind::kVector, old);
  n.in_elements = in_elements;
  n.count = count;
  n.blocklength = blocklength;
  n.stride = stride_bytes;
  const DatatypeInfo& o = old.info();
  if (count == 0 || o.size == 0) {
    return MakeEmpty(what, std::move(n));
  }
  Arith a;
  const int64_t along = a.Mul(stride_bytes, count - 1);
  const int64_t within = a.Mul(o.extent, blocklength - 1);
  int64_t lb = o.lb;
  int64_t ub = a.Add(o.lb, o.extent);
  if (stride_bytes < 0) {
    lb = a.Add(lb, along);
  } else {
    ub = a.Add(ub, along);
  }
  if (o.extent < 0) {
    lb = a.Add(lb, within);
  } else {
    ub = a.Add(ub, within);
  }
  int64_t tlb = 0;
  int64_t tub = 0;
  SetTrue(a, o, lb, ub, &tlb, &tub);
  SetBounds(a, lb, ub, tlb, tub, &n.info);
  n.info.size = a.Mul(a.Mul(count, blocklength), o.size);
  if (!a.ok()) {
    return Overflow(what);
  }
  n.info.dense =
      o.dense && blocklength > 0 && (count == 1 || stride_bytes == a.Mul(blocklength, o.extent));
  n.info.max_segments =
      n.info.dense
          ? 1
          : SatMul(static_cast<uint64_t>(count),
                   o.dense ? 1 : SatMul(static_cast<uint64_t>(blocklength), o.max_segments));
  return DatatypeFactory::Make(what, std::move(n));
}

// Common to indexed, hindexed, indexed_block and hindexed_block: blocks of
// `old` at byte displacements; zero-length blocks do not count.
Result<Datatype> MakeIndexed(const char* what, DatatypeKind kind, std::vector<int64_t> lengths,
                             std::vector<int64_t> disps, int64_t blocklength, bool in_elements,
                             const Datatype& old) {
  const DatatypeInfo& o = old.info();
  DatatypeNode n = Derived(kind, old);
  n.in_elements = in_elements;
  n.count = static_cast<int64_t>(disps.size());
  n.blocklength = blocklength;
  n.info.weight = SatWeight(n.info.weight, n.count);
  const bool block = kind == DatatypeKind::kIndexedBlock;
  Arith a;
  int64_t total = 0;
  bool any = false;
  int64_t lb = 0, ub = 0, tlb = 0, tub = 0;
  bool adjacent = o.dense;
  int64_t next = 0;  // where a dense run continues
  uint64_t segs = 0;
  for (size_t i = 0; i < disps.size(); ++i) {
    const int64_t len = block ? blocklength : lengths[i];
    total = a.Add(total, len);
    if (len == 0 && !block) {
      continue;  // MPICH ignores zero-length blocks of indexed types
    }
    int64_t blb = 0, bub = 0, btlb = 0, btub = 0;
    BlockBounds(a, len, disps[i], o, &blb, &bub);
    SetTrue(a, o, blb, bub, &btlb, &btub);
    lb = any ? std::min(lb, blb) : blb;
    ub = any ? std::max(ub, bub) : bub;
    tlb = any ? std::min(tlb, btlb) : btlb;
    tub = any ? std::max(tub, btub) : btub;
    if (len > 0) {
      const int64_t start = a.Add(disps[i], o.lb);
      adjacent = adjacent && (segs == 0 || start == next);
      next = a.Add(start, a.Mul(len, o.size));
      segs = SatAdd(segs, o.dense ? 1 : SatMul(static_cast<uint64_t>(len), o.max_segments));
    }
    any = true;
  }
  n.blocklengths = std::move(lengths);
  n.displacements = std::move(disps);
  // indexed_block keeps MPICH's bounds for blocklength 0 (no zero check).
  if (n.count == 0 || o.size == 0 || (!block && total == 0)) {
    return MakeEmpty(what, std::move(n));
  }
  SetBounds(a, lb, ub, tlb, tub, &n.info);
  n.info.size = a.Mul(total, o.size);
  if (!a.ok()) {
    return Overflow(what);
  }
  n.info.dense =
      adjacent && segs > 0 && n.info.size == n.info.extent && n.info.lb == n.info.true_lb;
  n.info.max_segments = n.info.dense ? 1 : segs;
  return DatatypeFactory::Make(what, std::move(n));
}

Result<std::vector<int64_t>> ToBytes(const char* what, std::span<const int64_t> disps,
                                     const Datatype& old) {
  std::vector<int64_t> out;
  out.reserve(disps.size());
  Arith a;
  for (const int64_t d : disps) {
    out.push_back(a.Mul(d, old.extent()));
  }
  if (!a.ok()) {
    return Overflow(what);
  }
  return out;
}

Status CheckArrays(const char* what, std::span<const int64_t> lengths, size_t n) {
  if (lengths.size() != n) {
    return InvalidArgument(what, ": ", lengths.size(), " blocklengths but ", n, " displacements");
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) {
      return InvalidArgument(what, ": blocklengths[", i, "] must be >= 0, got ", lengths[i]);
    }
  }
  if (n > static_cast<size_t>(kMaxDatatypeWeight)) {
    return ResourceExhausted(what, ": ", n, " entries exceed the limit of ", kMaxDatatypeWeight);
  }
  return OkStatus();
}

}  // namespace

int64_t BasicTypeSize(BasicType t) { return kBasics[static_cast<int>(t)].size; }
int64_t BasicTypeAlignment(BasicType t) { return kBasics[static_cast<int>(t)].align; }
const char* BasicTypeName(BasicType t) { return kBasics[static_cast<int>(t)].name; }

DatatypeInfo EmptyInfo() {
  DatatypeInfo info;
  info.alignment = 0;
  info.dense = false;
  info.max_segments = 0;
  return info;
}

Result<Datatype> DatatypeFactory::Make(const char* what, DatatypeNode n) {
  DatatypeInfo& i = n.info;
  if (i.depth > kMaxDatatypeDepth) {
    return ResourceExhausted(what, ": nesting deeper than ", kMaxDatatypeDepth);
  }
  if (i.weight > kMaxDatatypeWeight) {
    return ResourceExhausted(what, ": description has more than ", kMaxDatatypeWeight,
                             " nodes and entries");
  }
  Arith a;
  const int64_t ub = a.Add(i.lb, i.extent);
  const int64_t true_ub = a.Add(i.true_lb, i.true_extent);
  for (const int64_t v : {i.size, i.lb, ub, i.extent, i.true_lb, true_ub, i.true_extent}) {
    if (v > kMaxDatatypeBytes || v < -kMaxDatatypeBytes) {
      return Overflow(what);
    }
  }
  if (!a.ok()) {
    return Overflow(what);
  }
  return Datatype(std::make_shared<const DatatypeNode>(std::move(n)));
}

Datatype Datatype::Basic(BasicType t) {
  DatatypeNode n;
  n.kind = DatatypeKind::kBasic;
  n.basic = t;
  const int64_t size = BasicTypeSize(t);
  n.info.size = size;
  n.info.extent = size;
  n.info.true_extent = size;
  n.info.alignment = BasicTypeAlignment(t);
  n.info.dense = true;
  n.info.max_segments = 1;
  return Datatype(std::make_shared<const DatatypeNode>(std::move(n)));
}

Result<Datatype> Datatype::Contiguous(int64_t count, const Datatype& old) {
  const char* what = "contiguous";
  ISO_RETURN_IF_ERROR(CheckCount(what, "count", count));
  DatatypeNode n = Derived(DatatypeKind::kContiguous, old);
  n.count = count;
  const DatatypeInfo& o = old.info();
  if (count == 0 || o.size == 0) {
    return MakeEmpty(what, std::move(n));
  }
  Arith a;
  int64_t lb = 0, ub = 0, tlb = 0, tub = 0;
  BlockBounds(a, count, 0, o, &lb, &ub);
  SetTrue(a, o, lb, ub, &tlb, &tub);
  SetBounds(a, lb, ub, tlb, tub, &n.info);
  n.info.size = a.Mul(count, o.size);
  if (!a.ok()) {
    return Overflow(what);
  }
  n.info.dense = o.dense;
  n.info.max_segments = o.dense ? 1 : SatMul(static_cast<uint64_t>(count), o.max_segments);
  return DatatypeFactory::Make(what, std::move(n));
}

Result<Datatype> Datatype::Vector(int64_t count, int64_t blocklength, int64_t stride,
                                  const Datatype& old) {
  const auto bytes = CheckedMul(stride, old.extent());
  if (!bytes) {
    return Overflow("vector");
  }
  return MakeVector("vector", count, blocklength, *bytes, true, old);
}

Result<Datatype> Datatype::Hvector(int64_t count, int64_t blocklength, int64_t stride_bytes,
                                   const Datatype& old) {
  return MakeVector("hvector", count, blocklength, stride_bytes, false, old);
}

Result<Datatype> Datatype::Indexed(std::span<const int64_t> blocklengths,
                                   std::span<const int64_t> displacements, const Datatype& old) {
  const char* what = "indexed";
  ISO_RETURN_IF_ERROR(CheckArrays(what, blocklengths, displacements.size()));
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> bytes, ToBytes(what, displacements, old));
  return MakeIndexed(what, DatatypeKind::kIndexed, {blocklengths.begin(), blocklengths.end()},
                     std::move(bytes), 0, true, old);
}

Result<Datatype> Datatype::Hindexed(std::span<const int64_t> blocklengths,
                                    std::span<const int64_t> displacements_bytes,
                                    const Datatype& old) {
  const char* what = "hindexed";
  ISO_RETURN_IF_ERROR(CheckArrays(what, blocklengths, displacements_bytes.size()));
  return MakeIndexed(what, DatatypeKind::kIndexed, {blocklengths.begin(), blocklengths.end()},
                     {displacements_bytes.begin(), displacements_bytes.end()}, 0, false, old);
}

Result<Datatype> Datatype::IndexedBlock(int64_t blocklength, std::span<const int64_t> displacements,
                                        const Datatype& old) {
  const char* what = "indexed_block";
  ISO_RETURN_IF_ERROR(CheckCount(what, "blocklength", blocklength));
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> bytes, ToBytes(what, displacements, old));
  if (bytes.size() > static_cast<size_t>(kMaxDatatypeWeight)) {
    return ResourceExhausted(what, ": too many displacements");
  }
  return MakeIndexed(what, DatatypeKind::kIndexedBlock, {}, std::move(bytes), blocklength, true,
                     old);
}

Result<Datatype> Datatype::HindexedBlock(int64_t blocklength,
                                         std::span<const int64_t> displacements_bytes,
                                         const Datatype& old) {
  const char* what = "hindexed_block";
  ISO_RETURN_IF_ERROR(CheckCount(what, "blocklength", blocklength));
  if (displacements_bytes.size() > static_cast<size_t>(kMaxDatatypeWeight)) {
    return ResourceExhausted(what, ": too many displacements");
  }
  return MakeIndexed(what, DatatypeKind::kIndexedBlock, {},
                     {displacements_bytes.begin(), displacements_bytes.end()}, blocklength, false,
                     old);
}

Result<Datatype> Datatype::Resized(const Datatype& old, int64_t lb, int64_t extent) {
  const char* what = "resized";
  DatatypeNode n = Derived(DatatypeKind::kResized, old);
  n.new_lb = lb;
  n.new_extent = extent;
  const DatatypeInfo& o = old.info();
  n.info.size = o.size;
  n.info.lb = lb;
  n.info.extent = extent;
  n.info.true_lb = o.true_lb;
  n.info.true_extent = o.true_extent;
  n.info.dense = o.dense && lb == o.lb && extent == o.extent;
  n.info.max_segments = o.max_segments;
  return DatatypeFactory::Make(what, std::move(n));
}

}  // namespace isometry
