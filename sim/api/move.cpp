#include "api/move.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <unistd.h>

#include "api/options_json.hpp"
#include "api/text.hpp"
#include "api/trace_options.hpp"
#include "api/tiers.hpp"
#include "formats/requests.hpp"
#include "move/calibration.hpp"
#include "move/executor.hpp"
#include "move/host_move.hpp"
#include "move/io_pool.hpp"
#include "util/memory_budget.hpp"

namespace kvtk::sim {
namespace {

using clock_type = std::chrono::steady_clock;
namespace mv = kvtk::sim::move;

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Bytes of a --block-bytes item ("64KiB", "1MiB", "4096").
std::uint64_t parse_bytes(const std::string& text) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw usage_error("--block-bytes: '" + text + "' is not a size");
  }
  static const std::map<std::string, double> unit = {
      {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"KB", 1e3}, {"MB", 1e6}};
  const auto it = unit.find(text.substr(pos));
  if (it == unit.end() || !(v > 0)) throw usage_error("--block-bytes: '" + text + "' is not a size");
  const double b = v * it->second;
  if (b < 64 || b > 1073741824.0 || std::floor(b) != b) {
    throw usage_error("--block-bytes: '" + text + "' must be a whole number of bytes in [64, 1GiB]");
  }
  return static_cast<std::uint64_t>(b);
}

// --- move replay -------------------------------------------------------------------------------

struct replay_plan {
  kvtk::tier::hierarchy_config cfg;
  std::uint64_t bb = 0;
  kvtk::prefix::partial_block pb = kvtk::prefix::partial_block::skip;
  std::string dir;
  nlohmann::json cal_report;
};

replay_plan plan_replay(const move_replay_options& o) {
  replay_plan p;
  if (o.inclusion != "exclusive" && o.inclusion != "inclusive") {
    throw usage_error("--inclusive: unknown inclusion '" + o.inclusion + "'");
  }
  const tier_flags flags{o.inclusion, o.write_policy, o.admission};
  p.bb = parse_bytes(o.block_bytes);
  if (p.bb % 8 != 0) throw usage_error("--block-bytes: must be a multiple of 8");
  // Byte capacities count --block-bytes blocks; that needs whole bytes per token.
  if (p.bb % o.block_tokens != 0 && o.tiers.find('B') != std::string::npos) {
    throw usage_error("--tiers: a capacity in bytes needs --block-bytes (" + std::to_string(p.bb) +
                      ") to be a multiple of the block's " + std::to_string(o.block_tokens) +
                      " tokens; give the capacities in blocks or tokens instead");
  }
  p.cfg = parse_tier_spec(o.tiers, flags, o.block_tokens,
                               p.bb % o.block_tokens == 0 ? p.bb / o.block_tokens : 0);
  p.pb = parse_partial_block(o.partial_block) == 1 ? kvtk::prefix::partial_block::cache
                                                        : kvtk::prefix::partial_block::skip;
  if (o.backend == "cuda") {
    throw usage_error("--backend cuda: the device executor is its own program, "
                      "cuda/kv_move_replay (built with KVTK_CUDA; it needs only the CUDA runtime, "
                      "so it also builds on GPU machines without Boost.Program_options)");
  }
  if (o.backend != "host") throw usage_error("--backend: '" + o.backend + "' (host, cuda)");
  p.dir = o.dir.empty() ? std::filesystem::temp_directory_path().string() : o.dir;
  if (!std::filesystem::is_directory(p.dir)) {
    throw usage_error("--dir: '" + p.dir + "' is not a directory");
  }
  if (!o.calibration_mechanism.empty() && o.calibration.empty()) {
    throw usage_error("--calibration-mechanism needs --calibration");
  }
  p.cfg.block_bytes = p.bb;
  if (!o.calibration.empty()) {
    try {
      p.cal_report = mv::apply_calibration(p.cfg, mv::calibration::load(o.calibration),
                                           o.calibration_mechanism, true);
    } catch (const std::runtime_error& e) {
      throw usage_error(std::string("--calibration ") + e.what());
    }
  }
  return p;
}

// Pools hold at most the trace's block references (a tier that holds them all never evicts);
// what remains must fit the 8 GiB pool limit and this process's memory.
kvtk::tier::hierarchy_config pools_for(const replay_plan& p, std::size_t refs) {
  const auto run_cfg = allocation_config(p.cfg, refs);
  double total = 0;
  for (const auto& t : run_cfg.tiers) total += static_cast<double>(t.capacity_blocks) * p.bb;
  if (total > 8.0 * 1073741824.0) {
    throw usage_error("--tiers x --block-bytes needs " + std::to_string(total / 1073741824.0) +
                      " GiB of pools after capping each tier at the trace's " +
                      std::to_string(refs) + " block references (limit 8 GiB)");
  }
  double in_memory = 0;  // file tiers (ssd, nvme, file below the top) are not in memory
  for (std::size_t i = 0; i < run_cfg.tiers.size(); ++i) {
    if (i == 0 || mv::pool_kind(run_cfg.tiers[i].name) != "file") {
      in_memory += static_cast<double>(run_cfg.tiers[i].capacity_blocks) * static_cast<double>(p.bb);
    }
  }
  check_memory("--tiers " + describe(run_cfg) + " x --block-bytes " + std::to_string(p.bb) +
                   " (memory pools, capped at the trace's block references)",
               in_memory + static_cast<double>(refs) * cache_entry_bytes);
  return run_cfg;
}

// --- move bench --------------------------------------------------------------------------------

struct bench_row {
  std::string path, mech;
  std::uint64_t block_bytes, blocks, calls;
  double seconds;
  bool verified;
  double memcpy_bytes_per_s;  // one memcpy of the same total bytes (the reference)
};

mv::mechanism mechanism_of(const std::string& m) {
  if (m == "per-piece") return mv::mechanism::per_piece;
  if (m == "coalesced") return mv::mechanism::coalesced;
  if (m == "threads") return mv::mechanism::threads;
  throw usage_error("--mechanism: '" + m + "' (per-piece, coalesced, threads)");
}

std::uint64_t parse_count(const std::string& c) {
  std::size_t pos = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(c, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != c.size() || n == 0 || n > (1u << 20)) {
    throw usage_error("--blocks: '" + c + "' must be in [1, 2^20]");
  }
  return n;
}

// The moving parts of one bench run: the worker pool, the scratch file's place, the rows.
struct bench_state {
  const move_bench_options& o;
  mv::io_pool pool;
  std::filesystem::path where;
  std::vector<bench_row> rows;
  bool all_verified = true;

  // Shares of [0, n) for the threads mechanism: one per worker and the caller.
  std::size_t parts_of(std::uint64_t n) const {
    return static_cast<std::size_t>(std::min<std::uint64_t>(n, pool.threads() + 1));
  }
  void share(std::uint64_t n, std::size_t i, std::uint64_t& first, std::uint64_t& count) const {
    const std::uint64_t parts = parts_of(n);
    first = n * i / parts;
    count = n * (i + 1) / parts - first;
  }

  // DRAM -> DRAM with mechanism m: the fastest of reps, then every block verified.
  void to_dram(mv::host_pool& src, mv::host_pool& dst, const std::vector<std::uint64_t>& ids,
               mv::mechanism m, const std::string& name, std::uint64_t bb, double memcpy_rate) {
    const std::uint64_t n = ids.size();
    double best = 1e300;
    std::uint64_t calls = 0;
    for (std::uint32_t r = 0; r < o.reps; ++r) {
      std::memset(dst.piece(0, 0), 0, bb * n);
      const auto t0 = clock_type::now();
      if (m == mv::mechanism::threads) {
        std::vector<std::uint64_t> share_calls(parts_of(n));
        pool.run(parts_of(n), [&](std::size_t i) {
          std::uint64_t first = 0, count = 0;
          share(n, i, first, count);
          const std::span<const std::uint64_t> part(ids.data() + first, count);
          share_calls[i] = mv::copy_blocks(src, part, dst, part, mv::mechanism::coalesced);
        });
        calls = std::accumulate(share_calls.begin(), share_calls.end(), std::uint64_t{0});
      } else {
        calls = mv::copy_blocks(src, ids, dst, ids, m);
      }
      best = std::min(best, since(t0));
    }
    bool ok = true;
    for (std::uint64_t b = 0; b < n; ++b) ok = ok && mv::verify_block(dst, b, b * 7919 + bb);
    all_verified = all_verified && ok;
    rows.push_back({"dram->dram", name, bb, n, calls, best, ok, memcpy_rate});
  }

  // One pass of the file (write when `write`), split by mechanism; returns the calls made.
  std::uint64_t file_pass(mv::file_pool& f, mv::host_pool& mem, std::uint64_t n, mv::mechanism m,
                          bool write) {
    auto io = [&](std::uint64_t first, std::uint64_t count) {
      if (write) {
        f.write(first, count, mem.piece(first, 0));
      } else {
        f.read(first, count, mem.piece(first, 0));
      }
    };
    if (m == mv::mechanism::coalesced) {
      io(0, n);
      return 1;
    }
    if (m == mv::mechanism::threads) {
      pool.run(parts_of(n), [&](std::size_t i) {
        std::uint64_t first = 0, count = 0;
        share(n, i, first, count);
        io(first, count);
      });
      return parts_of(n);
    }
    for (std::uint64_t b = 0; b < n; ++b) io(b, 1);
    return n;
  }

  // DRAM -> file -> DRAM (the file tier is block-first): the write, then the read path back up
  // with the same mechanism, each read landing in a zeroed pool and verified.
  void via_file(mv::host_pool& src, mv::host_pool& dst, std::uint64_t n, mv::mechanism m,
                const std::string& name, std::uint64_t bb, double memcpy_rate) {
    const auto file = where / ("kvtk_move_bench_" + std::to_string(::getpid()));
    mv::file_pool f(file.string(), bb, n, true);
    double best = 1e300, best_read = 1e300;
    std::uint64_t calls = 0, read_calls = 0;
    for (std::uint32_t r = 0; r < o.reps; ++r) {
      const auto t0 = clock_type::now();
      calls = file_pass(f, src, n, m, true);
      best = std::min(best, since(t0));
    }
    bool read_ok = true;
    for (std::uint32_t r = 0; r < o.reps; ++r) {
      std::memset(dst.piece(0, 0), 0, bb * n);
      const auto t0 = clock_type::now();
      read_calls = file_pass(f, dst, n, m, false);
      best_read = std::min(best_read, since(t0));
      for (std::uint64_t b = 0; b < n; ++b) read_ok = read_ok && mv::verify_block(dst, b, b * 7919 + bb);
    }
    std::filesystem::remove(file);
    all_verified = all_verified && read_ok;
    rows.push_back({"file->dram", name, bb, n, read_calls, best_read, read_ok, memcpy_rate});
    // The written bytes are checked by reading them back.
    rows.push_back({"dram->file", name, bb, n, calls, best, read_ok, memcpy_rate});
  }
};

kvtk::move::kv_layout layout_for(const std::string& name, std::uint64_t bb) {
  kvtk::move::kv_layout l;
  l.order = name == "layer-first" ? kvtk::move::arrangement::layer_first
                                  : kvtk::move::arrangement::block_first;
  // bytes_per_block = layers * 2 * head_dim * 2 bytes * tokens: pick layers 80 (layer-first)
  // and fold the rest into tokens x head_dim.
  l.layers = l.order == kvtk::move::arrangement::layer_first ? 80 : 1;
  l.parts = l.order == kvtk::move::arrangement::layer_first ? 2 : 1;
  l.heads = 1;
  l.dtype_bytes = 1;
  l.tokens = 1;
  l.head_dim = bb % (l.layers * l.parts) == 0 ? static_cast<std::uint32_t>(bb / (l.layers * l.parts)) : 0;
  return l;
}

nlohmann::json bench_report(const move_bench_options& o, const std::vector<bench_row>& rows,
                            bool verified) {
  nlohmann::json out;
  out["backend"] = o.backend;
  out["layout"] = o.layout;
  out["rows"] = nlohmann::json::array();
  std::map<std::string, std::vector<mv::timing_sample>> groups;
  for (const auto& r : rows) {
    const double rate = static_cast<double>(r.block_bytes * r.blocks) / r.seconds;
    out["rows"].push_back({{"path", r.path},
                           {"mechanism", r.mech},
                           {"block_bytes", r.block_bytes},
                           {"blocks", r.blocks},
                           {"calls", r.calls},
                           {"seconds", r.seconds},
                           {"bytes_per_s", rate},
                           {"memcpy_bytes_per_s", r.memcpy_bytes_per_s},
                           {"of_memcpy", rate / r.memcpy_bytes_per_s},
                           {"verified", r.verified}});
    groups[r.path + " " + r.mech].push_back(
        {static_cast<double>(r.blocks), static_cast<double>(r.block_bytes * r.blocks), r.seconds});
  }
  out["calibration"] = nlohmann::json::object();
  for (const auto& [key, samples] : groups) {
    try {
      const mv::timing_model m = mv::fit_timing(samples);
      out["calibration"][key] = {{"alpha_s", m.alpha_s},
                                 {"beta_s", m.beta_s},
                                 {"bytes_per_s", m.bytes_per_s},
                                 {"max_relative_error", kvtk::move::worst_relative_error(m, samples)},
                                 {"samples", samples.size()}};
    } catch (const std::invalid_argument&) {
      out["calibration"][key] = nullptr;  // too few distinct samples to fit
    }
  }
  out["verified"] = verified;
  return out;
}

}  // namespace

nlohmann::json to_json(const move_replay_options& o) {
  return {{"trace", o.trace},           {"format", o.format},
          {"block_tokens", o.block_tokens}, {"tiers", o.tiers},
          {"inclusion", o.inclusion},   {"write_policy", o.write_policy},
          {"admission", o.admission},   {"block_bytes", o.block_bytes},
          {"partial_block", o.partial_block}, {"backend", o.backend},
          {"dir", o.dir},               {"calibration", o.calibration},
          {"calibration_mechanism", o.calibration_mechanism}};
}

move_replay_options move_replay_options_from_json(const nlohmann::json& j) {
  move_replay_options o;
  detail::options_reader in(j, "move replay options");
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("tiers", o.tiers);
  in.get("inclusion", o.inclusion);
  in.get("write_policy", o.write_policy);
  in.get("admission", o.admission);
  in.get("block_bytes", o.block_bytes);
  in.get("partial_block", o.partial_block);
  in.get("backend", o.backend);
  in.get("dir", o.dir);
  in.get("calibration", o.calibration);
  in.get("calibration_mechanism", o.calibration_mechanism);
  in.get("block_tokens", o.block_tokens);
  in.finish();
  return o;
}

void validate(move_replay_options& o) {
  check_request_format(o.format);
  resolve_trace(o.trace, o.format, o.block_tokens);
  if (o.tiers.empty()) throw usage_error("--tiers: give the hierarchy");
  (void)plan_replay(o);
}

move_replay_result run(move_replay_options o) {
  validate(o);
  const replay_plan p = plan_replay(o);
  read_report skipped;
  std::vector<std::string> warnings;
  const loaded_trace loaded =
      load_trace_for(o.trace, o.format, o.block_tokens, false, skipped, warnings);
  const auto run_cfg = pools_for(p, loaded.view().keys.size());
  move_replay_result r;
  r.warnings = std::move(warnings);
  r.report = mv::execute(loaded.view(), run_cfg, p.bb, p.pb, p.dir);
  r.report["partial_block"] = p.pb == kvtk::prefix::partial_block::cache ? "cache" : "skip";
  if (!p.cal_report.is_null()) r.report["calibration"] = p.cal_report;
  r.verified = r.report["verified"].get<bool>();
  return r;
}

nlohmann::json to_json(const move_bench_options& o) {
  return {{"backend", o.backend}, {"from", o.from},       {"to", o.to},
          {"block_bytes", o.block_bytes}, {"blocks", o.blocks}, {"mechanism", o.mechanism},
          {"io_threads", o.io_threads}, {"layout", o.layout}, {"dir", o.dir},
          {"reps", o.reps},       {"max_gib", o.max_gib}};
}

move_bench_options move_bench_options_from_json(const nlohmann::json& j) {
  move_bench_options o;
  detail::options_reader in(j, "move bench options");
  in.get("backend", o.backend);
  in.get("from", o.from);
  in.get("to", o.to);
  in.get("block_bytes", o.block_bytes);
  in.get("blocks", o.blocks);
  in.get("mechanism", o.mechanism);
  in.get("io_threads", o.io_threads);
  in.get("layout", o.layout);
  in.get("dir", o.dir);
  in.get("reps", o.reps);
  in.get("max_gib", o.max_gib);
  in.finish();
  return o;
}

void validate(const move_bench_options& o) {
  if (o.backend != "host") {
    throw usage_error("--backend: '" + o.backend +
                      "' (this command measures host paths; the CUDA paths are measured by "
                      "cuda/kv_move_bench, run by cuda/validate.sh, whose results.json is the "
                      "same calibration format)");
  }
  if (o.from != "dram") throw usage_error("--from: only dram");
  if (!(o.max_gib > 0) || !std::isfinite(o.max_gib)) {
    throw usage_error("--max-gib: must be a positive number of GiB");
  }
  for (const auto& t : o.to) {
    if (t != "dram" && t != "file") throw usage_error("--to: '" + t + "' (dram, file)");
  }
  for (const auto& s : o.block_bytes) (void)parse_bytes(s);
  for (const auto& c : o.blocks) (void)parse_count(c);
  for (const auto& m : o.mechanism) (void)mechanism_of(m);
  if (o.layout != "block-first" && o.layout != "layer-first") {
    throw usage_error("--layout: '" + o.layout + "' (block-first, layer-first)");
  }
  if (o.reps == 0 || o.reps > 100) throw usage_error("--reps: must be in [1, 100]");
  if (o.io_threads == 0 || o.io_threads > 64) throw usage_error("--io-threads: must be in [1, 64]");
  if (o.block_bytes.empty() || o.blocks.empty() || o.mechanism.empty() || o.to.empty()) {
    throw usage_error("empty --block-bytes, --blocks, --mechanism or --to");
  }
}

move_bench_result run(const move_bench_options& o) {
  validate(o);
  move_bench_result result;
  bench_state st{o, mv::io_pool(o.io_threads),
                 o.dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(o.dir),
                 {}, true};
  for (const auto& size : o.block_bytes) {
    const std::uint64_t bb = parse_bytes(size);
    const kvtk::move::kv_layout l = layout_for(o.layout, bb);
    if (l.head_dim == 0) {
      result.warnings.push_back("skipping " + std::to_string(bb) +
                                " B blocks (not divisible into " + std::to_string(l.layers * l.parts) +
                                " layer pieces)");
      continue;
    }
    for (const auto& count : o.blocks) {
      const std::uint64_t n = parse_count(count);
      if (static_cast<double>(bb * n) > o.max_gib * 1073741824.0) continue;
      mv::host_pool src(l, n), dst(l, n);
      std::vector<std::uint64_t> ids(n);
      std::iota(ids.begin(), ids.end(), 0);
      for (std::uint64_t b = 0; b < n; ++b) mv::fill_block(src, b, b * 7919 + bb);
      double best = 1e300;  // the reference: one memcpy of the same bytes
      for (std::uint32_t r = 0; r < o.reps; ++r) {
        const auto t0 = clock_type::now();
        std::memcpy(dst.piece(0, 0), src.piece(0, 0), bb * n);
        best = std::min(best, since(t0));
      }
      const double memcpy_rate = static_cast<double>(bb * n) / best;
      for (const auto& name : o.mechanism) {
        for (const auto& target : o.to) {
          if (target == "dram") {
            st.to_dram(src, dst, ids, mechanism_of(name), name, bb, memcpy_rate);
          } else if (l.order == kvtk::move::arrangement::block_first) {
            st.via_file(src, dst, n, mechanism_of(name), name, bb, memcpy_rate);
          }
        }
      }
    }
  }
  result.verified = st.all_verified;
  result.report = bench_report(o, st.rows, st.all_verified);
  return result;
}

std::string to_text(const move_bench_result& r) {
  std::string s = detail::format("%-12s %-10s %12s %8s %8s %12s %10s %9s %s\n", "path", "mechanism",
                                 "block bytes", "blocks", "calls", "seconds", "GB/s", "of memcpy",
                                 "verified");
  for (const auto& row : r.report["rows"]) {
    s += detail::format("%-12s %-10s %12llu %8llu %8llu %12.6f %10.2f %9.2f %s\n",
                        row["path"].get<std::string>().c_str(),
                        row["mechanism"].get<std::string>().c_str(),
                        row["block_bytes"].get<unsigned long long>(),
                        row["blocks"].get<unsigned long long>(), row["calls"].get<unsigned long long>(),
                        row["seconds"].get<double>(), row["bytes_per_s"].get<double>() / 1e9,
                        row["of_memcpy"].get<double>(), row["verified"].get<bool>() ? "yes" : "NO");
  }
  s += "of memcpy: the row's rate / one memcpy of the same total bytes\n";
  return s;
}

}  // namespace kvtk::sim
