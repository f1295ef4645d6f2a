#include "harness/chrome_trace.h"

namespace ppbench {

namespace {

std::string category(const Action& a) {
  return a.paired() ? std::string("FB") : std::string(1, op_letter(a.task.op));
}

}  // namespace

nlohmann::json to_chrome_trace(const Trace& trace, const nlohmann::json& other_data) {
  const double to_us = trace.time_unit == "s" ? 1e6 : 1e3;
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "ranks"}}}});
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "transfers"}}}});
  for (int r = 0; r < trace.ranks; ++r) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"sort_index", r}}}});
  }
  for (const auto& e : trace.compute) {
    nlohmann::json args = {{"stage", e.action.task.stage}, {"mb", e.action.task.mb}};
    if (e.action.paired()) args["overlapped"] = to_string(e.action.partner);
    events.push_back({{"name", to_string(e.action)},
                      {"cat", category(e.action)},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", e.rank},
                      {"ts", e.start * to_us},
                      {"dur", (e.end - e.start) * to_us},
                      {"args", std::move(args)}});
  }
  for (const auto& c : trace.comm) {
    events.push_back({{"name", to_string(c.task) + " " + std::to_string(c.src_rank) + "->" +
                                   std::to_string(c.dst_rank)},
                      {"cat", "comm"},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", c.src_rank * trace.ranks + c.dst_rank},
                      {"ts", c.start * to_us},
                      {"dur", (c.end - c.start) * to_us},
                      {"args", {{"src", c.src_rank}, {"dst", c.dst_rank}}}});
  }
  // Data-parallel all-reduces run beside a rank's compute (overlapped with it under
  // --dp-overlap), so they get a track of their own per rank, under a process named "allreduce".
  if (!trace.collectives.empty()) {
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", 2}, {"args", {{"name", "allreduce"}}}});
    for (int r = 0; r < trace.ranks; ++r)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", 2},
                        {"tid", r},
                        {"args", {{"name", "rank " + std::to_string(r)}}}});
  }
  for (const auto& c : trace.collectives) {
    events.push_back(
        {{"name", c.stage < 0 ? std::string("allreduce") : "allreduce " + std::to_string(c.stage)},
         {"cat", "allreduce"},
         {"ph", "X"},
         {"pid", 2},
         {"tid", c.rank},
         {"ts", c.start * to_us},
         {"dur", (c.end - c.start) * to_us},
         {"args", {{"stage", c.stage}, {"bytes", c.bytes}}}});
  }
  // Optimizer steps (`run --optimizer`) are busy time of their rank, but not actions: a track of
  // their own per rank, under a process named "optimizer", keeps the ranks' tracks to actions.
  if (!trace.updates.empty()) {
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", 3}, {"args", {{"name", "optimizer"}}}});
    for (int r = 0; r < trace.ranks; ++r)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", 3},
                        {"tid", r},
                        {"args", {{"name", "rank " + std::to_string(r)}}}});
  }
  for (const auto& u : trace.updates)
    events.push_back({{"name", "update " + std::to_string(u.stage)},
                      {"cat", "update"},
                      {"ph", "X"},
                      {"pid", 3},
                      {"tid", u.rank},
                      {"ts", u.start * to_us},
                      {"dur", (u.end - u.start) * to_us},
                      {"args", {{"stage", u.stage}}}});
  nlohmann::json other = other_data;
  other["time_unit"] = trace.time_unit;
  other["source"] = trace.source;
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", std::move(other)}};
}

}  // namespace ppbench
