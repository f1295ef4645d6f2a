#include "harness/chrome_trace.h"

namespace ppbench {

namespace {

std::string category(const Action& a) {
  return a.paired() ? std::string("FB") : std::string(1, op_letter(a.task.op));
}

// Metadata naming process `pid` and, when `ranks` > 0, one thread per rank ("rank r").
void name_process(nlohmann::json& events, int pid, const char* name, int ranks) {
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
  for (int r = 0; r < ranks; ++r)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
}

// A complete event ("X") from `start` to `end` (in the trace's unit) on thread `tid` of `pid`.
nlohmann::json span(std::string name, const std::string& cat, int pid, int tid, double start,
                    double end, double to_us, nlohmann::json args) {
  return {{"name", std::move(name)},
          {"cat", cat},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", start * to_us},
          {"dur", (end - start) * to_us},
          {"args", std::move(args)}};
}

}  // namespace

nlohmann::json to_chrome_trace(const Trace& trace, const nlohmann::json& other_data) {
  const double to_us = trace.time_unit == "s" ? 1e6 : 1e3;
  nlohmann::json events = nlohmann::json::array();
  name_process(events, 0, "ranks", trace.ranks);
  name_process(events, 1, "transfers", 0);
  for (int r = 0; r < trace.ranks; ++r)
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"sort_index", r}}}});
  for (const auto& e : trace.compute) {
    nlohmann::json args = {{"stage", e.action.task.stage}, {"mb", e.action.task.mb}};
    if (e.action.paired()) args["overlapped"] = to_string(e.action.partner);
    if (e.cpu >= 0) args["cpu_us"] = e.cpu * to_us;  // ranks that shared cores: the thread's time
    // Its outputs' send calls after it, timed (ComputeEvent::send): not part of the span.
    if (e.sends > 0) args["sends"] = e.sends, args["send_us"] = e.send * to_us;
    events.push_back(span(to_string(e.action), category(e.action), 0, e.rank, e.start, e.end, to_us,
                          std::move(args)));
  }
  for (const auto& c : trace.comm) {
    nlohmann::json args = {{"src", c.src_rank}, {"dst", c.dst_rank}};
    // The tensor had been sent before its receive was posted: the span is the receiver's own
    // taking in (CommEvent::queued), not a whole hand-over.
    if (c.queued) args["queued"] = true;
    events.push_back(span(
        to_string(c.task) + " " + std::to_string(c.src_rank) + "->" + std::to_string(c.dst_rank),
        "comm", 1, c.src_rank * trace.ranks + c.dst_rank, c.start, c.end, to_us, std::move(args)));
  }
  // Data-parallel all-reduces run beside a rank's compute (overlapped with it under
  // --dp-overlap), so they get a track of their own per rank, under a process named "allreduce".
  if (!trace.collectives.empty()) name_process(events, 2, "allreduce", trace.ranks);
  for (const auto& c : trace.collectives)
    events.push_back(span(
        c.stage < 0 ? std::string("allreduce") : "allreduce " + std::to_string(c.stage),
        "allreduce", 2, c.rank, c.start, c.end, to_us, {{"stage", c.stage}, {"bytes", c.bytes}}));
  // Optimizer steps (`run --optimizer`) are busy time of their rank, but not actions: a track of
  // their own per rank, under a process named "optimizer", keeps the ranks' tracks to actions.
  if (!trace.updates.empty()) name_process(events, 3, "optimizer", trace.ranks);
  for (const auto& u : trace.updates) {
    nlohmann::json args = {{"stage", u.stage}};
    if (u.cpu >= 0) args["cpu_us"] = u.cpu * to_us;
    events.push_back(span("update " + std::to_string(u.stage), "update", 3, u.rank, u.start, u.end,
                          to_us, std::move(args)));
  }
  nlohmann::json other = other_data;
  other["time_unit"] = trace.time_unit;
  other["source"] = trace.source;
  if (trace.shared_cores > 0) {
    other["shared_cores"] = trace.shared_cores;
    other["rank_cpu_us"] = nlohmann::json::array();
    for (double c : trace.rank_cpu) other["rank_cpu_us"].push_back(c * to_us);
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", std::move(other)}};
}

nlohmann::json trace_facts(const nlohmann::json& record) {
  nlohmann::json facts = record["provenance"];
  for (const char* key : {"schedule", "devices", "microbatches", "chunks"})
    if (record.contains(key)) facts[key] = record[key];
  if (record.contains("data_parallel"))
    for (const char* key : {"processes", "replicas", "nodes"})
      facts[key] = record["data_parallel"][key];
  return facts;
}

}  // namespace ppbench
