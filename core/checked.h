// Checked arithmetic for sizes and offsets that come from requests.
//
// Every size, offset and extent a client sends reaches a multiplication or
// an addition somewhere; in signed types an overflow is undefined
// behaviour, in unsigned ones a silent wrap that turns "out of bounds" into
// "in bounds". These return nullopt instead, so the caller can answer with
// a clear error.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

namespace isometry {

template <typename T>
std::optional<T> CheckedAdd(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T out;
  if (__builtin_add_overflow(a, b, &out)) {
    return std::nullopt;
  }
  return out;
}

template <typename T>
std::optional<T> CheckedSub(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T out;
  if (__builtin_sub_overflow(a, b, &out)) {
    return std::nullopt;
  }
  return out;
}

template <typename T>
std::optional<T> CheckedMul(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T out;
  if (__builtin_mul_overflow(a, b, &out)) {
    return std::nullopt;
  }
  return out;
}

// [offset, offset + size) lies within [0, limit), without wrapping.
inline bool RangeWithin(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

}  // namespace isometry
