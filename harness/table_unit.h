// The unit a table prints a set of columns in: one for all their rows, so that the rows compare at
// a glance (`memory`'s per-rank table, `model`'s per-layer table, `run`'s activations), and the
// unit of one value alone (bytes_text, harness/memory_estimate.h): one ladder of units for both.
//
// Header-only: these few lines need no source of their own.
#pragma once

#include <array>
#include <cstddef>

namespace ppbench {

struct Unit {
  const char* name;
  double scale;  // what one of the unit is in the column's base unit (bytes, FLOPs)
};

// Each unit `base` times the one before it.
template <std::size_t K>
struct UnitLadder {
  std::array<const char*, K> names;
  double base;
};

// Bytes in binary units, named as bytes_text names them.
inline constexpr UnitLadder<7> kByteUnits{{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}, 1024};
inline constexpr UnitLadder<6> kFlopUnits{{"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"},
                                          1000};

// The smallest unit of `ladder` in which `largest` is below `below` (the last one where none is),
// so that the largest value keeps its leading digits: below = the ladder's base gives the largest
// unit in which `largest` is at least 1; a larger `below` keeps more digits of the smaller values
// beside it.
template <std::size_t K>
constexpr Unit table_unit(double largest, const UnitLadder<K>& ladder, double below) {
  std::size_t u = 0;
  double scale = 1;
  while (u + 1 < K && largest / scale >= below) scale *= ladder.base, ++u;
  return {ladder.names[u], scale};
}

// Byte columns, and bytes_text: the largest binary unit in which `largest` is at least 1 (with the
// default `below`), so that a table and a total printed under it ("largest rank total: 64.1
// MiB") agree.
constexpr Unit byte_unit(double largest, double below = kByteUnits.base) {
  return table_unit(largest, kByteUnits, below);
}

}  // namespace ppbench
