// ppbench: pipeline-parallel schedules, simulated and (later) executed.
//
// Exit codes: 0 success; 2 bad input (flags, parameters, costs), always with
// one line on stderr naming the bad value and what is allowed; 3 the machine or
// its environment (no GPU visible, a library missing, not enough memory); 1 an
// internal error (a bug: please report it).
#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>

#include "harness/cli/commands.h"
#include "schedules/error.h"
#ifdef PPBENCH_HAVE_CUDA
#include "workloads/cuda/device_info.h"
#endif

namespace {

std::string version_text() {
  std::string v = "ppbench " PPBENCH_VERSION;
#ifdef PPBENCH_HAVE_CUDA
  v += " (CUDA support compiled in)\n" + ppbench::cuda::device_info_text();
#else
  v += " (built without CUDA)";
#endif
  return v;
}

int usage_error(const std::string& message) {
  std::cerr << "ppbench: error: " << message << '\n';
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ppbench: generate, validate and simulate pipeline-parallel training schedules (GPipe, 1F1B, "
      "interleaved 1F1B, Chimera, Zero Bubble, DualPipe) and report their bubble and memory.",
      "ppbench"};
  // A callback: the GPU query (CUDA initialisation) runs only when --version is asked for.
  app.set_version_flag("--version", std::function<std::string()>(version_text));
  app.require_subcommand(1);
  app.footer("Run `ppbench <command> --help` for a command's options. Start with `ppbench list`.");

  using namespace ppbench::cli;
  std::vector<std::pair<CLI::App*, Command>> commands;
  for (auto add : {add_list, add_show, add_simulate, add_model, add_run}) {
    Command run = add(app);
    commands.emplace_back(app.get_subcommands([](CLI::App*) { return true; }).back(), std::move(run));
  }

  // CLI11 reports a misspelt command as "a subcommand is required"; name it.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const auto& [sub, run] : commands) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) return usage_error(std::string("unknown command '") + argv[1] + "' (known: " + known + ")");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.empty()) what = "bad command line";
    return usage_error(what + " (run with --help for the allowed options)");
  }

  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) run();
  } catch (const ppbench::UsageError& e) {
    return usage_error(e.what());
  } catch (const ppbench::InvalidSchedule& e) {
    return usage_error(e.what());
  } catch (const ppbench::CheckFailed& e) {
    std::cerr << "ppbench: error: " << e.what() << '\n';
    return 1;
  } catch (const ppbench::EnvironmentError& e) {
    std::cerr << "ppbench: error: " << e.what() << '\n';
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "ppbench: internal error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
