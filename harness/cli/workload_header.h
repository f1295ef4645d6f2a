// The words that name a workload above a command's results (`memory`, `model`, `simulate
// --workload`), spelt alike by every command: its name, each shape setting as key=value, the
// micro-batch size and the dtype.
//
// Header-only: the ppbench programs list their sources one by one (harness/CMakeLists.txt), and
// these few lines need no source of their own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ppbench::cli {

// "mlp classes=10 input_dim=1024 layers=8 width=1024, b=1, bf16". `config` is the spec's (or the
// record's) object of shape settings, in its order.
inline std::string workload_header(std::string_view name, const nlohmann::json& config,
                                   std::int64_t microbatch_size, std::string_view dtype) {
  std::string s(name);
  for (const auto& [k, v] : config.items())
    s += ' ' + k + '=' + (v.is_string() ? v.get<std::string>() : v.dump());
  return s + ", b=" + std::to_string(microbatch_size) + ", " + std::string(dtype);
}

}  // namespace ppbench::cli
