// Small random datatype trees for property tests: every constructor, small
// counts and displacements (some negative), zero-length blocks, resized
// extents, subarrays in C and Fortran order. A constructor that refuses its
// random arguments is simply drawn again.
#pragma once

#include <random>
#include <vector>

#include "core/datatype.h"

namespace isometry::testing {

class RandomDatatypes {
 public:
  explicit RandomDatatypes(uint64_t seed) : rng_(seed) {}

  Datatype Next(int depth) {
    while (true) {
      Result<Datatype> t = Try(depth);
      if (t.ok() && t->size() > 0 && t->size() <= 4096 && t->true_extent() <= (1 << 16)) {
        return *std::move(t);
      }
    }
  }

  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  Datatype Leaf() {
    static const BasicType kinds[] = {BasicType::kByte, BasicType::kInt16, BasicType::kInt32,
                                      BasicType::kDouble};
    return Datatype::Basic(kinds[Int(0, 3)]);
  }

  std::vector<int64_t> Ints(size_t n, int64_t lo, int64_t hi) {
    std::vector<int64_t> v(n);
    for (int64_t& x : v) x = Int(lo, hi);
    return v;
  }

  Result<Datatype> Try(int depth) {
    if (depth <= 0) return Leaf();
    const Datatype old = Int(0, 2) == 0 ? Leaf() : Next(depth - 1);
    const int64_t e = old.extent() == 0 ? 1 : old.extent();
    const size_t n = static_cast<size_t>(Int(1, 3));
    switch (Int(0, 10)) {
      case 0:
        return Datatype::Contiguous(Int(0, 4), old);
      case 1:
        return Datatype::Vector(Int(1, 4), Int(0, 3), Int(-4, 4), old);
      case 2:
        return Datatype::Hvector(Int(1, 4), Int(1, 3), Int(-3, 5) * e + Int(-2, 2), old);
      case 3:
        return Datatype::Indexed(Ints(n, 0, 3), Ints(n, -3, 8), old);
      case 4:
        return Datatype::Hindexed(Ints(n, 0, 3), Ints(n, -20, 40), old);
      case 5:
        return Datatype::IndexedBlock(Int(1, 3), Ints(n, -3, 8), old);
      case 6: {
        std::vector<Datatype> ts;
        for (size_t i = 0; i < n; ++i) ts.push_back(Int(0, 1) ? old : Leaf());
        return Datatype::Struct(Ints(n, 0, 3), Ints(n, -16, 48), ts);
      }
      case 7:
        return Datatype::Resized(old, Int(-8, 8), Int(1, 3) * e + Int(-1, 1) * Int(0, 4));
      case 8:
      case 9: {
        const int dims = static_cast<int>(Int(1, 3));
        std::vector<int64_t> sizes(dims), subs(dims), starts(dims);
        for (int d = 0; d < dims; ++d) {
          sizes[d] = Int(1, 5);
          subs[d] = Int(1, sizes[d]);
          starts[d] = Int(0, sizes[d] - subs[d]);
        }
        return Datatype::Subarray(sizes, subs, starts,
                                  Int(0, 1) ? ArrayOrder::kC : ArrayOrder::kFortran, old);
      }
      default: {
        // A regular indexed type (a vector in disguise).
        const int64_t step = Int(-2, 4);
        std::vector<int64_t> d(n + 1);
        for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<int64_t>(i) * step;
        return Datatype::IndexedBlock(Int(1, 2), d, old);
      }
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace isometry::testing
