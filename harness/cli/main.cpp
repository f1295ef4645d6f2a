// ppbench: pipeline-parallel schedules, generated, proven, simulated and run (CPU threads, CUDA).
//
// Exit codes (docs/architecture.md): 0 success; 2 bad input (flags, parameters, costs, shapes,
// output paths), always with one line on stderr naming the bad value and what is allowed; 3 the
// machine or its environment (no GPU visible, a library missing, not enough memory, a full disk);
// 1 a failure of ppbench itself: a step that failed or stalled, `run --check` past its tolerance,
// or an internal error (a bug: please report it).
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <iterator>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/cli/program_beside.h"
#include "harness/executor/executor_core.h"
#include "harness/launch.h"
#include "harness/output_file.h"
#ifdef PPBENCH_HAVE_CUDA
#include "workloads/cuda/device_info.h"
#endif
#ifdef PPBENCH_HAVE_MPI
#include "harness/mpi/job.h"
#include "harness/mpi/mpi_run.h"
#endif

namespace {

std::string version_text() {
  std::string v = "ppbench " PPBENCH_VERSION;
#ifdef PPBENCH_HAVE_CUDA
  v += " (CUDA support compiled in)\n" + ppbench::cuda::device_info_text();
#else
  // Said as it stands beside this executable: a copy of ppbench alone runs neither.
  const std::string cuda = ppbench::cli::cuda_program_name();
  if (cuda.empty())
    v += " (built without CUDA)";
  else if (ppbench::cli::program_beside_exists(cuda))
    v += " (CUDA runs by " + cuda + " beside it; `" + cuda + " --version` lists the GPUs)";
  else
    v += " (CUDA runs by " + cuda + ", which is missing beside this ppbench: copy it here)";
#endif
#ifdef PPBENCH_HAVE_MPI
  v += "\nMPI: compiled in (mpirun -np P ppbench run ... runs one pipeline rank per process)";
#else
  const std::string mpi = ppbench::cli::mpi_program_name();
  if (mpi.empty())
    v += "\nMPI: not compiled in (runs stay in one process)";
  else if (ppbench::cli::program_beside_exists(mpi))
    v += "\nMPI: compiled in (mpirun -np P ppbench run ... runs one pipeline rank per process, "
         "by " +
         mpi + " beside it)";
  else
    v += "\nMPI: " + mpi +
         ", which runs each process of mpirun -np P ppbench run ..., is "
         "missing beside this ppbench: copy it here";
#endif
  return v;
}

// Every message leaves on one line that a terminal cannot act on: user input is quoted where it
// is echoed (quoted() in core/error.h), and whatever control characters still reach here (a
// message of CLI11's, an internal one) are escaped.
std::string one_line(std::string_view message) {
  std::string out;
  ppbench::detail::append_escaped(out, message, false);
  return out;
}

int fail(const char* kind, std::string_view message, int code) {
  std::cout.flush();
#ifdef PPBENCH_HAVE_MPI
  // One process of several failed while the others may wait on it inside MPI: say which, then
  // end them all (mpirun exits non-zero).
  if (ppbench::mpi::in_multi_process_job()) {
    std::cerr << "ppbench: " << kind << ": process " << ppbench::mpi::job_rank() << ": "
              << one_line(message) << std::endl;
    ppbench::mpi::abort_job(code);
  }
#endif
  std::cerr << "ppbench: " << kind << ": " << one_line(message) << '\n';
  return code;
}

// The exit code of a --help or --version that CLI11 printed: 3 where stdout could not take it
// (a full disk), as for any other output.
int printed(int code) {
  try {
    ppbench::flush_stdout();
  } catch (const ppbench::EnvironmentError& e) {
    return fail("error", e.what(), 3);
  }
  return code;
}

// Under a launch of several every process parses the same command line and would say the same:
// process 0 says it, and the others wait a moment for its line to leave before they exit (mpirun
// ends the job at the first process that exits non-zero). Under mpirun, a process still running
// after the wait failed alone, with nothing from process 0 to end it: a schedule file or a
// program missing on its node only. It then says its own line, naming itself. Other launchers
// (srun) let the job run on after a failure, so there every process would print: they stay
// quiet, and the launcher names the task that failed.
int left_to_process_zero(const std::string& message, int code) {
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const ppbench::LaunchEnvironment launch = ppbench::launch_environment();
  if (launch.launcher != "OpenMPI") return code;
  return fail("error", "process " + std::to_string(launch.rank) + ": " + message, code);
}

// A bad command line or input, found before MPI started. A process that no launch of several
// started (a stray PMI_RANK in a plain shell) says it itself: its line is the only one.
int usage_error(const std::string& message) {
  if (ppbench::launch_environment().leaves_messages_to_process_zero())
    return left_to_process_zero(message, 2);
  return fail("error", message, 2);
}

// A machine that cannot run what every process of an mpirun launch asked for, found before
// MPI started (a program missing beside ppbench): process 0 says it, as usage_error.
int environment_error(const std::string& message) {
#ifdef PPBENCH_HAVE_MPI
  const bool in_job = ppbench::mpi::in_multi_process_job();
#else
  const bool in_job = false;
#endif
  if (!in_job && ppbench::launch_environment().leaves_messages_to_process_zero())
    return left_to_process_zero(message, 3);
  return fail("error", message, 3);
}

}  // namespace

int main(int argc, char** argv) {
  ppbench::cli::remember_command_line(argc, argv);
  CLI::App app{
      "ppbench: generate, prove, simulate and run pipeline-parallel training schedules "
      "(GPipe, 1F1B, interleaved 1F1B, Chimera, Zero Bubble, DualPipe) and report their bubble "
      "and memory.",
      "ppbench"};
  // A callback: the GPU query (CUDA initialisation) runs only when --version is asked for.
  app.set_version_flag("--version", std::function<std::string()>(version_text));
  app.require_subcommand(1);
  app.footer("Run `ppbench <command> --help` for a command's options. Start with `ppbench list`.");

  using namespace ppbench::cli;
  // Only the command named on the command line is built, with its options and checks: building
  // all seven took a tenth of a `simulate -d 64 -n 1024` from start to exit. Top-level help,
  // --version and a misspelt name build them all.
  struct Entry {
    std::string_view name;
    Command (*add)(CLI::App&);
  };
  constexpr Entry kCommands[] = {
      {"list", add_list},     {"show", add_show}, {"simulate", add_simulate}, {"model", add_model},
      {"memory", add_memory}, {"run", add_run},   {"tune", add_tune}};
  const bool named = argc > 1 && std::any_of(std::begin(kCommands), std::end(kCommands),
                                             [&](const Entry& e) { return e.name == argv[1]; });
  // CLI11 reports a misspelt command as "a subcommand is required"; name it.
  if (argc > 1 && argv[1][0] != '-' && !named) {
    std::string known;
    for (const Entry& e : kCommands) known += (known.empty() ? "" : ", ") + std::string(e.name);
    return usage_error("unknown command " + ppbench::quoted(argv[1]) + " (known: " + known + ")");
  }
  std::vector<std::pair<CLI::App*, Command>> commands;
  for (const Entry& e : kCommands) {
    if (named && e.name != argv[1]) continue;
    Command run = e.add(app);
    CLI::App* sub = app.get_subcommands([](CLI::App*) { return true; }).back();
    if (sub->get_name() != e.name)
      return fail("internal error",
                  "command " + sub->get_name() + " is listed as " + std::string(e.name), 1);
    commands.emplace_back(sub, std::move(run));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return printed(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return printed(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return printed(app.exit(e));
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.empty()) what = "bad command line";
    return usage_error(what + " (run with --help for the allowed options)");
  }

  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) run();
    ppbench::flush_stdout();  // a full disk or /dev/full behind stdout is an error, not exit 0
#ifdef PPBENCH_HAVE_MPI
    ppbench::mpi::finish_job();
  } catch (const ppbench::JobRefused& e) {
    // Every process refused together: one says why, then all leave MPI together (mpirun ends
    // the job at the first non-zero exit, so no process may leave before the message is out).
    if (!e.message.empty()) {
      std::cout.flush();
      std::cerr << "ppbench: error: " << one_line(e.message) << std::endl;
    }
    ppbench::mpi::finish_job();
    return e.code;
#endif
  } catch (const ppbench::UsageError& e) {
    return usage_error(e.what());
  } catch (const ppbench::InvalidSchedule& e) {
    return usage_error(e.what());
  } catch (const ppbench::CheckFailed& e) {
    return fail("error", e.what(), 1);
  } catch (const ppbench::ExecutionError& e) {
    // A step that failed or stalled (the watchdog names the rank and its instruction).
    return fail("error", e.what(), 1);
  } catch (const ppbench::EnvironmentError& e) {
    return environment_error(e.what());
  } catch (const std::bad_alloc&) {
    // The estimates refuse what cannot fit before it starts; this is memory taken by something
    // else meanwhile, or an estimate short of the truth.
    return fail("error",
                "out of memory (the machine ran out while working; --max-memory sets the bar "
                "the estimates are checked against)",
                3);
  } catch (const std::system_error& e) {
    // The system refused a resource: a thread (too many ranks for the process limit), a lock.
    return fail("error", std::string("the system refused: ") + e.what(), 3);
  } catch (const std::exception& e) {
    return fail("internal error", e.what(), 1);
  }
  return 0;
}
