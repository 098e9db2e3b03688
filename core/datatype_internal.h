// Shared by the datatype .cc files; not part of the public API.
#pragma once

#include <cstdint>
#include <optional>

#include "core/checked.h"
#include "core/datatype.h"

namespace isometry {

struct DatatypeFactory {
  // Checks the limits (depth, weight, |bounds| <= kMaxDatatypeBytes) of a
  // node whose info is filled in, and wraps it. `what` names the
  // constructor in messages.
  static Result<Datatype> Make(const char* what, DatatypeNode n);
};

// Checked int64 arithmetic that remembers an overflow, so a formula can be
// written plainly and checked once at the end.
class Arith {
 public:
  int64_t Add(int64_t a, int64_t b) { return Take(CheckedAdd(a, b)); }
  int64_t Sub(int64_t a, int64_t b) { return Take(CheckedSub(a, b)); }
  int64_t Mul(int64_t a, int64_t b) { return Take(CheckedMul(a, b)); }
  bool ok() const { return ok_; }

 private:
  int64_t Take(std::optional<int64_t> v) {
    if (!v) {
      ok_ = false;
      return 0;
    }
    return *v;
  }
  bool ok_ = true;
};

inline uint64_t SatMul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
inline uint64_t SatAdd(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
inline int64_t SatWeight(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

// The info of the empty type (MPICH's "zerolen"): size 0, all bounds 0.
DatatypeInfo EmptyInfo();

}  // namespace isometry
