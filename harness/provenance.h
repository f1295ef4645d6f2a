// Where a record came from: commit, host, CPU, compiler, date. Every result
// ppbench writes carries it (docs/metrics.md, "Provenance").
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace ppbench {

nlohmann::json provenance();

// The commit checked out in the git tree at `source` (its first 12 hex digits), or "" where
// `source` is no git tree. Reads the repository's files (worktrees and packed refs included)
// instead of starting git.
std::string checked_out_commit(const std::filesystem::path& source);

}  // namespace ppbench
