#include <iostream>

#include "harness/cli/commands.h"
#include "schedules/registry.h"

namespace ppbench::cli {

Command add_list(CLI::App& parent) {
  auto* app = parent.add_subcommand("list", "Every schedule family with its parameter constraints");
  return [app] {
    (void)app;
    std::cout << "schedule          constraints                              description\n";
    for (const auto& s : all_schedules()) {
      std::string name(s.name), cons(s.constraints);
      name.resize(std::max<std::size_t>(name.size() + 1, 18), ' ');
      cons.resize(std::max<std::size_t>(cons.size() + 1, 41), ' ');
      std::cout << name << cons << s.title << '\n';
    }
    std::cout << "\nD = --devices, N = --microbatches, v = --chunks, g = --group-size.\n"
                 "Stage placement: one stage per rank (stage r on rank r); interleaved: stage c*D+r\n"
                 "on rank r; zb-v and dualpipev: rank r holds stages r and 2D-1-r; chimera and\n"
                 "dualpipe: chain 0 is stages 0..D-1 (stage s on rank s), chain 1 is stages D..2D-1\n"
                 "(stage D+j on rank D-1-j), N/2 micro-batches each.\n";
  };
}

}  // namespace ppbench::cli
