// MPI_Type_create_struct and the structural type equality it needs.
#include <algorithm>
#include <utility>

#include "core/datatype.h"
#include "core/datatype_internal.h"

namespace isometry {

namespace {

Status CheckStructArgs(std::span<const int64_t> lengths, std::span<const int64_t> disps,
                       std::span<const Datatype> types) {
  if (lengths.size() != disps.size() || lengths.size() != types.size()) {
    return InvalidArgument("struct: ", lengths.size(), " blocklengths, ", disps.size(),
                           " displacements and ", types.size(), " types differ in number");
  }
  if (lengths.size() > static_cast<size_t>(kMaxDatatypeWeight)) {
    return ResourceExhausted("struct: ", lengths.size(), " entries exceed the limit of ",
                             kMaxDatatypeWeight);
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) {
      return InvalidArgument("struct: blocklengths[", i, "] must be >= 0, got ", lengths[i]);
    }
  }
  return OkStatus();
}

// The standard's epsilon: round the extent up to a multiple of the largest
// alignment, with C's remainder (as MPICH computes it, also for negative
// extents).
int64_t PaddedUb(Arith& a, int64_t lb, int64_t ub, int64_t alignment) {
  if (alignment <= 0) {
    return ub;
  }
  const int64_t eps = a.Sub(ub, lb) % alignment;
  return eps == 0 ? ub : a.Add(ub, alignment - eps);
}

// Integers of one size are one class (MPICH 4.0 does not pad a struct of
// int64 and uint64, nor of int32 and uint32, but does pad int32 and float).
int BasicClass(BasicType t) {
  switch (t) {
    case BasicType::kByte:
    case BasicType::kChar:
    case BasicType::kInt8:
    case BasicType::kUint8:
      return 1;
    case BasicType::kInt16:
    case BasicType::kUint16:
      return 2;
    case BasicType::kInt32:
    case BasicType::kUint32:
      return 4;
    case BasicType::kInt64:
    case BasicType::kUint64:
      return 8;
    default:
      return 100 + static_cast<int>(t);
  }
}

// A node that holds exactly one element of its only child at offset 0, with
// the child's bounds, is the child (MPICH's type engine folds such
// wrappers: contiguous(1, X), a resize to X's own bounds, a darray that
// selects all of a one-element array, ...).
const Datatype& Peel(const Datatype& t) {
  const Datatype* x = &t;
  while (x->node().children.size() == 1) {
    const Datatype& c = x->node().children[0];
    const DatatypeInfo& a = x->info();
    const DatatypeInfo& b = c.info();
    if (b.size == 0 || a.size != b.size || a.lb != b.lb || a.extent != b.extent ||
        a.true_lb != b.true_lb || a.true_extent != b.true_extent) {
      break;
    }
    x = &c;
  }
  return *x;
}

// Whether MPICH sees two struct entries as one type (then the struct is an
// hindexed and is not padded).
bool SameForPadding(const Datatype& a, const Datatype& b) {
  const Datatype& x = Peel(a);
  const Datatype& y = Peel(b);
  if (x.kind() == DatatypeKind::kBasic && y.kind() == DatatypeKind::kBasic) {
    return BasicClass(x.node().basic) == BasicClass(y.node().basic);
  }
  return SameType(x, y);
}

}  // namespace

Result<Datatype> Datatype::Struct(std::span<const int64_t> blocklengths,
                                  std::span<const int64_t> displacements_bytes,
                                  std::span<const Datatype> types) {
  const char* what = "struct";
  ISO_RETURN_IF_ERROR(CheckStructArgs(blocklengths, displacements_bytes, types));
  DatatypeNode n;
  n.kind = DatatypeKind::kStruct;
  n.count = static_cast<int64_t>(types.size());
  n.blocklengths.assign(blocklengths.begin(), blocklengths.end());
  n.displacements.assign(displacements_bytes.begin(), displacements_bytes.end());
  n.children.assign(types.begin(), types.end());
  int64_t weight = SatWeight(1, n.count);
  int depth = 1;
  bool homogeneous = true;
  for (const Datatype& t : types) {
    weight = SatWeight(weight, t.info().weight);
    depth = std::max(depth, t.info().depth + 1);
    homogeneous = homogeneous && SameForPadding(t, types[0]);
  }
  // MPICH: a struct of no data (all blocklengths 0 or all types empty) is
  // the empty type, even if its entries have extents.
  Arith a;
  int64_t size = 0;
  for (size_t i = 0; i < types.size(); ++i) {
    size = a.Add(size, a.Mul(blocklengths[i], types[i].size()));
  }
  if (!a.ok()) {
    return OutOfRange(what, ": size overflows 64-bit byte counts");
  }
  if (size == 0) {
    n.info = EmptyInfo();
    n.info.weight = weight;
    n.info.depth = depth;
    return DatatypeFactory::Make(what, std::move(n));
  }
  bool any = false;
  int64_t lb = 0, ub = 0, tlb = 0, tub = 0, align = 0, next = 0;
  bool adjacent = true;
  uint64_t segs = 0;
  for (size_t i = 0; i < types.size(); ++i) {
    const int64_t len = blocklengths[i];
    if (len == 0) {
      continue;  // neither bounds nor alignment, as in MPICH; an entry of
                 // an empty type with blocklength > 0 counts for both
    }
    const DatatypeInfo& o = types[i].info();
    const int64_t disp = displacements_bytes[i];
    const int64_t old_ub = a.Add(o.lb, o.extent);
    const int64_t span = a.Mul(o.extent, len - 1);
    const int64_t blb = a.Add(disp, o.extent >= 0 ? o.lb : a.Add(o.lb, span));
    const int64_t bub = a.Add(disp, o.extent >= 0 ? a.Add(old_ub, span) : old_ub);
    const int64_t btlb = a.Add(blb, a.Sub(o.true_lb, o.lb));
    const int64_t btub = a.Add(bub, a.Sub(a.Add(o.true_lb, o.true_extent), old_ub));
    lb = any ? std::min(lb, blb) : blb;
    ub = any ? std::max(ub, bub) : bub;
    tlb = any ? std::min(tlb, btlb) : btlb;
    tub = any ? std::max(tub, btub) : btub;
    any = true;
    align = std::max(align, o.alignment);
    if (o.size > 0) {
      const int64_t start = a.Add(disp, o.lb);
      adjacent = adjacent && o.dense && (segs == 0 || start == next);
      next = a.Add(start, a.Mul(len, o.size));
      segs = SatAdd(segs, o.dense ? 1 : SatMul(static_cast<uint64_t>(len), o.max_segments));
    }
  }
  if (!homogeneous) {
    ub = PaddedUb(a, lb, ub, align);
  }
  n.info.lb = lb;
  n.info.extent = a.Sub(ub, lb);
  n.info.true_lb = tlb;
  n.info.true_extent = a.Sub(tub, tlb);
  n.info.size = size;
  n.info.alignment = align;
  n.info.weight = weight;
  n.info.depth = depth;
  if (!a.ok()) {
    return OutOfRange(what, ": size or bounds overflow 64-bit byte offsets");
  }
  n.info.dense = adjacent && segs > 0 && size == n.info.extent && lb == tlb;
  n.info.max_segments = n.info.dense ? 1 : segs;
  return DatatypeFactory::Make(what, std::move(n));
}

bool SameType(const Datatype& a, const Datatype& b) {
  const DatatypeNode& x = a.node();
  const DatatypeNode& y = b.node();
  if (&x == &y) {
    return true;
  }
  if (x.kind != y.kind || x.basic != y.basic || x.in_elements != y.in_elements ||
      x.count != y.count || x.blocklength != y.blocklength || x.stride != y.stride ||
      x.blocklengths != y.blocklengths || x.displacements != y.displacements ||
      x.new_lb != y.new_lb || x.new_extent != y.new_extent || x.order != y.order ||
      x.sizes != y.sizes || x.subsizes != y.subsizes || x.starts != y.starts ||
      x.nprocs != y.nprocs || x.rank != y.rank || x.distribs != y.distribs || x.dargs != y.dargs ||
      x.psizes != y.psizes || x.children.size() != y.children.size()) {
    return false;
  }
  for (size_t i = 0; i < x.children.size(); ++i) {
    if (!SameType(x.children[i], y.children[i])) {
      return false;
    }
  }
  return true;
}

}  // namespace isometry
