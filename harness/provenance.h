// Where a record came from: commit, host, CPU, compiler, date. Every result
// ppbench writes carries it (DESIGN.md, "Results").
#pragma once

#include <nlohmann/json.hpp>

namespace ppbench {

nlohmann::json provenance();

}  // namespace ppbench
