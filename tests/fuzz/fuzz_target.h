// The entry point every fuzz target defines (libFuzzer's): one input, any bytes. A target returns
// 0 for an input it accepts or refuses the documented way, and aborts (fuzz_check) on anything
// else: an exception of another type, a round trip that changes the value, a crash.
//
// Built twice (tests/fuzz/CMakeLists.txt): with clang's -fsanitize=fuzzer by `make fuzz`, which
// searches for such inputs, and in every build with replay_main.cpp, which runs the committed
// corpus (tests/fuzz/corpus/<target>/) as a ctest so that every input found once stays fixed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace ppbench::fuzz {

// Aborts with `what` when `ok` is false: the fuzzer keeps the input that led here as a crash.
inline void fuzz_check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::abort();
}

}  // namespace ppbench::fuzz
