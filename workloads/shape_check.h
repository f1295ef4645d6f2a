// Shape checks shared by the workload builders: every bad size is a UsageError whose one-line
// message names the flag, the value and what is allowed.
//
// Sizes (elements, parameters, bytes) are products of the shape flags, so a few large flags
// overflow 64 bits long before any of them looks unreasonable (--width 4294967297 squared). The
// builders compute them as `Size`, whose + and * throw SizeOverflow instead of wrapping; the
// workload flags turn that into one line naming the flags (workload_options.cpp).
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "core/error.h"

namespace ppbench {

inline void require_positive(const char* flag, int64_t value) {
  if (value <= 0)
    throw UsageError(std::string(flag) + " " + std::to_string(value) +
                     " is not allowed: it must be a positive integer");
}

// A size that does not fit in a signed 64-bit integer.
class SizeOverflow : public UsageError {
 public:
  using UsageError::UsageError;
};

// a * b, a + b and a - b of 64-bit integers, or SizeOverflow naming the operands.
[[noreturn]] inline void throw_size_overflow(int64_t a, const char* op, int64_t b,
                                             const char* bound) {
  throw SizeOverflow("a parameter, FLOP or byte count overflows 64-bit integers (" +
                     std::to_string(a) + op + std::to_string(b) + bound + ")");
}
inline int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw_size_overflow(a, " x ", b, " > 9.2e18");
  return r;
}
inline int64_t checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw_size_overflow(a, " + ", b, " > 9.2e18");
  return r;
}
inline int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) throw_size_overflow(a, " - ", b, " beyond +-9.2e18");
  return r;
}

// An int64 count whose +, - and * are checked. Converts to int64_t implicitly (and so to double),
// and is made from any integer; a floating-point value cannot become one by accident.
class Size {
 public:
  constexpr Size() = default;
  template <std::integral T>
  constexpr Size(T v) : v_(static_cast<int64_t>(v)) {}  // NOLINT: implicit by design
  constexpr operator int64_t() const { return v_; }     // NOLINT
  int64_t value() const { return v_; }

  friend Size operator*(Size a, Size b) { return Size(checked_mul(a.v_, b.v_)); }
  friend Size operator+(Size a, Size b) { return Size(checked_add(a.v_, b.v_)); }
  friend Size operator-(Size a, Size b) { return Size(checked_sub(a.v_, b.v_)); }
  template <std::integral T>
  friend Size operator*(Size a, T b) {
    return a * Size(b);
  }
  template <std::integral T>
  friend Size operator*(T a, Size b) {
    return Size(a) * b;
  }
  template <std::integral T>
  friend Size operator+(Size a, T b) {
    return a + Size(b);
  }
  template <std::integral T>
  friend Size operator+(T a, Size b) {
    return Size(a) + b;
  }
  template <std::integral T>
  friend Size operator-(Size a, T b) {
    return a - Size(b);
  }
  template <std::integral T>
  friend Size operator-(T a, Size b) {
    return Size(a) - b;
  }
  Size& operator+=(Size o) { return *this = *this + o; }
  Size& operator*=(Size o) { return *this = *this * o; }

 private:
  int64_t v_ = 0;
};

// Number of elements of a tensor of this shape.
inline int64_t elements(std::initializer_list<int64_t> shape) {
  Size n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace ppbench
