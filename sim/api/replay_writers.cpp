// sim/api/replay_writers.cpp — a replay_result as JSON, CSV and the CLI's text table
// (api/replay.hpp); no computation here.
#include <algorithm>
#include <sstream>
#include <string>

#include "api/replay.hpp"
#include "api/text.hpp"

namespace kvtk::sim {

nlohmann::json to_json(const replay_result& r) {
  nlohmann::json out = {{"trace", r.trace}, {"results", r.results}};
  if (!r.optimum.empty()) out["optimum"] = r.optimum;
  if (!r.timings.is_null()) out["timings"] = r.timings;
  return out;
}

std::string to_csv(const replay_result& r) {
  std::ostringstream csv;
  csv << "engine,index,policy,capacity_blocks,requests,block_refs,block_hits,token_refs,token_hits,"
         "block_hit_ratio,token_hit_ratio,evictions,opt_fraction,bound_fraction,seconds,"
         "block_refs_per_second\n";
  for (const auto& row : r.results) {
    const std::string opt =
        row.contains("opt_fraction") ? std::to_string(row["opt_fraction"].get<double>()) : "";
    const std::string bound =
        row.contains("bound_fraction") ? std::to_string(row["bound_fraction"].get<double>()) : "";
    csv << row.value("engine", "ideal") << ',' << row["index"].get<std::string>() << ',' << row["policy"].get<std::string>() << ','
        << row["capacity_blocks"].get<std::uint64_t>() << ',' << row["requests"].get<std::uint64_t>()
        << ',' << row["block_refs"].get<std::uint64_t>() << ','
        << row["block_hits"].get<std::uint64_t>() << ',' << row["token_refs"].get<std::uint64_t>()
        << ',' << row["token_hits"].get<std::uint64_t>() << ','
        << row["block_hit_ratio"].get<double>() << ',' << row["token_hit_ratio"].get<double>()
        << ',' << row["evictions"].get<std::uint64_t>() << ',' << opt << ',' << bound << ','
        << row["seconds"].get<double>() << ',' << row["block_refs_per_second"].get<double>()
        << '\n';
  }
  return csv.str();
}

namespace {

using detail::format;

std::string tier_text(const nlohmann::json& rep) {
  const std::string top = rep.value("top_tier", "flat");
  const std::string top_note = top == "flat" ? "" : top + " top tier, ";
  std::string s = format("\ntiers %s (%s%s, %s): load time mean %.3g s, max %.3g s\n",
                         rep["hierarchy"].get<std::string>().c_str(), top_note.c_str(),
                         rep["inclusion"].get<std::string>().c_str(),
                         rep["write_policy"].get<std::string>().c_str(),
                         rep["load_time"]["mean_s"].get<double>(),
                         rep["load_time"]["max_s"].get<double>());
  s += format("  %-8s %-10s %10s %10s %9s %10s %10s %10s %10s %10s\n", "tier", "policy",
              "capacity", "hits", "cum.ratio", "promoted", "written", "evicted", "demoted",
              "dropped");
  for (const auto& row : rep["tiers"]) {
    s += format("  %-8s %-10s %10llu %10llu %9.4f %10llu %10llu %10llu %10llu %10llu\n",
                row["name"].get<std::string>().c_str(), row["policy"].get<std::string>().c_str(),
                row["capacity_blocks"].get<unsigned long long>(),
                row["hits"].get<unsigned long long>(),
                row["cumulative_block_hit_ratio"].get<double>(),
                row["promotions"].get<unsigned long long>(),
                row["writes"].get<unsigned long long>(),
                row["evictions"].get<unsigned long long>(),
                row["demotions"].get<unsigned long long>(), row["drops"].get<unsigned long long>());
  }
  return s;
}

// An offload job's tiers: what each served, and the lower tier's traffic (vLLM: offloaded
// blocks; SGLang: pages).
std::string offload_text(const nlohmann::json& row) {
  const auto& rep = row["offload"];
  const std::string engine = rep.value("engine", "vllm");
  const bool vllm = engine == "vllm";
  std::string s = format("\noffload %s under %s %s %llu blocks (%s, ", rep["spec"].get<std::string>().c_str(),
                         engine.c_str(), vllm ? "GPU" : "device",
                         row["capacity_blocks"].get<unsigned long long>(),
                         rep["engine_version"].get<std::string>().c_str());
  s += rep.contains("chunk_size_tokens")
           ? format("chunk_size %llu tokens):\n", rep["chunk_size_tokens"].get<unsigned long long>())
       : vllm ? format("block_size %llu tokens):\n", rep["block_size_tokens"].get<unsigned long long>())
            : format("%s, %llu-token pages):\n", rep["write_policy"].get<std::string>().c_str(),
                     rep["block_size_tokens"].get<unsigned long long>());
  s += format("  %-11s %-12s %12s %12s %10s %10s %10s\n", "tier", "policy", "capacity",
              "hit blocks", "loaded", "stored", "evicted");
  auto number = [](const nlohmann::json& t, const char* a, const char* b) {
    return std::to_string(t.contains(a) ? t[a].get<unsigned long long>() : t[b].get<unsigned long long>());
  };
  for (const auto& t : rep["tiers"]) {
    const bool lower = t.contains("policy");
    s += format("  %-11s %-12s %12s %12llu %10s %10s %10s\n", t["name"].get<std::string>().c_str(),
                lower ? t["policy"].get<std::string>().c_str() : engine.c_str(),
                t.contains("capacity_blocks") ? std::to_string(t["capacity_blocks"].get<unsigned long long>()).c_str()
                                              : "unbounded",
                t["hit_blocks"].get<unsigned long long>(),
                lower ? number(t, "chunks_loaded", "blocks_loaded").c_str() : "-",
                lower ? number(t, "chunks_stored", "blocks_stored").c_str() : "-",
                t.contains("evictions") ? std::to_string(t["evictions"].get<unsigned long long>()).c_str() : "-");
  }
  // Where the engine itself would not go on (LMCache 0.5.6 with a disk): say so beside the counts.
  const auto& c = rep["counters"];
  if (c.value("stalled_retrievals", 0ull) > 0) {
    s += format("  warning: %llu loads need CPU staging memory that nothing can free: LMCache's "
                "retrieve would wait forever there, first at request %llu (give the CPU tier more "
                "room than the longest load's chunks); the counts after it are what-ifs\n",
                c["stalled_retrievals"].get<unsigned long long>(),
                c["first_stall_request"].get<unsigned long long>());
  }
  if (c.value("lookup_stalls", 0ull) > 0) {
    s += format("  warning: %llu lookups never settle: promotions from the fs tier evict the same "
                "request's chunks from the CPU tier, and vLLM would retry them forever (give the "
                "CPU tier room for the longest prompt's offloaded blocks); the counts are what-ifs\n",
                c["lookup_stalls"].get<unsigned long long>());
  }
  if (c.value("disk_lfu_key_errors", 0ull) > 0) {
    s += format("  warning: %llu stores reach a disk chunk still being written in LMCache 0.5.6's "
                "disk LFU, which raises KeyError and stops the vLLM worker, first at request %llu "
                "(use another cache_policy or a larger disk)\n",
                c["disk_lfu_key_errors"].get<unsigned long long>(),
                c["first_key_error_request"].get<unsigned long long>());
  }
  return s;
}

}  // namespace

std::string to_text(const replay_result& r) {
  const auto& t = r.trace;
  const bool ideal_known = !t["unique_blocks"].is_null();
  std::string s = format("trace: %s  (%zu requests, %llu block refs, ",
                         t["path"].get<std::string>().c_str(), t["requests"].get<std::size_t>(),
                         t["block_refs"].get<unsigned long long>());
  if (ideal_known) s += format("%llu unique blocks, ", t["unique_blocks"].get<unsigned long long>());
  s += format("%u-token blocks, partial blocks: %s)\n", t["block_tokens"].get<unsigned>(),
              t["partial_block"] == "cache" ? "cached" : "skipped");
  if (ideal_known) {
    s += format("ideal (infinite cache): block hit ratio %.4f, token hit ratio %.4f\n\n",
                t["ideal_block_hit_ratio"].get<double>(), t["ideal_token_hit_ratio"].get<double>());
  } else {
    s += "ideal (infinite cache): not computed (--no-ideal)\n\n";
  }
  bool engines = false;  // an engine column only when an engine mode ran
  for (const auto& row : r.results) engines |= row.value("engine", "ideal") != "ideal";
  if (engines) s += format("%-7s ", "engine");
  int pw = 13;  // the policy column: as wide as the longest name (offload specs are long)
  for (const auto& row : r.results) {
    pw = std::max(pw, static_cast<int>(row["policy"].get<std::string>().size()));
  }
  s += format("%-10s %-*s %10s %10s %11s %11s %9s %9s %9s\n", "index", pw, "policy", "capacity",
              "blocks", "block hits", "token hits", "of opt", "of bound", "Mrefs/s");
  for (const auto& row : r.results) {
    if (engines) s += format("%-7s ", row["engine"].get<std::string>().c_str());
    char of_opt[16] = "-", of_bound[16] = "-";  // none computed (--no-opt, or a tier hierarchy)
    if (row.contains("opt_fraction")) {
      std::snprintf(of_opt, sizeof of_opt, "%.3f", row["opt_fraction"].get<double>());
      std::snprintf(of_bound, sizeof of_bound, "%.3f", row["bound_fraction"].get<double>());
    }
    s += format("%-10s %-*s %10s %10llu %11.4f %11.4f %9s %9s %9.1f\n",
                row["index"].get<std::string>().c_str(), pw, row["policy"].get<std::string>().c_str(),
                row["capacity"].get<std::string>().c_str(),
                row["capacity_blocks"].get<unsigned long long>(),
                row["block_hit_ratio"].get<double>(), row["token_hit_ratio"].get<double>(), of_opt,
                of_bound, row["block_refs_per_second"].get<double>() / 1e6);
  }
  if (!r.optimum.empty()) {
    s += "\nof opt: a share of the best offline policy's block hits (radix belady, radix "
         "belady+belady, flat min);\nof bound: of flat MIN with bypass, an upper bound on every "
         "policy (docs/prefix.md)\n";
    for (const auto& o : r.optimum) {
      s += format("  %10llu blocks: optimum %-19s block hit ratio %.4f, bound %llu block hits\n",
                  o["capacity_blocks"].get<unsigned long long>(),
                  o["policy"].get<std::string>().c_str(), o["block_hit_ratio"].get<double>(),
                  o["bound_block_hits"].get<unsigned long long>());
    }
  }
  // Per engine, the offload row with the most block hits, and its flags.
  const nlohmann::json* best[2] = {nullptr, nullptr};  // vllm, sglang
  for (const auto& row : r.results) {
    if (row.contains("tiers")) s += tier_text(row["tiers"]);
    if (!row.contains("offload")) continue;
    s += offload_text(row);
    // A configuration the engine cannot run (LMCache would hang or raise) is never recommended.
    const auto& oc = row["offload"]["counters"];
    if (oc.value("stalled_retrievals", 0ull) > 0 || oc.value("disk_lfu_key_errors", 0ull) > 0) continue;
    const nlohmann::json*& b = best[row["offload"].value("engine", "vllm") == "vllm" ? 0 : 1];
    if (b == nullptr || row["block_hits"].get<std::uint64_t>() > (*b)["block_hits"].get<std::uint64_t>()) {
      b = &row;
    }
  }
  if (best[0] != nullptr) {
    s += format("\nvLLM flags for the best offload row (%s, GPU %s blocks; the GPU's size is "
                "--gpu-memory-utilization's):\n  %svllm serve MODEL %s\n",
                (*best[0])["offload"]["spec"].get<std::string>().c_str(),
                (*best[0])["capacity"].get<std::string>().c_str(),
                (*best[0])["offload"].value("engine_env", std::string()).c_str(),
                (*best[0])["offload"]["engine_flags"].get<std::string>().c_str());
  }
  if (best[1] != nullptr) {
    s += format("\nSGLang flags for the best HiCache row (%s, device %s pages; the device's size "
                "is --mem-fraction-static's):\n  python -m sglang.launch_server --model-path MODEL %s\n",
                (*best[1])["offload"]["spec"].get<std::string>().c_str(),
                (*best[1])["capacity"].get<std::string>().c_str(),
                (*best[1])["offload"]["engine_flags"].get<std::string>().c_str());
  }
  return s;
}

}  // namespace kvtk::sim
