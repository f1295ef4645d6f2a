// `ppbench list`: every schedule family from the registry (schedules/registry.h), with its
// constraints, stage layout, source and closed forms; `--format json` is what the scripts read
// instead of keeping their own lists of schedules.
#include <iostream>

#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/cli/options.h"
#include "schedules/registry.h"

namespace ppbench::cli {

namespace {

nlohmann::json list_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const ScheduleInfo& s : all_schedules()) {
    // The formulas' text does not depend on the parameters; any valid ones will do.
    const ClosedForm cf = s.closed_form({std::string(s.name), 4, 16, 0, 0}, UniformCost{});
    out.push_back({{"name", s.name},
                   {"title", s.title},
                   {"source", s.source},
                   {"constraints", s.constraints},
                   {"layout", s.layout},
                   {"uses_chunks", s.uses_chunks},
                   {"closed_form",
                    {{"bubble_fraction", cf.bubble_formula},
                     {"idle_per_rank", cf.idle_formula},
                     {"peak_activations", cf.activations_formula},
                     {"parameters", cf.params_formula}}}});
  }
  return {{"schedules", out}};
}

}  // namespace

Command add_list(CLI::App& parent) {
  auto* app = parent.add_subcommand("list", "Every schedule family with its parameter constraints");
  auto format = std::make_shared<std::string>("text");
  app->add_option("--format", *format, "text (a table) or json (every registry field)")
      ->check(one_of({"text", "json"}));
  return [format] {
    if (*format == "json") {
      std::cout << list_json().dump(1) << '\n';
      return;
    }
    // A constraint too long for its column (two blanks after it included) puts the description
    // on the next line, under its column, rather than pushing it out of the table.
    constexpr std::size_t kName = 18, kConstraints = 41;
    std::cout << "schedule          constraints                              description\n";
    for (const auto& s : all_schedules()) {
      std::string name(s.name), cons(s.constraints);
      name.resize(std::max<std::size_t>(name.size() + 1, kName), ' ');
      if (cons.size() + 2 <= kConstraints) {
        cons.resize(kConstraints, ' ');
        std::cout << name << cons << s.title << '\n';
      } else {
        std::cout << name << cons << '\n'
                  << std::string(kName + kConstraints, ' ') << s.title << '\n';
      }
    }
    std::cout
        << "\nD = --devices, N = --microbatches, v = --chunks, g = --group-size.\n"
           "Stage placement: one stage per rank (stage r on rank r); interleaved: stage c*D+r\n"
           "on rank r; zb-v, v-half, v-min and dualpipev: rank r holds stages r and 2D-1-r;\n"
           "chimera, chimera-doubling and dualpipe: chain 0 is stages 0..D-1 (stage s on\n"
           "rank s), chain 1 is stages D..2D-1 (stage D+j on rank D-1-j), N/2 micro-batches\n"
           "each.\n"
           "`ppbench list --format json` adds each family's source, layout and closed forms.\n";
  };
}

}  // namespace ppbench::cli
