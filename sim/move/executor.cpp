#include "move/executor.hpp"

#include "kvtk/move/timing_fit.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "kvtk/move/block_pattern.hpp"
#include "move/calibration.hpp"

namespace kvtk::sim::move {
namespace {

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

void check(executor_state& st, const std::byte* p, kvtk::block_key key) {
  if (kvtk::move::check_pattern(p, key, 0, st.block_bytes)) {
    ++st.verified;
  } else {
    ++st.failures;
  }
}

// The observer's callbacks are noexcept (the hierarchy cannot unwind mid-update): a failed
// pread/pwrite is counted as an integrity failure and its message kept.
// Returns false when f threw (the failure is already counted: nothing to verify).
template <class F>
bool guarded(executor_state& st, F&& f) noexcept {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    ++st.io_errors;
    ++st.failures;
    if (st.first_error.empty()) st.first_error = e.what();
    return false;
  }
}

// Bytes of (tier, slot) -> dst memory.
void read_block(executor_state& st, std::size_t tier, std::uint32_t slot, std::byte* dst) {
  tier_storage& s = st.tiers[tier];
  if (s.file) {
    s.file->read(slot, 1, dst);
  } else {
    std::memcpy(dst, s.memory->piece(slot, 0), st.block_bytes);
  }
}

// src memory -> (tier, slot).
void write_block(executor_state& st, std::size_t tier, std::uint32_t slot, const std::byte* src) {
  tier_storage& s = st.tiers[tier];
  if (s.file) {
    s.file->write(slot, 1, src);
  } else {
    std::memcpy(s.memory->piece(slot, 0), src, st.block_bytes);
  }
}

}  // namespace

void executor_observer::request_started() noexcept { st->staged.clear(); }

void executor_observer::staged(std::size_t tier, std::uint32_t slot, kvtk::block_key key) noexcept {
  executor_state& s = *st;
  const std::size_t i = s.staged.size();
  if (i >= s.staging->blocks()) return;  // sized for the longest request
  std::byte* dst = s.staging->piece(i, 0);
  const bool read = guarded(s, [&] {
    const auto t0 = clock_type::now();
    read_block(s, tier, slot, dst);
    s.links[tier].seconds_up += since(t0);
  });
  for (std::size_t l = tier; l >= 1; --l) ++s.links[l].blocks_up;
  // A file tier's block arrives in memory here: this is where its earlier write is checked.
  if (read && s.tiers[tier].file) check(s, dst, key);
  s.staged.emplace_back(key, i);
}

void executor_observer::placed(std::size_t tier, std::uint32_t slot, kvtk::block_key key,
                               bool from_staging) noexcept {
  executor_state& s = *st;
  std::byte* src = nullptr;
  if (from_staging) {
    const auto it = std::find_if(s.staged.begin(), s.staged.end(),
                                 [&](const auto& e) { return e.first == key; });
    if (it == s.staged.end()) {
      ++s.failures;  // a promotion whose bytes were never read
      return;
    }
    src = s.staging->piece(it->second, 0);
  } else {
    src = s.bounce->piece(0, 0);
    kvtk::move::fill_pattern(src, key, 0, s.block_bytes);  // computed by the prefill
    ++s.fresh;
  }
  guarded(s, [&] { write_block(s, tier, slot, src); });
  if (!s.tiers[tier].file) check(s, s.tiers[tier].memory->piece(slot, 0), key);
}

void executor_observer::copied(std::size_t from, std::uint32_t from_slot, std::size_t to,
                               std::uint32_t to_slot, kvtk::block_key key) noexcept {
  executor_state& s = *st;
  guarded(s, [&] {
    const auto t0 = clock_type::now();
    tier_storage &a = s.tiers[from], &b = s.tiers[to];
    if (a.file) {  // file -> anything: through the bounce buffer
      a.file->read(from_slot, 1, s.bounce->piece(0, 0));
      write_block(s, to, to_slot, s.bounce->piece(0, 0));
    } else {
      write_block(s, to, to_slot, a.memory->piece(from_slot, 0));
    }
    s.links[to].seconds_down += since(t0);
    if (!b.file) check(s, b.memory->piece(to_slot, 0), key);
  });
  ++s.links[to].blocks_down;
}

namespace {

// The executor is an observer of the one replay index over the one hierarchy: `kvtk replay
// --tiers` and `kvtk move replay` make the same decisions; this one also moves the bytes.
using hierarchy = kvtk::tier::tier_hierarchy<kvtk::all_policies, executor_observer>;
using hierarchy_index = kvtk::tier::hierarchy_index<hierarchy>;

// Removes the tiers' files when the run ends (also when it throws).
struct remove_tier_files {
  executor_state& st;
  ~remove_tier_files() {
    for (auto& s : st.tiers) {
      s.file.reset();
      std::error_code ec;
      if (!s.file_path.empty()) std::filesystem::remove(s.file_path, ec);
    }
  }
};

// Creates each tier's storage in `st` (a file in `file_dir` for a file kind below the top, else a
// DRAM pool of layout `l`); returns the "storage" report.
nlohmann::json open_tiers(executor_state& st, const kvtk::tier::hierarchy_config& cfg,
                          const kvtk::move::kv_layout& l, const std::string& file_dir) {
  nlohmann::json storage = nlohmann::json::array();
  for (std::size_t i = 0; i < cfg.tiers.size(); ++i) {
    const auto& tier = cfg.tiers[i];
    tier_storage s;
    if (i > 0 && pool_kind(tier.name) == "file") {
      s.file_path = (std::filesystem::path(file_dir) /
                     ("kvtk_move_" + std::to_string(::getpid()) + "_" + tier.name + "_" +
                      std::to_string(i)))
                        .string();
      s.file = std::make_unique<file_pool>(s.file_path, st.block_bytes, tier.capacity_blocks, true);
      storage.push_back({{"tier", tier.name}, {"storage", "file"}, {"o_direct", s.file->direct()}});
    } else {
      s.memory = std::make_unique<host_pool>(l, tier.capacity_blocks);
      storage.push_back({{"tier", tier.name}, {"storage", "dram"}});
    }
    st.tiers.push_back(std::move(s));
  }
  return storage;
}

// Checks every block resident in any of the `tiers` tiers; returns {blocks checked, corrupted}.
std::pair<std::uint64_t, std::uint64_t> check_at_rest(hierarchy& h, executor_state& st,
                                                      std::size_t tiers) {
  // At rest: every block resident anywhere must still hold its own bytes.
  std::uint64_t at_rest = 0, at_rest_bad = 0;
  for (std::size_t tier = 0; tier < tiers; ++tier) {
    h.for_each_resident(tier, [&](kvtk::block_key key, std::uint32_t slot) {
      std::byte* buf = st.bounce->piece(0, 0);
      ++at_rest;
      // A failed read is already an integrity failure (guarded counts it); a read block that
      // does not match is one more.
      if (guarded(st, [&] { read_block(st, tier, slot, buf); }) &&
          !kvtk::move::check_pattern(buf, key, 0, st.block_bytes)) {
        ++at_rest_bad;
      }
    });
  }
  return {at_rest, at_rest_bad};
}

// The "links" report: per link, the blocks moved and the measured vs the predicted copy time.
nlohmann::json link_report(const executor_state& st, const kvtk::tier::hierarchy_config& cfg) {
  nlohmann::json links = nlohmann::json::array();
  for (std::size_t u = 1; u < cfg.tiers.size(); ++u) {
    const auto& m = st.links[u];
    const auto& spec = cfg.tiers[u];
    const double bbd = static_cast<double>(st.block_bytes);
    const double up_bytes = static_cast<double>(m.blocks_up) * bbd;
    const double down_bytes = static_cast<double>(m.blocks_down) * bbd;
    // One copy call per block: calls * (alpha + beta) + bytes / B.
    const kvtk::move::timing_model read{spec.latency_s, spec.read_per_block_s, spec.read_bytes_per_s};
    const kvtk::move::timing_model write{spec.write_latency_s, spec.write_per_block_s,
                                         spec.write_bytes_per_s};
    const double pred_up = read.predict_calls(static_cast<double>(m.blocks_up), up_bytes);
    const double pred_down = write.predict_calls(static_cast<double>(m.blocks_down), down_bytes);
    links.push_back(
        {{"link", cfg.tiers[u - 1].name + "<->" + spec.name},
         {"blocks_up", m.blocks_up},
         {"blocks_down", m.blocks_down},
         {"measured_seconds_up", m.seconds_up},
         {"measured_seconds_down", m.seconds_down},
         {"measured_bytes_per_s_up", m.seconds_up > 0 ? up_bytes / m.seconds_up : 0.0},
         {"measured_bytes_per_s_down", m.seconds_down > 0 ? down_bytes / m.seconds_down : 0.0},
         {"predicted_seconds_up", pred_up},
         {"predicted_seconds_down", pred_down},
         {"predicted_over_measured_up", m.seconds_up > 0 ? pred_up / m.seconds_up : 0.0},
         {"predicted_over_measured_down", m.seconds_down > 0 ? pred_down / m.seconds_down : 0.0}});
  }
  return links;
}

}  // namespace

nlohmann::json execute(const kvtk::prefix::prefix_trace_view& t,
                       const kvtk::tier::hierarchy_config& cfg, std::uint64_t block_bytes,
                       kvtk::prefix::partial_block partial, const std::string& file_dir) {
  executor_state st;
  st.block_bytes = block_bytes;
  kvtk::move::kv_layout l;
  l.layers = l.parts = l.heads = l.tokens = l.dtype_bytes = 1;
  l.head_dim = static_cast<std::uint32_t>(block_bytes);
  remove_tier_files remove_files{st};
  const nlohmann::json storage = open_tiers(st, cfg, l, file_dir);
  st.links.resize(cfg.tiers.size());
  std::size_t longest = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) longest = std::max(longest, t.cacheable(r, partial).size());
  st.staging = std::make_unique<host_pool>(l, std::max<std::size_t>(longest, 1));
  st.bounce = std::make_unique<host_pool>(l, 1);
  hierarchy_index index(cfg, executor_observer{&st});
  hierarchy& h = index.hierarchy();
  const auto t0 = clock_type::now();
  const kvtk::prefix::prefix_counts c = kvtk::prefix::replay(t, index, partial);
  const double wall = since(t0);
  const auto [at_rest, at_rest_bad] = check_at_rest(h, st, cfg.tiers.size());
  st.failures += at_rest_bad;
  nlohmann::json out = {{"requests", c.requests},
                        {"block_refs", c.block_refs},
                        {"block_hits", c.block_hits},
                        {"token_hits", c.token_hits},
                        {"block_hit_ratio", c.block_hit_ratio()},
                        {"block_bytes", block_bytes},
                        {"storage", storage},
                        {"blocks_computed", st.fresh},
                        {"arrivals_verified", st.verified},
                        {"at_rest_verified", at_rest - at_rest_bad},
                        {"at_rest_corrupted", at_rest_bad},
                        {"io_errors", st.io_errors},
                        {"integrity_failures", st.failures},
                        {"verified", st.failures == 0},
                        {"audit", h.audit()},
                        {"links", link_report(st, cfg)},
                        {"wall_seconds", wall}};
  if (!st.first_error.empty()) out["first_io_error"] = st.first_error;
  return out;
}

}  // namespace kvtk::sim::move
