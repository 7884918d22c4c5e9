#include "cli/move.hpp"

#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unistd.h>

#include "cli/common.hpp"
#include "cli/tiers.hpp"
#include "util/memory_budget.hpp"
#include "move/calibration.hpp"
#include "move/executor.hpp"
#include "move/host_move.hpp"
#include "move/io_pool.hpp"

namespace kvtk::sim {
namespace {

using cli::usage_error;
using clock_type = std::chrono::steady_clock;
namespace mv = kvtk::sim::move;

struct row {
  std::string path, mech;
  std::uint64_t block_bytes, blocks, calls;
  double seconds;
  bool verified;
  double memcpy_bytes_per_s;  // one memcpy of the same total bytes (the reference)
};

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

}  // namespace

namespace {

int run_move_replay(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description opts(
      "kvtk move replay: replay a trace through a tier hierarchy and perform every decision on\n"
      "real host memory (promotions read up through a staging buffer, demotions and copies\n"
      "write down, computed blocks are written), verifying every arrival byte for byte; per\n"
      "link: bytes, measured copy time, and the time the tier model predicts.\nOptions");
  std::string trace, format, tiers, partial, json_out, dir, backend, cal_file, cal_mech;
  std::string bytes_text;
  std::uint32_t block_tokens = 0;
  cli::tier_flags flags;
  opts.add_options()("help,h", "show this help")("trace", po::value(&trace)->required(),
                                                 "trace file (any format)")(
      "format", po::value(&format)->default_value("auto"), "trace format")(
      "block-tokens", po::value(&block_tokens)->default_value(0), "tokens per block")(
      "tiers", po::value(&tiers)->required(),
      "hierarchy name:capacity:policy,... (capacity in blocks, tokens or bytes of --block-bytes blocks)")(
      "inclusive", "lower tiers keep copies")(
      "write-policy", po::value(&flags.write_policy)->default_value("write-back"),
      "write-back | write-through | write-through-selective[:N]")(
      "admission", po::value(&flags.admission)->default_value("always"), "lower-tier admission")(
      "block-bytes", po::value(&bytes_text)->default_value("4KiB"),
      "bytes per moved block (pools hold capacity x this)")(
      "partial-block", po::value(&partial)->default_value("skip"),
      "skip (only full blocks are cached: every command's default) | cache")(
      "backend", po::value(&backend)->default_value("host"),
      "host (hbm and dram tiers in DRAM, ssd/nvme/file tiers in files); for device memory use "
      "cuda/kv_move_replay")(
      "dir", po::value(&dir), "directory for file tiers (default: the system temp dir)")(
      "calibration", po::value(&cal_file),
      "predict link times from a calibration JSON (kvtk move bench --json); hbm counts as dram")(
      "calibration-mechanism", po::value(&cal_mech),
      "the mechanism whose fit to use (default: the fastest for 256 blocks)")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout");
  po::variables_map vm;
  nlohmann::json cal_report;
  kvtk::tier::hierarchy_config cfg;
  std::uint64_t bb = 0;
  kvtk::prefix::partial_block pb = kvtk::prefix::partial_block::skip;
  if (const int rc = cli::parse_command("move replay", opts, args, vm, [&] {
        cli::check_request_format(format);
        cli::resolve_trace(trace, format, block_tokens);
        if (vm.count("inclusive")) flags.inclusion = "inclusive";
        bb = parse_bytes(bytes_text);
        if (bb % 8 != 0) throw usage_error("--block-bytes: must be a multiple of 8");
        // Byte capacities count --block-bytes blocks; that needs whole bytes per token.
        if (bb % block_tokens != 0 && tiers.find('B') != std::string::npos) {
          throw usage_error("--tiers: a capacity in bytes needs --block-bytes (" +
                            std::to_string(bb) + ") to be a multiple of the block's " +
                            std::to_string(block_tokens) +
                            " tokens; give the capacities in blocks or tokens instead");
        }
        cfg = cli::parse_tier_spec(tiers, flags, block_tokens,
                                   bb % block_tokens == 0 ? bb / block_tokens : 0);
        pb = cli::parse_partial_block(partial) == 1 ? kvtk::prefix::partial_block::cache
                                                    : kvtk::prefix::partial_block::skip;
        if (backend == "cuda") {
          throw usage_error("--backend cuda: the device executor is its own program, "
                            "cuda/kv_move_replay (built with KVTK_CUDA; it needs only the CUDA "
                            "runtime, so it also builds on GPU machines without Boost.Program_options)");
        }
        if (backend != "host") throw usage_error("--backend: '" + backend + "' (host, cuda)");
        if (!vm.count("dir")) dir = std::filesystem::temp_directory_path().string();
        if (!std::filesystem::is_directory(dir)) throw usage_error("--dir: '" + dir + "' is not a directory");
        if (vm.count("calibration-mechanism") && !vm.count("calibration")) {
          throw usage_error("--calibration-mechanism needs --calibration");
        }
        cfg.block_bytes = bb;
        if (vm.count("calibration")) {
          try {
            cal_report = mv::apply_calibration(cfg, mv::calibration::load(cal_file), cal_mech, true);
          } catch (const std::runtime_error& e) {
            throw usage_error(std::string("--calibration ") + e.what());
          }
        }
      });
      rc >= 0) {
    return rc;
  }
  read_report skipped;
  const loaded_trace loaded = cli::load_trace_for("move replay", trace, format, block_tokens, false,
                                                  skipped);
  // Pools hold at most the trace's block references (a tier that holds them all never evicts).
  const auto run_cfg = cli::allocation_config(cfg, loaded.view().keys.size());
  double total = 0;
  for (const auto& t : run_cfg.tiers) total += static_cast<double>(t.capacity_blocks) * bb;
  if (total > 8.0 * 1073741824.0) {
    throw usage_error("--tiers x --block-bytes needs " + std::to_string(total / 1073741824.0) +
                      " GiB of pools after capping each tier at the trace's " +
                      std::to_string(loaded.view().keys.size()) + " block references (limit 8 GiB)");
  }
  double in_memory = 0;  // file tiers (ssd, nvme, file below the top) are not in memory
  for (std::size_t i = 0; i < run_cfg.tiers.size(); ++i) {
    if (i == 0 || mv::pool_kind(run_cfg.tiers[i].name) != "file") {
      in_memory += static_cast<double>(run_cfg.tiers[i].capacity_blocks) * static_cast<double>(bb);
    }
  }
  check_memory("--tiers " + cli::describe(run_cfg) + " x --block-bytes " + std::to_string(bb) +
                   " (memory pools, capped at the trace's block references)",
               in_memory + static_cast<double>(loaded.view().keys.size()) * cache_entry_bytes);
  nlohmann::json res;
  try {
    res = mv::execute(loaded.view(), run_cfg, bb, pb, dir);
  } catch (const std::runtime_error& e) {
    std::cerr << "kvtk move replay: " << e.what() << "\n";
    return 1;
  }
  res["partial_block"] = pb == kvtk::prefix::partial_block::cache ? "cache" : "skip";
  if (!cal_report.is_null()) res["calibration"] = cal_report;
  try {
    if (vm.count("json")) {
      cli::write_to(json_out, res.dump(2) + "\n");
    } else {
      std::cout << res.dump(2) << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "kvtk move replay: " << e.what() << "\n";
    return 1;
  }
  if (!res["verified"].get<bool>()) {
    std::cerr << "kvtk move replay: " << res["integrity_failures"] << " block(s) arrived corrupted\n";
    return 1;
  }
  return 0;
}

}  // namespace

int run_move(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  if (!args.empty() && args[0] == "replay") {
    return run_move_replay(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (args.empty() || args[0] != "bench") {
    const bool help = !args.empty() && (args[0] == "--help" || args[0] == "-h");
    (help ? std::cout : std::cerr)
        << "usage: kvtk move bench [options] | kvtk move replay --trace F --tiers … [options]\n"
           "  (the CUDA backend: cuda/kv_move_bench, cuda/validate.sh)\n";
    if (!help && !args.empty()) std::cerr << "kvtk move: unknown subcommand '" << args[0] << "'\n";
    return help ? 0 : 2;
  }
  po::options_description opts(
      "kvtk move bench: measure real block movement on the host backend (DRAM <-> DRAM,\n"
      "DRAM <-> file), verify every byte, and fit t = alpha + n*beta + bytes/B per path and\n"
      "mechanism (the calibration JSON).\nOptions");
  std::string backend, from, to, sizes, counts, mechs, dir, json_out, layout_name;
  std::uint32_t reps = 3, io_threads = 4;
  double max_gib = 1.0;
  opts.add_options()("help,h", "show this help")(
      "backend", po::value(&backend)->default_value("host"),
      "host (the CUDA paths: cuda/kv_move_bench)")(
      "from", po::value(&from)->default_value("dram"), "source tier: dram")(
      "to", po::value(&to)->default_value("dram,file"), "destinations: dram, file (a list)")(
      "block-bytes", po::value(&sizes)->default_value("16KiB,64KiB,1MiB,4MiB"), "block sizes")(
      "blocks", po::value(&counts)->default_value("1,16,256,1024"), "blocks per transfer")(
      "mechanism", po::value(&mechs)->default_value("per-piece,coalesced,threads"),
      "per-piece | coalesced | threads (a list; threads: --io-threads workers + the caller, "
      "each with a contiguous share, one pread/pwrite or memcpy per share)")(
      "io-threads", po::value(&io_threads)->default_value(4), "workers of the threads mechanism")(
      "layout", po::value(&layout_name)->default_value("block-first"),
      "block-first | layer-first (layer-first: 80 layers x K,V pieces per block)")(
      "dir", po::value(&dir), "directory for the file tier (default: the system temp dir)")(
      "reps", po::value(&reps)->default_value(3), "repetitions (the fastest counts)")(
      "max-gib", po::value(&max_gib)->default_value(1.0),
      "skip transfers larger than this many GiB")(
      "json", po::value(&json_out), "write rows and the calibration JSON to a file, or -");
  po::variables_map vm;
  std::vector<std::uint64_t> block_sizes, block_counts;
  std::vector<mv::mechanism> mechanisms;
  std::vector<std::string> mech_names, targets;
  if (const int rc = cli::parse_command(
          "move bench", opts, std::vector<std::string>(args.begin() + 1, args.end()), vm, [&] {
            if (backend != "host") {
              throw usage_error("--backend: '" + backend +
                                "' (this command measures host paths; the CUDA paths are measured by "
                                "cuda/kv_move_bench, run by cuda/validate.sh, whose results.json is "
                                "the same calibration format)");
            }
            if (from != "dram") throw usage_error("--from: only dram");
            if (!(max_gib > 0) || !std::isfinite(max_gib)) {
              throw usage_error("--max-gib: must be a positive number of GiB");
            }
            for (const auto& t : cli::split_list(to, "--to")) {
              if (t != "dram" && t != "file") throw usage_error("--to: '" + t + "' (dram, file)");
              targets.push_back(t);
            }
            for (const auto& s : cli::split_list(sizes, "--block-bytes")) block_sizes.push_back(parse_bytes(s));
            for (const auto& c : cli::split_list(counts, "--blocks")) {
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
              block_counts.push_back(n);
            }
            for (const auto& m : cli::split_list(mechs, "--mechanism")) {
              if (m == "per-piece") {
                mechanisms.push_back(mv::mechanism::per_piece);
              } else if (m == "coalesced") {
                mechanisms.push_back(mv::mechanism::coalesced);
              } else if (m == "threads") {
                mechanisms.push_back(mv::mechanism::threads);
              } else {
                throw usage_error("--mechanism: '" + m + "' (per-piece, coalesced, threads)");
              }
              mech_names.push_back(m);
            }
            if (layout_name != "block-first" && layout_name != "layer-first") {
              throw usage_error("--layout: '" + layout_name + "' (block-first, layer-first)");
            }
            if (reps == 0 || reps > 100) throw usage_error("--reps: must be in [1, 100]");
            if (io_threads == 0 || io_threads > 64) throw usage_error("--io-threads: must be in [1, 64]");
            if (block_sizes.empty() || block_counts.empty() || mechanisms.empty() || targets.empty()) {
              throw usage_error("empty --block-bytes, --blocks, --mechanism or --to");
            }
          });
      rc >= 0) {
    return rc;
  }
  const std::filesystem::path where = vm.count("dir") ? std::filesystem::path(dir)
                                                       : std::filesystem::temp_directory_path();
  mv::io_pool pool(io_threads);
  // Shares of [0, n) for the threads mechanism: one per worker and the caller.
  const auto share = [&](std::uint64_t n, std::size_t i, std::uint64_t& first, std::uint64_t& count) {
    const std::uint64_t parts = std::min<std::uint64_t>(n, pool.threads() + 1);
    first = n * i / parts;
    count = n * (i + 1) / parts - first;
  };
  const auto parts_of = [&](std::uint64_t n) {
    return static_cast<std::size_t>(std::min<std::uint64_t>(n, pool.threads() + 1));
  };
  std::vector<row> rows;
  bool all_verified = true;
  double memcpy_best = 0;
  for (std::uint64_t bb : block_sizes) {
    kvtk::move::kv_layout l;
    l.order = layout_name == "layer-first" ? kvtk::move::arrangement::layer_first
                                           : kvtk::move::arrangement::block_first;
    // bytes_per_block = layers * 2 * head_dim * 2 bytes * tokens: pick layers 80 (layer-first)
    // and fold the rest into tokens x head_dim.
    l.layers = l.order == kvtk::move::arrangement::layer_first ? 80 : 1;
    l.parts = l.order == kvtk::move::arrangement::layer_first ? 2 : 1;
    l.heads = 1;
    l.dtype_bytes = 1;
    l.tokens = 1;
    if (bb % (l.layers * l.parts) != 0) {
      std::cerr << "kvtk move bench: skipping " << bb << " B blocks (not divisible into "
                << l.layers * l.parts << " layer pieces)\n";
      continue;
    }
    l.head_dim = static_cast<std::uint32_t>(bb / (l.layers * l.parts));
    for (std::uint64_t n : block_counts) {
      if (static_cast<double>(bb * n) > max_gib * 1073741824.0) continue;
      mv::host_pool src(l, n), dst(l, n);
      std::vector<std::uint64_t> ids(n);
      std::iota(ids.begin(), ids.end(), 0);
      for (std::uint64_t b = 0; b < n; ++b) mv::fill_block(src, b, b * 7919 + bb);
      // The reference: one memcpy of the same bytes.
      {
        double best = 1e300;
        for (std::uint32_t r = 0; r < reps; ++r) {
          const auto t0 = clock_type::now();
          std::memcpy(dst.piece(0, 0), src.piece(0, 0), bb * n);
          best = std::min(best, since(t0));
        }
        memcpy_best = static_cast<double>(bb * n) / best;
      }
      for (std::size_t mi = 0; mi < mechanisms.size(); ++mi) {
        for (const auto& target : targets) {
          double best = 1e300;
          std::uint64_t calls = 0;
          bool ok = true;
          if (target == "dram") {
            for (std::uint32_t r = 0; r < reps; ++r) {
              std::memset(dst.piece(0, 0), 0, bb * n);
              const auto t0 = clock_type::now();
              if (mechanisms[mi] == mv::mechanism::threads) {
                std::vector<std::uint64_t> share_calls(parts_of(n));
                pool.run(parts_of(n), [&](std::size_t i) {
                  std::uint64_t first = 0, count = 0;
                  share(n, i, first, count);
                  const std::span<const std::uint64_t> part(ids.data() + first, count);
                  share_calls[i] = mv::copy_blocks(src, part, dst, part, mv::mechanism::coalesced);
                });
                calls = 0;
                for (auto c : share_calls) calls += c;
              } else {
                calls = mv::copy_blocks(src, ids, dst, ids, mechanisms[mi]);
              }
              best = std::min(best, since(t0));
            }
            for (std::uint64_t b = 0; b < n; ++b) ok = ok && mv::verify_block(dst, b, b * 7919 + bb);
          } else {  // dram -> file -> dram (the file tier is block-first)
            if (l.order != kvtk::move::arrangement::block_first) continue;
            mv::file_pool f((where / ("kvtk_move_bench_" + std::to_string(::getpid()))).string(),
                            bb, n, true);
            for (std::uint32_t r = 0; r < reps; ++r) {
              const auto t0 = clock_type::now();
              calls = 0;
              if (mechanisms[mi] == mv::mechanism::coalesced) {
                f.write(0, n, src.piece(0, 0));
                calls = 1;
              } else if (mechanisms[mi] == mv::mechanism::threads) {
                pool.run(parts_of(n), [&](std::size_t i) {
                  std::uint64_t first = 0, count = 0;
                  share(n, i, first, count);
                  f.write(first, count, src.piece(first, 0));
                });
                calls = parts_of(n);
              } else {
                for (std::uint64_t b = 0; b < n; ++b, ++calls) f.write(b, 1, src.piece(b, 0));
              }
              best = std::min(best, since(t0));
            }
            // The read path back up, with the same mechanism (each read lands in a zeroed pool
            // and is verified).
            double best_read = 1e300;
            std::uint64_t read_calls = 0;
            bool read_ok = true;
            for (std::uint32_t r = 0; r < reps; ++r) {
              std::memset(dst.piece(0, 0), 0, bb * n);
              const auto t0 = clock_type::now();
              read_calls = 0;
              if (mechanisms[mi] == mv::mechanism::coalesced) {
                f.read(0, n, dst.piece(0, 0));
                read_calls = 1;
              } else if (mechanisms[mi] == mv::mechanism::threads) {
                pool.run(parts_of(n), [&](std::size_t i) {
                  std::uint64_t first = 0, count = 0;
                  share(n, i, first, count);
                  f.read(first, count, dst.piece(first, 0));
                });
                read_calls = parts_of(n);
              } else {
                for (std::uint64_t b = 0; b < n; ++b, ++read_calls) f.read(b, 1, dst.piece(b, 0));
              }
              best_read = std::min(best_read, since(t0));
              for (std::uint64_t b = 0; b < n; ++b) {
                read_ok = read_ok && mv::verify_block(dst, b, b * 7919 + bb);
              }
            }
            ok = read_ok;  // the written bytes are checked by reading them back
            std::filesystem::remove(where / ("kvtk_move_bench_" + std::to_string(::getpid())));
            all_verified = all_verified && read_ok;
            rows.push_back({"file->dram", mech_names[mi], bb, n, read_calls, best_read, read_ok,
                            memcpy_best});
          }
          all_verified = all_verified && ok;
          rows.push_back({"dram->" + target, mech_names[mi], bb, n, calls, best, ok, memcpy_best});
        }
      }
    }
  }
  nlohmann::json out;
  out["backend"] = backend;
  out["layout"] = layout_name;
  out["rows"] = nlohmann::json::array();
  std::map<std::string, std::vector<mv::timing_sample>> groups;
  for (const auto& r : rows) {
    out["rows"].push_back({{"path", r.path},
                           {"mechanism", r.mech},
                           {"block_bytes", r.block_bytes},
                           {"blocks", r.blocks},
                           {"calls", r.calls},
                           {"seconds", r.seconds},
                           {"bytes_per_s", static_cast<double>(r.block_bytes * r.blocks) / r.seconds},
                           {"memcpy_bytes_per_s", r.memcpy_bytes_per_s},
                           {"of_memcpy", static_cast<double>(r.block_bytes * r.blocks) / r.seconds /
                                             r.memcpy_bytes_per_s},
                           {"verified", r.verified}});
    groups[r.path + " " + r.mech].push_back(
        {static_cast<double>(r.blocks), static_cast<double>(r.block_bytes * r.blocks), r.seconds});
  }
  out["calibration"] = nlohmann::json::object();
  for (const auto& [key, samples] : groups) {
    try {
      const mv::timing_model m = mv::fit_timing(samples);
      const double worst = kvtk::move::worst_relative_error(m, samples);
      out["calibration"][key] = {{"alpha_s", m.alpha_s},
                                 {"beta_s", m.beta_s},
                                 {"bytes_per_s", m.bytes_per_s},
                                 {"max_relative_error", worst},
                                 {"samples", samples.size()}};
    } catch (const std::invalid_argument&) {
      out["calibration"][key] = nullptr;  // too few distinct samples to fit
    }
  }
  out["verified"] = all_verified;
  try {
    if (vm.count("json")) cli::write_to(json_out, out.dump(2) + "\n");
  } catch (const std::exception& e) {
    std::cerr << "kvtk move bench: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json")) {
    std::printf("%-12s %-10s %12s %8s %8s %12s %10s %9s %s\n", "path", "mechanism",
                "block bytes", "blocks", "calls", "seconds", "GB/s", "of memcpy", "verified");
    for (const auto& r : rows) {
      const double rate = static_cast<double>(r.block_bytes * r.blocks) / r.seconds;
      std::printf("%-12s %-10s %12llu %8llu %8llu %12.6f %10.2f %9.2f %s\n", r.path.c_str(),
                  r.mech.c_str(), static_cast<unsigned long long>(r.block_bytes),
                  static_cast<unsigned long long>(r.blocks),
                  static_cast<unsigned long long>(r.calls), r.seconds, rate / 1e9,
                  rate / r.memcpy_bytes_per_s, r.verified ? "yes" : "NO");
    }
    std::printf("of memcpy: the row's rate / one memcpy of the same total bytes\n");
  }
  if (!all_verified) {
    std::cerr << "kvtk move bench: a block arrived corrupted\n";
    return 1;
  }
  return 0;
}

}  // namespace kvtk::sim
