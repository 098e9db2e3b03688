// MPI_Type_create_subarray and MPI_Type_create_darray. Both become a list of
// ArrayDim (the local index set of each dimension, slowest first) over an
// array whose extent is the whole global array, lb 0.
#include <algorithm>
#include <utility>

#include "core/datatype.h"
#include "core/datatype_internal.h"

namespace isometry {

namespace {

Status CheckDims(const char* what, size_t ndims) {
  if (ndims < 1 || ndims > static_cast<size_t>(kMaxArrayDims)) {
    return InvalidArgument(what, ": ndims must be in [1, ", kMaxArrayDims, "], got ", ndims);
  }
  return OkStatus();
}

// Fills elem_stride of dims (given in argument order) and returns them in
// pack nesting order, plus the extent of the whole array.
Status PlaceDims(const char* what, std::vector<ArrayDim> dims, std::span<const int64_t> sizes,
                 ArrayOrder order, const Datatype& old, DatatypeNode* n) {
  Arith a;
  int64_t stride = old.extent();
  const size_t nd = sizes.size();
  for (size_t k = 0; k < nd; ++k) {
    const size_t i = order == ArrayOrder::kC ? nd - 1 - k : k;  // fastest first
    dims[i].elem_stride = stride;
    stride = a.Mul(stride, sizes[i]);
  }
  if (!a.ok()) {
    return OutOfRange(what, ": array extent overflows 64-bit byte offsets");
  }
  if (order == ArrayOrder::kFortran) {
    std::reverse(dims.begin(), dims.end());
  }
  const DatatypeInfo& o = old.info();
  DatatypeInfo& info = n->info;
  info.lb = 0;
  info.extent = stride;
  info.alignment = o.alignment;
  info.depth = o.depth + 1;
  info.weight = SatWeight(o.weight, SatWeight(1, static_cast<int64_t>(nd) * 6));
  int64_t elements = 1;
  bool full = true;
  uint64_t outer_runs = 1;
  for (size_t k = 0; k < nd; ++k) {
    const ArrayDim& d = dims[k];
    elements = a.Mul(elements, d.local_count());
    full = full && d.local_count() == sizes[order == ArrayOrder::kC ? k : nd - 1 - k];
    const uint64_t runs = static_cast<uint64_t>(d.full_blocks) + (d.tail > 0 ? 1 : 0);
    outer_runs = SatMul(outer_runs, k + 1 == nd ? runs : static_cast<uint64_t>(d.local_count()));
  }
  info.size = a.Mul(elements, o.size);
  if (elements == 0 || o.size == 0) {
    info.alignment = 0;  // MPICH builds it from empty types
    info.true_lb = 0;
    info.true_extent = 0;
    info.max_segments = 0;
  } else {
    // The extreme elements are the first or last local index of each dim.
    int64_t lo = 0;
    int64_t hi = 0;
    for (const ArrayDim& d : dims) {
      const int64_t last =
          d.tail > 0 ? a.Add(a.Add(d.first, a.Mul(d.full_blocks, d.cycle)), d.tail - 1)
                     : a.Add(a.Add(d.first, a.Mul(d.full_blocks - 1, d.cycle)), d.block - 1);
      const int64_t p = a.Mul(d.first, d.elem_stride);
      const int64_t q = a.Mul(last, d.elem_stride);
      lo = a.Add(lo, std::min(p, q));
      hi = a.Add(hi, std::max(p, q));
    }
    info.true_lb = a.Add(lo, o.true_lb);
    info.true_extent = a.Add(a.Sub(hi, lo), o.true_extent);
    info.max_segments =
        o.dense ? outer_runs : SatMul(static_cast<uint64_t>(elements), o.max_segments);
  }
  if (!a.ok()) {
    return OutOfRange(what, ": size or bounds overflow 64-bit byte offsets");
  }
  info.dense = full && o.dense && info.size == info.extent && info.true_lb == 0;
  if (info.dense) {
    info.max_segments = 1;
  }
  n->dims = std::move(dims);
  return OkStatus();
}

// The local index set of one darray dimension for process coordinate c.
Result<ArrayDim> DarrayDim(size_t i, int64_t gsize, Distribution dist, int64_t darg, int64_t p,
                           int64_t c) {
  ArrayDim d;
  if (dist == Distribution::kNone) {
    if (p != 1) {
      return InvalidArgument("darray: psizes[", i, "] must be 1 for a dimension not distributed");
    }
    d.block = gsize;
    d.cycle = gsize;
    d.full_blocks = 1;
    return d;
  }
  if (darg != kDefaultDarg && darg <= 0) {
    return InvalidArgument("darray: dargs[", i, "] must be positive or the default, got ", darg);
  }
  if (dist == Distribution::kBlock) {
    const int64_t b = darg == kDefaultDarg ? (gsize + p - 1) / p : darg;
    const auto cover = CheckedMul(b, p);
    if (!cover || *cover < gsize) {
      return InvalidArgument("darray: dargs[", i, "] * psizes[", i, "] = ", b, " * ", p,
                             " does not cover gsizes[", i, "] = ", gsize);
    }
    d.first = b * c;
    d.block = std::clamp<int64_t>(gsize - d.first, 0, b);
    d.cycle = *cover;
    d.full_blocks = d.block > 0 ? 1 : 0;
    return d;
  }
  const int64_t b = darg == kDefaultDarg ? 1 : darg;
  const auto cycle = CheckedMul(b, p);
  if (!cycle) {
    return OutOfRange("darray: dargs[", i, "] * psizes[", i, "] overflows");
  }
  d.first = b * c;
  d.block = b;
  d.cycle = *cycle;
  d.full_blocks = gsize / *cycle;
  const int64_t rem = gsize - d.full_blocks * *cycle;
  if (rem >= d.first + b) {
    d.full_blocks += 1;
  } else if (rem > d.first) {
    d.tail = rem - d.first;
  }
  return d;
}

// A shallow type with t's bounds and true bounds (t holds data): keeps the
// composition below within kMaxDatatypeDepth for any number of dimensions.
Result<Datatype> StandIn(const Datatype& t) {
  ISO_ASSIGN_OR_RETURN(Datatype run,
                       Datatype::Contiguous(t.true_extent(), Datatype::Basic(BasicType::kByte)));
  const int64_t at[1] = {t.true_lb()};
  ISO_ASSIGN_OR_RETURN(run, Datatype::HindexedBlock(1, at, run));
  return Datatype::Resized(run, t.lb(), t.extent());
}

// MPICH builds a darray from vectors, structs and resized types, one
// dimension at a time, and its true bounds are those of that composition,
// which are wider than the data where a cyclic dimension holds only a
// partial block (an empty vector joins the struct at displacement 0). To
// report what MPICH reports, the same composition is built from our own
// constructors; only its true bounds are used (the typemap is the same).
Status MpichDarrayTrueBounds(std::span<const int64_t> gsizes,
                             std::span<const Distribution> distribs, std::span<const int64_t> dargs,
                             std::span<const int64_t> psizes, std::span<const int64_t> coords,
                             ArrayOrder order, const Datatype& old, DatatypeInfo* info) {
  const size_t nd = gsizes.size();
  const int64_t ext = old.extent();
  Arith a;
  ISO_ASSIGN_OR_RETURN(Datatype t, StandIn(old));
  int64_t disp = 0;    // elements, summed over dims
  int64_t faster = 1;  // product of the gsizes of the dims built so far
  for (size_t k = 0; k < nd; ++k) {
    const size_t i = order == ArrayOrder::kC ? nd - 1 - k : k;
    const Datatype below = t;
    const int64_t g = gsizes[i];
    const int64_t p = psizes[i];
    const int64_t c = coords[i];
    const int64_t stride = a.Mul(ext, faster);
    int64_t st = 0;
    if (distribs[i] != Distribution::kCyclic) {
      const bool dflt = distribs[i] == Distribution::kNone || dargs[i] == kDefaultDarg;
      const int64_t b = dflt ? (g + p - 1) / p : dargs[i];
      const int64_t mine = std::clamp<int64_t>(g - b * c, 0, b);
      ISO_ASSIGN_OR_RETURN(
          t, k == 0 ? Datatype::Contiguous(mine, t) : Datatype::Hvector(mine, 1, stride, t));
      st = mine == 0 ? 0 : b * c;
    } else {
      const int64_t b = dargs[i] == kDefaultDarg ? 1 : dargs[i];
      const int64_t first = c * b;
      const int64_t left = g - first;
      const int64_t local = left <= 0 ? 0 : (left / (p * b)) * b + std::min(left % (p * b), b);
      const int64_t count = local / b;
      const int64_t rem = local % b;
      const int64_t step = a.Mul(a.Mul(p, b), stride);
      ISO_ASSIGN_OR_RETURN(Datatype v, Datatype::Hvector(count, b, step, t));
      if (rem > 0) {
        const int64_t bl[2] = {1, rem};
        const int64_t d[2] = {0, a.Mul(count, step)};
        const Datatype ty[2] = {v, t};
        ISO_ASSIGN_OR_RETURN(v, Datatype::Struct(bl, d, ty));
      }
      if (k == 0) {
        const int64_t shift[1] = {a.Mul(first, ext)};
        ISO_ASSIGN_OR_RETURN(v, Datatype::HindexedBlock(1, shift, v));
        ISO_ASSIGN_OR_RETURN(v, Datatype::Resized(v, 0, a.Mul(ext, g)));
      } else {
        st = local == 0 ? 0 : first;
      }
      t = v;
    }
    // Each dimension's type spans its whole slab of the global array.
    ISO_ASSIGN_OR_RETURN(t, Datatype::Resized(t, 0, a.Mul(g, below.extent())));
    ISO_ASSIGN_OR_RETURN(t, StandIn(t));
    disp = a.Add(disp, a.Mul(st, faster));
    faster = a.Mul(faster, g);
  }
  const int64_t shift[1] = {a.Mul(disp, ext)};
  ISO_ASSIGN_OR_RETURN(t, Datatype::HindexedBlock(1, shift, t));
  if (!a.ok()) {
    return OutOfRange("darray: bounds overflow 64-bit byte offsets");
  }
  info->true_lb = t.true_lb();
  info->true_extent = t.true_extent();
  return OkStatus();
}

}  // namespace

Result<Datatype> Datatype::Subarray(std::span<const int64_t> sizes,
                                    std::span<const int64_t> subsizes,
                                    std::span<const int64_t> starts, ArrayOrder order,
                                    const Datatype& old) {
  const char* what = "subarray";
  ISO_RETURN_IF_ERROR(CheckDims(what, sizes.size()));
  if (subsizes.size() != sizes.size() || starts.size() != sizes.size()) {
    return InvalidArgument(what, ": ", sizes.size(), " sizes, ", subsizes.size(), " subsizes and ",
                           starts.size(), " starts differ in number");
  }
  std::vector<ArrayDim> dims(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1 || subsizes[i] < 0 || starts[i] < 0 || subsizes[i] > sizes[i] ||
        starts[i] > sizes[i] - subsizes[i]) {
      return InvalidArgument(what, ": dimension ", i, " needs sizes >= 1, 0 <= subsizes, 0 <= ",
                             "starts and starts + subsizes <= sizes; got sizes ", sizes[i],
                             ", subsizes ", subsizes[i], ", starts ", starts[i]);
    }
    dims[i].first = starts[i];
    dims[i].block = subsizes[i];
    dims[i].cycle = sizes[i];
    dims[i].full_blocks = 1;
  }
  DatatypeNode n;
  n.kind = DatatypeKind::kSubarray;
  n.order = order;
  n.sizes.assign(sizes.begin(), sizes.end());
  n.subsizes.assign(subsizes.begin(), subsizes.end());
  n.starts.assign(starts.begin(), starts.end());
  n.children.push_back(old);
  ISO_RETURN_IF_ERROR(PlaceDims(what, std::move(dims), sizes, order, old, &n));
  return DatatypeFactory::Make(what, std::move(n));
}

Result<Datatype> Datatype::Darray(int64_t size, int64_t rank, std::span<const int64_t> gsizes,
                                  std::span<const Distribution> distribs,
                                  std::span<const int64_t> dargs, std::span<const int64_t> psizes,
                                  ArrayOrder order, const Datatype& old) {
  const char* what = "darray";
  ISO_RETURN_IF_ERROR(CheckDims(what, gsizes.size()));
  const size_t nd = gsizes.size();
  if (distribs.size() != nd || dargs.size() != nd || psizes.size() != nd) {
    return InvalidArgument(what, ": ", nd, " gsizes, ", distribs.size(), " distribs, ",
                           dargs.size(), " dargs and ", psizes.size(), " psizes differ in number");
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return InvalidArgument(what, ": need size >= 1 and 0 <= rank < size; got size ", size,
                           ", rank ", rank);
  }
  int64_t grid = 1;
  for (size_t i = 0; i < nd; ++i) {
    if (gsizes[i] < 1 || psizes[i] < 1) {
      return InvalidArgument(what, ": gsizes[", i, "] and psizes[", i, "] must be >= 1; got ",
                             gsizes[i], " and ", psizes[i]);
    }
    const auto g = CheckedMul(grid, psizes[i]);
    if (!g || *g > size) {
      return InvalidArgument(what, ": the process grid (product of psizes) exceeds size ", size);
    }
    grid = *g;
  }
  if (grid != size) {
    return InvalidArgument(what, ": the process grid has ", grid, " processes, size is ", size);
  }
  // The process grid is row-major whatever the array order (MPI 4.0, 5.1.4).
  std::vector<ArrayDim> dims(nd);
  std::vector<int64_t> coords(nd);
  int64_t rest = rank;
  for (size_t k = 0; k < nd; ++k) {
    const size_t i = nd - 1 - k;
    coords[i] = rest % psizes[i];
    rest /= psizes[i];
    ISO_ASSIGN_OR_RETURN(dims[i],
                         DarrayDim(i, gsizes[i], distribs[i], dargs[i], psizes[i], coords[i]));
  }
  DatatypeNode n;
  n.kind = DatatypeKind::kDarray;
  n.order = order;
  n.nprocs = size;
  n.rank = rank;
  n.sizes.assign(gsizes.begin(), gsizes.end());
  n.distribs.assign(distribs.begin(), distribs.end());
  n.dargs.assign(dargs.begin(), dargs.end());
  n.psizes.assign(psizes.begin(), psizes.end());
  n.children.push_back(old);
  ISO_RETURN_IF_ERROR(PlaceDims(what, std::move(dims), gsizes, order, old, &n));
  if (n.info.size > 0) {
    ISO_RETURN_IF_ERROR(
        MpichDarrayTrueBounds(gsizes, distribs, dargs, psizes, coords, order, old, &n.info));
    n.info.dense = n.info.dense && n.info.true_lb == 0;
  }
  return DatatypeFactory::Make(what, std::move(n));
}

}  // namespace isometry
