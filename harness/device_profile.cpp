#include "harness/device_profile.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "core/error.h"
#include "core/user_file.h"
#include "harness/report_json.h"

namespace ppbench {

namespace {

constexpr const char* kFormat = "ppbench-device-profile";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

[[noreturn]] void bad(const std::string& source, const std::string& key, const std::string& why) {
  throw UsageError("bad --device-profile " + quoted(source) + ": key " + quoted(key) + " " + why);
}

// j[key] as a finite number in (0, kMaxCost]-like bounds: > 0, or >= 0 where `zero_ok`.
double number(const nlohmann::json& j, const std::string& key, const std::string& path,
              const std::string& source, bool zero_ok = false) {
  if (!j.contains(key)) bad(source, path + key, "is missing");
  const auto& v = j.at(key);
  if (!v.is_number()) bad(source, path + key, "must be a number, not " + quoted(v.dump()));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > 1e300 || x < 0 || (!zero_ok && x == 0))
    bad(source, path + key,
        "must be a finite number " + std::string(zero_ok ? ">= 0" : "> 0") + ", not " + num(x));
  return x;
}

std::string text(const nlohmann::json& j, const std::string& key, const std::string& source) {
  if (!j.contains(key)) bad(source, key, "is missing");
  if (!j.at(key).is_string()) bad(source, key, "must be a string, not " + quoted(j.at(key).dump()));
  return j.at(key).get<std::string>();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

DeviceProfile default_profile() {
  DeviceProfile p;
  p.kind = "rates";
  p.name = "default-cpu";
  p.source = "built-in default";
  p.rates = {1e11, 2e10, 1e10, 1e-5};
  return p;
}

DeviceProfile parse_device_profile(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object())
    throw UsageError("bad --device-profile " + quoted(source) + ": expected one JSON object, not " +
                     j.type_name());
  if (text(j, "format", source) != kFormat)
    bad(source, "format", "must be \"" + std::string(kFormat) + "\"");
  if (number(j, "version", "", source) != 1) bad(source, "version", "must be 1");
  DeviceProfile p;
  p.source = source;
  p.kind = text(j, "kind", source);
  p.name = j.contains("name") ? text(j, "name", source) : source;
  if (p.kind == "rates") {
    p.rates.peak_flops = number(j, "peak_flops", "", source);
    p.rates.memory_bandwidth = number(j, "memory_bandwidth", "", source);
    p.rates.link_bandwidth = number(j, "link_bandwidth", "", source);
    p.rates.link_latency = number(j, "link_latency", "", source, true);
    return p;
  }
  if (p.kind != "measured") bad(source, "kind", "must be \"rates\" or \"measured\"");
  if (text(j, "time_unit", source) != "s") bad(source, "time_unit", "must be \"s\"");
  // Optional: the link's one-way latency, for the handshakes of hand-overs by rendezvous
  // (simulate --eager-limit); the measured hand-overs themselves are each boundary's comm.
  if (j.contains("link_latency"))
    p.rates.link_latency = number(j, "link_latency", "", source, true);
  if (!j.contains("stages") || !j["stages"].is_array() || j["stages"].empty())
    bad(source, "stages", "must be a non-empty array of per-stage times");
  for (std::size_t s = 0; s < j["stages"].size(); ++s) {
    const auto& e = j["stages"][s];
    const std::string at = "stages[" + std::to_string(s) + "].";
    if (!e.is_object()) bad(source, at.substr(0, at.size() - 1), "must be an object");
    // Each stage time within the cost model's bound; a message names the key that is not.
    auto time = [&](const char* key, bool zero_ok = false) {
      const double v = number(e, key, at, source, zero_ok);
      if (v > kMaxCost) bad(source, at + key, "must be at most " + num(kMaxCost) + " s");
      return v;
    };
    StageCost c;
    c.f = time("F");
    c.i = time("I");
    c.w = time("W");
    c.b = time("B");
    c.fb = time("FB");
    c.comm = time("comm", true);
    // Optional (profiles before them had neither): the producer's time in each send call, and
    // the consumer's in taking in each input from another rank.
    if (e.contains("send")) c.send = time("send", true);
    if (e.contains("recv")) c.recv = time("recv", true);
    p.stages.push_back(c);
    PairedBackward with;
    if (e.contains("FB_backward")) {
      const auto& v = e["FB_backward"];
      const long long stages = static_cast<long long>(j["stages"].size());
      if (!v.is_object() || !v.contains("stage") || !v["stage"].is_number_integer() ||
          v["stage"].get<long long>() < 0 || v["stage"].get<long long>() >= stages ||
          !v.contains("op") || !(v["op"] == "B" || v["op"] == "I"))
        bad(source, at + "FB_backward",
            "must be {\"stage\": 0 to " + std::to_string(stages - 1) + ", \"op\": \"B\" or \"I\"}");
      with = {v["stage"].get<int>(), v["op"] == "I" ? Op::I : Op::B};
    }
    p.fb_backward.push_back(with);
    // Every stage or none: a step either ran an optimizer or did not.
    const bool updated = e.contains("optimizer");
    if (s > 0 && updated == p.optimizer.empty())
      bad(source, at + "optimizer", "must be given for every stage or for none");
    if (updated) p.optimizer.push_back(time("optimizer", true));
  }
  const auto measured_for = [&](const char* key) {
    if (!j.contains(key)) bad(source, key, "is missing (what the times were measured for)");
    p.measured_for[key] = j[key];
  };
  for (const char* key : kWorkloadKeys) measured_for(key);
  measured_for("layer_counts");
  if (!j["layer_counts"].is_array() || j["layer_counts"].size() != p.stages.size())
    bad(source, "layer_counts",
        "must be an array of " + std::to_string(p.stages.size()) + " layer counts, one per stage");
  for (const auto& n : j["layer_counts"])
    if (!n.is_number_integer() || n.get<long long>() < 1)
      bad(source, "layer_counts", "must hold integers >= 1, not " + quoted(n.dump()));
  return p;
}

DeviceProfile parse_device_profile_text(std::string_view text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError("bad --device-profile " + quoted(source) + ": not JSON (byte " +
                     std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::out_of_range& e) {
    // The parser's one other refusal, a number past double's range (1e400): the user's to fix,
    // not an internal error. what() is "[json.exception.out_of_range.406] number overflow
    // parsing '1e400'": the part after the tag names the number.
    const std::string what = e.what();
    const auto tag_end = what.find("] ");
    throw UsageError("bad --device-profile " + quoted(source) + ": " +
                     (tag_end == std::string::npos ? what : what.substr(tag_end + 2)) +
                     " (numbers must be within double's range, about 1.8e308)");
  }
  return parse_device_profile(j, source);
}

DeviceProfile read_device_profile(const std::string& path) {
  const std::string flag = "--device-profile " + quoted(path);
  const std::string bound = std::to_string(kMaxDeviceProfileBytes) + " bytes (16 MiB)";
  const auto size = user_file_size(flag, path, "a JSON device profile");
  if (size > kMaxDeviceProfileBytes)
    throw UsageError(flag + " is " + std::to_string(size) +
                     " bytes; a device profile may be at most " + bound);
  const std::string text =
      read_user_file(flag, path, kMaxDeviceProfileBytes,
                     flag + " grew while it was read; a device profile may be at most " + bound);
  return parse_device_profile_text(text, path);
}

nlohmann::json to_json(const DeviceProfile& p) {
  nlohmann::json j = {{"kind", p.kind}, {"name", p.name}, {"source", p.source}};
  if (p.kind == "rates") {
    j["rates"] = {{"peak_flops", p.rates.peak_flops},
                  {"memory_bandwidth", p.rates.memory_bandwidth},
                  {"link_bandwidth", p.rates.link_bandwidth},
                  {"link_latency", p.rates.link_latency}};
  } else {
    j["measured_for"] = p.measured_for;
    j["link_latency"] = p.rates.link_latency;
  }
  return j;
}

const char* statistic_name(ProfileStatistic statistic) {
  return statistic == ProfileStatistic::kMean ? "mean" : "median";
}

ProfileStatistic profile_statistic(const std::string& name) {
  for (const ProfileStatistic s : {ProfileStatistic::kMedian, ProfileStatistic::kMean})
    if (name == statistic_name(s)) return s;
  throw UsageError("--profile-statistic " + quoted(name) + ": expected median or mean");
}

nlohmann::json measured_profile_json(const Trace& trace, const Placement& placement,
                                     const PartitionPlan& plan, const nlohmann::json& identity,
                                     ProfileStatistic statistic) {
  const bool by_mean = statistic == ProfileStatistic::kMean;
  auto typical = [by_mean](const std::vector<double>& v) { return by_mean ? mean(v) : median(v); };
  const int parts = static_cast<int>(plan.stages.size());
  // A schedule stage's position in its chain is the partition stage it runs.
  auto part = [&](int stage) { return placement.part(stage); };
  // Per part: F, B, I, W, overlapped pairs (by their forward stage); hand-overs per boundary.
  std::vector<std::array<std::vector<double>, 5>> d(static_cast<std::size_t>(parts));
  // Per boundary, the receives that waited for their tensor and those that found it sent
  // (queued); per part, the queued receives it made (their span is its own work, as the replay
  // tells them apart: hand_over_from_trace).
  std::vector<std::vector<double>> waited(static_cast<std::size_t>(parts));
  std::vector<std::vector<double>> queued(static_cast<std::size_t>(parts));
  std::vector<std::vector<double>> taken_in(static_cast<std::size_t>(parts));
  std::vector<std::vector<double>> sends(static_cast<std::size_t>(parts));  // per send call
  std::vector<std::vector<double>> updates(static_cast<std::size_t>(parts));
  for (const UpdateEvent& u : trace.updates)
    updates[static_cast<std::size_t>(part(u.stage))].push_back(u.end - u.start);
  // Per part, the backward half its overlapped pairs carried: part and op (-1: none; -2: several).
  std::vector<std::pair<int, Op>> paired_with(static_cast<std::size_t>(parts), {-1, Op::B});
  for (const auto& e : trace.compute) {
    const auto k = static_cast<std::size_t>(part(e.action.task.stage));
    d[k][e.action.paired() ? 4 : static_cast<std::size_t>(e.action.task.op)].push_back(e.end -
                                                                                       e.start);
    if (e.action.paired()) {
      const std::pair<int, Op> with{part(e.action.partner.stage), e.action.partner.op};
      auto& seen = paired_with[k];
      if (seen.first == -1) seen = with;
      if (seen != with) seen.first = -2;
    }
    // Each send call's mean span, on the boundary of each output that left the rank.
    if (e.sends == 0) continue;
    for (const Task& t : e.action.tasks()) {
      if (t.op == Op::W ||
          (t.op == Op::F ? placement.is_last(t.stage) : placement.is_first(t.stage)))
        continue;
      const int to = t.op == Op::F ? t.stage + 1 : t.stage - 1;
      if (placement.stage_rank[to] == placement.stage_rank[t.stage]) continue;
      const int boundary = t.op == Op::F ? part(t.stage) : part(t.stage) - 1;
      sends[static_cast<std::size_t>(boundary)].push_back(e.send / e.sends);
    }
  }
  for (const auto& c : trace.comm) {
    // An activation goes down from the producer's stage, a gradient up to the one before it.
    const int from = part(c.task.stage);
    const int boundary = c.task.op == Op::F ? from : from - 1;
    if (boundary < 0 || boundary >= parts) continue;
    const auto b = static_cast<std::size_t>(boundary);
    (c.queued ? queued[b] : waited[b]).push_back(c.end - c.start);
    const std::size_t consumer = c.task.op == Op::F ? b + 1 : b;
    if (c.queued && consumer < taken_in.size()) taken_in[consumer].push_back(c.end - c.start);
  }
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t k = 0; k < d.size(); ++k) {
    auto& [f, b, i, w, fb] = d[k];
    // Every stage runs a forward of every micro-batch, so a trace without one is a bug.
    if (f.empty())
      throw std::logic_error("the measured step has no forward on stage " + std::to_string(k));
    StageCost c;
    c.f = typical(f);
    c.i = !i.empty() ? typical(i) : typical(b) / 2;
    c.w = !w.empty() ? typical(w) : typical(b) / 2;
    c.b = !b.empty() ? typical(b) : c.i + c.w;
    c.fb = !fb.empty() ? typical(fb) : c.f + c.b;
    // The latency: what the receives that waited took beyond a receive's own work.
    const double work = queued[k].empty() ? 0 : typical(queued[k]);
    c.comm = k + 1 < d.size() && !waited[k].empty() ? std::max(typical(waited[k]) - work, 0.0) : 0;
    stages.push_back(
        {{"F", c.f}, {"I", c.i}, {"W", c.w}, {"B", c.b}, {"FB", c.fb}, {"comm", c.comm}});
    if (k + 1 < d.size() && !sends[k].empty()) stages.back()["send"] = typical(sends[k]);
    if (!taken_in[k].empty()) stages.back()["recv"] = typical(taken_in[k]);
    // The backward FB's pairs carried, where not this part's own B (a V shape's). Pairs of one
    // part with backwards of several (an order of one's own) keep FB as their typical time alone.
    const auto [with, op] = paired_with[k];
    if (with >= 0 && (with != static_cast<int>(k) || op != Op::B))
      stages.back()["FB_backward"] = {{"stage", with}, {"op", op == Op::I ? "I" : "B"}};
    if (!trace.updates.empty()) stages.back()["optimizer"] = typical(updates[k]);
  }
  nlohmann::json j = {{"format", kFormat},
                      {"version", 1},
                      {"kind", "measured"},
                      {"time_unit", "s"},
                      {"granularity", "stage"},
                      {"statistic", std::string(statistic_name(statistic)) +
                                        " over the last measured step's actions"}};
  for (const char* key : kWorkloadKeys) j[key] = identity.at(key);
  j["name"] = identity.value("name", std::string("measured"));
  j["layer_counts"] = plan.layer_counts;
  j["stages"] = std::move(stages);
  if (identity.contains("provenance")) j["provenance"] = identity["provenance"];
  return j;
}

}  // namespace ppbench
