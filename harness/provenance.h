// Where a record came from: commit, host, CPU, compiler, date. Every result
// ppbench writes carries it (docs/metrics.md, "Provenance").
#pragma once

#include <nlohmann/json.hpp>

namespace ppbench {

nlohmann::json provenance();

}  // namespace ppbench
