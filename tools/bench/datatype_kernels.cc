#include "tools/bench/datatype_kernels.h"

#include <set>

namespace isometry::bench {

namespace {

// mpi_datatype.c's IrregularIndices: the same seeded generator, so both
// sides pick the same points.
std::vector<int64_t> IrregularIndices(int count, int n, uint32_t seed) {
  std::vector<bool> taken(static_cast<size_t>(n));
  for (int i = 0; i < count;) {
    seed = seed * 1103515245u + 12345u;
    const auto v = static_cast<size_t>((seed >> 8) % static_cast<uint32_t>(n));
    if (!taken[v]) {
      taken[v] = true;
      ++i;
    }
  }
  std::vector<int64_t> idx;
  for (int v = 0; v < n; ++v) {
    if (taken[static_cast<size_t>(v)]) idx.push_back(v);
  }
  return idx;
}

DatatypeKernel Same(std::string name, Datatype t, int64_t count, int64_t span) {
  return {std::move(name), {t, count, span}, {t, count, span}};
}

const Datatype kByte = Datatype::Basic(BasicType::kByte);
const Datatype kFloat = Datatype::Basic(BasicType::kFloat);
const Datatype kDouble = Datatype::Basic(BasicType::kDouble);
const Datatype kInt = Datatype::Basic(BasicType::kInt32);

Result<DatatypeKernel> Wrf() {
  const int64_t sizes[] = {32, 64, 64}, sub[] = {32, 3, 64}, starts[] = {0, 3, 0};
  ISO_ASSIGN_OR_RETURN(Datatype one,
                       Datatype::Subarray(sizes, sub, starts, ArrayOrder::kC, kFloat));
  const int64_t array = int64_t{32} * 64 * 64 * 4;
  const int64_t lens[] = {1, 1, 1, 1}, disps[] = {0, array, 2 * array, 3 * array};
  const Datatype types[] = {one, one, one, one};
  ISO_ASSIGN_OR_RETURN(Datatype t, Datatype::Struct(lens, disps, types));
  return Same("wrf_y_vec", t, 1, 4 * array);
}

Result<DatatypeKernel> Lammps() {
  constexpr int kAtoms = 65536, kSent = 4000;
  const std::vector<int64_t> idx = IrregularIndices(kSent, kAtoms, 11u);
  std::vector<int64_t> idx3;
  idx3.reserve(idx.size());
  for (int64_t i : idx) idx3.push_back(3 * i);
  ISO_ASSIGN_OR_RETURN(Datatype xv, Datatype::IndexedBlock(3, idx3, kDouble));
  ISO_ASSIGN_OR_RETURN(Datatype type, Datatype::IndexedBlock(1, idx, kInt));
  const int64_t x_bytes = int64_t{kAtoms} * 24;
  const int64_t lens[] = {1, 1, 1}, disps[] = {0, x_bytes, 2 * x_bytes};
  const Datatype types[] = {xv, xv, type};
  ISO_ASSIGN_OR_RETURN(Datatype t, Datatype::Struct(lens, disps, types));
  return Same("lammps_atomic", t, 1, 2 * x_bytes + int64_t{kAtoms} * 4);
}

Result<DatatypeKernel> Fft2d() {
  constexpr int64_t kN = 256;
  const Datatype complex = *Datatype::Contiguous(2, kDouble);
  ISO_ASSIGN_OR_RETURN(Datatype column, Datatype::Vector(kN, 1, kN, complex));
  ISO_ASSIGN_OR_RETURN(Datatype t, Datatype::Resized(column, 0, 16));
  const int64_t span = kN * kN * 16;
  return DatatypeKernel{"fft2d", {t, kN, span}, {complex, kN * kN, span}};
}

}  // namespace

std::vector<std::string> DatatypeKernelNames() {
  return {"wrf_y_vec", "milc_su3_zd", "nas_mg_z", "specfem3d_oc", "lammps_atomic", "fft2d"};
}

Result<DatatypeKernel> MakeDatatypeKernel(const std::string& name, int64_t block) {
  if (name == "vector") {
    if (block <= 0 || block > (int64_t{2} << 20) || (int64_t{2} << 20) % block != 0) {
      return InvalidArgument("vector block ", block, " B: a power of two from 1 B to 2 MiB");
    }
    ISO_ASSIGN_OR_RETURN(Datatype t,
                         Datatype::Vector((int64_t{2} << 20) / block, block, 2 * block, kByte));
    return Same("vector", t, 1, int64_t{4} << 20);
  }
  if (name == "wrf_y_vec") return Wrf();
  if (name == "milc_su3_zd") {
    ISO_ASSIGN_OR_RETURN(Datatype su3, Datatype::Contiguous(6, kFloat));
    ISO_ASSIGN_OR_RETURN(Datatype t, Datatype::Vector(8, int64_t{8} * 8, int64_t{8} * 8 * 8, su3));
    return Same(name, t, 1, int64_t{8} * 8 * 8 * 8 * 24);
  }
  if (name == "nas_mg_z") {
    constexpr int64_t kN = 66;
    ISO_ASSIGN_OR_RETURN(Datatype t, Datatype::Vector(kN * kN, 1, kN, kDouble));
    return Same(name, t, 1, kN * kN * kN * 8);
  }
  if (name == "specfem3d_oc") {
    ISO_ASSIGN_OR_RETURN(Datatype t,
                         Datatype::IndexedBlock(1, IrregularIndices(12000, 262144, 7u), kFloat));
    return Same(name, t, 1, int64_t{262144} * 4);
  }
  if (name == "lammps_atomic") return Lammps();
  if (name == "fft2d") return Fft2d();
  return InvalidArgument("unknown datatype kernel '", name, "'");
}

}  // namespace isometry::bench
