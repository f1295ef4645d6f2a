// The ppbench subcommands. Each registers its flags on `parent` and returns
// a callback that runs it; UsageError escaping a callback becomes exit 2.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace ppbench::cli {

using Command = std::function<void()>;

Command add_list(CLI::App& parent);
Command add_show(CLI::App& parent);
Command add_simulate(CLI::App& parent);
Command add_model(CLI::App& parent);
Command add_run(CLI::App& parent);
Command add_tune(CLI::App& parent);
Command add_memory(CLI::App& parent);

}  // namespace ppbench::cli
