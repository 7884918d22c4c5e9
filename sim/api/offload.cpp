// sim/api/offload.cpp — `kvtk replay --offload` specs and reports (api/offload.hpp).
#include "api/offload.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "api/tiers.hpp"
#include "api/trace_options.hpp"
#include "api/usage_error.hpp"
#include "kvtk/registry.hpp"

namespace kvtk::sim {
namespace {

std::uint64_t whole(const std::string& where, const std::string& key, const std::string& v) {
  std::size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || v[0] == '-' || n >= (1ull << 31)) {
    throw usage_error(where + ": " + key + "='" + v + "' is not a whole number below 2^31");
  }
  return n;
}

// A finite number below 1e6 (seconds, GB/s, microseconds): positive, or also 0 when
// `zero_ok` (a latency).
double number_below_1e6(const std::string& where, const std::string& key, const std::string& v,
                        bool zero_ok) {
  std::size_t used = 0;
  double x = -1;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || !(zero_ok ? x >= 0 : x > 0) || !(x < 1e6)) {
    throw usage_error(where + ": " + key + "='" + v + "' is not a number in " +
                      (zero_ok ? "[0, 1e6)" : "(0, 1e6)"));
  }
  return x;
}
double positive(const std::string& where, const std::string& key, const std::string& v) {
  return number_below_1e6(where, key, v, false);
}
double nonnegative(const std::string& where, const std::string& key, const std::string& v) {
  return number_below_1e6(where, key, v, true);
}

std::string without_option(const std::string& message);

// HiCache's L3 knobs (storage=file and the prefetch's): true when `key` is one of them.
bool hicache_l3_knob(offload_spec& s, const std::string& where, const std::string& key,
                     const std::string& value, std::uint32_t block_tokens, std::uint64_t bytes_per_token) {
  auto& l3 = s.hicache_l3;
  using kvtk::tier::hicache_prefetch_policy;
  if (key == "storage") {
    if (value != "file") {
      throw usage_error(where + ": storage='" + value + "': only SGLang's `file` backend is modelled "
                        "(--hicache-storage-backend file)");
    }
    l3.enabled = true;
  } else if (key == "storage_size") {
    std::uint64_t pages = 0;
    try {
      pages = parse_capacity(value, block_tokens, bytes_per_token);
    } catch (const usage_error& e) {
      throw usage_error(where + ": the storage size: " + without_option(e.what()));
    }
    if (pages == 0) throw usage_error(where + ": storage_size is below one page");
    s.storage_pages = pages;
  } else if (key == "prefetch_policy") {
    if (value == "best_effort") {
      l3.policy = hicache_prefetch_policy::best_effort;
    } else if (value == "wait_complete") {
      l3.policy = hicache_prefetch_policy::wait_complete;
    } else if (value == "timeout") {
      l3.policy = hicache_prefetch_policy::timeout;
    } else {
      throw usage_error(where + ": unknown prefetch_policy '" + value +
                        "' (best_effort wait_complete timeout)");
    }
  } else if (key == "prefetch_threshold") {
    l3.prefetch_threshold_tokens = whole(where, key, value);
  } else if (key == "prefetch_timeout_base") {
    l3.timeout_base_s = positive(where, key, value);
  } else if (key == "prefetch_timeout_per_ki_token") {
    l3.timeout_per_ki_token_s = positive(where, key, value);
  } else if (key == "storage_gb_per_s") {
    l3.bytes_per_s = positive(where, key, value) * 1e9;
  } else if (key == "storage_latency_us") {
    l3.latency_s = positive(where, key, value) * 1e-6;
  } else {
    return false;
  }
  s.l3_knobs_given = true;
  return true;
}

// The kvtk.integrations.vllm class of a kvtk policy, or "" when the module has none by name.
std::string adapter_class(const std::string& policy) {
  static const std::pair<const char*, const char*> classes[] = {
      {"lru", "KvtkLRU"},   {"fifo", "KvtkFIFO"}, {"clock", "KvtkClock"},
      {"sieve", "KvtkSieve"}, {"lfu", "KvtkLFU"}, {"2q", "KvtkTwoQ"},
      {"arc", "KvtkARC"},   {"s3fifo", "KvtkS3FIFO"}, {"wtinylfu", "KvtkWTinyLFU"}};
  for (const auto& [name, cls] : classes) {
    if (policy == name) return cls;
  }
  return {};
}

// A lower tier's bytes each way and its size, and with a price its rent (30-day months; for the
// trace's span when known).
void add_bytes(nlohmann::json& tier, double loaded, double stored, double capacity,
               double usd_per_gb_month, double trace_days) {
  tier["bytes_loaded"] = loaded;
  tier["bytes_stored"] = stored;
  tier["capacity_bytes"] = capacity;
  if (usd_per_gb_month <= 0) return;
  tier["usd_per_month"] = capacity / 1e9 * usd_per_gb_month;
  tier["usd_per_day"] = capacity / 1e9 * usd_per_gb_month / 30.0;
  if (trace_days > 0) tier["usd_for_trace"] = capacity / 1e9 * usd_per_gb_month / 30.0 * trace_days;
}

// `vllm serve`'s flags for a KV connector: the block size and the --kv-transfer-config JSON.
std::string kv_transfer_flags(std::uint32_t block_tokens, const nlohmann::json& cfg) {
  return "--block-size " + std::to_string(block_tokens) + " --kv-transfer-config '" + cfg.dump() +
         "'";
}

// parse_capacity's reason without its "--capacity: " prefix (a spec's size is not --capacity).
std::string without_option(const std::string& message) {
  const std::string prefix = "--capacity: ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

// The GPU tier's row of an offload report (vLLM's pool: what it served itself).
nlohmann::json gpu_tier(std::uint64_t capacity_blocks, std::uint64_t hit_blocks,
                        std::uint32_t block_tokens) {
  return {{"name", "gpu"},
          {"capacity_blocks", capacity_blocks},
          {"hit_blocks", hit_blocks},
          {"hit_tokens", hit_blocks * block_tokens}};
}

// kvtk's disk rate (kvbm's G3, LMCache's local disk): disk_gb_per_s, disk_latency_us. Their reads
// cost time in kvtk simulate; replay refuses them (replay_plan.cpp).
bool disk_link_knob(offload_spec& s, const std::string& where, const std::string& key,
                    const std::string& value) {
  if (key == "disk_gb_per_s") {
    s.disk_bytes_per_s = positive(where, key, value) * 1e9;
  } else if (key == "disk_latency_us") {
    s.disk_latency_s = nonnegative(where, key, value) * 1e-6;
  } else {
    return false;
  }
  s.disk_link_given = true;
  return true;
}

// LMCache under vLLM: lmcache-cpu:SIZE[:POLICY[:usd]][,chunk_size=N][,disk=SIZE][,disk_usd=X].
offload_spec parse_lmcache(offload_spec s, const std::string& where,
                           const std::vector<std::string>& f,
                           const std::vector<std::string>& items, std::uint32_t block_tokens,
                           std::uint64_t bytes_per_token) {
  s.engine = "vllm";
  s.size_given = f[1];
  try {
    s.size_blocks = parse_capacity(f[1], block_tokens, bytes_per_token);
  } catch (const usage_error& e) {
    throw usage_error(where + ": the size: " + without_option(e.what()));
  }
  std::string policy = f.size() >= 3 && !f[2].empty() ? f[2] : "lru";
  for (char& ch : policy) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  using kvtk::tier::lmcache_policy;
  if (policy == "lru") {
    s.lmcache.policy = lmcache_policy::lru;
  } else if (policy == "mru") {
    s.lmcache.policy = lmcache_policy::mru;
  } else if (policy == "fifo") {
    s.lmcache.policy = lmcache_policy::fifo;
  } else if (policy == "lfu") {
    s.lmcache.policy = lmcache_policy::lfu;
  } else {
    throw usage_error(where + ": unknown policy '" + f[2] + "' (LMCache 0.5.6's cache_policy: "
                      "lru mru fifo lfu)");
  }
  s.cfg.policy = policy;
  if (f.size() == 4) s.usd_per_gb_month = parse_usd_per_gb_month(where, f[3]);
  std::uint64_t chunk = 256, disk_blocks = 0;
  bool disk_usd_given = false;
  for (std::size_t i = 1; i < items.size(); ++i) {
    const auto eq = items[i].find('=');
    if (eq == std::string::npos) throw usage_error(where + ": '" + items[i] + "' is not key=value");
    const std::string key = items[i].substr(0, eq), value = items[i].substr(eq + 1);
    if (key == "chunk_size") {
      chunk = whole(where, key, value);
    } else if (key == "disk") {
      s.disk_given = value;
      try {
        disk_blocks = parse_capacity(value, block_tokens, bytes_per_token);
      } catch (const usage_error& e) {
        throw usage_error(where + ": the disk size: " + without_option(e.what()));
      }
    } else if (key == "disk_usd") {
      s.disk_usd_per_gb_month = parse_usd_per_gb_month(where, value);
      disk_usd_given = true;
    } else if (!disk_link_knob(s, where, key, value)) {
      throw usage_error(where + ": unknown knob '" + key + "' (LMCache's modelled: chunk_size, "
                        "disk (local_disk's max_local_disk_size), disk_usd, and kvtk's "
                        "disk_gb_per_s, disk_latency_us; save_decode_cache "
                        "and save_unfull_chunk are not modelled)");
    }
  }
  if (chunk == 0 || chunk % block_tokens != 0) {
    throw usage_error(where + ": chunk_size=" + std::to_string(chunk) + " is not a positive "
                      "multiple of the trace's " + std::to_string(block_tokens) + "-token blocks "
                      "(the trace's keys cannot name part of a block; give chunk_size=" +
                      std::to_string(block_tokens) + " or a multiple, or a trace with smaller blocks)");
  }
  s.lmcache.blocks_per_chunk = static_cast<std::uint32_t>(chunk / block_tokens);
  const std::uint64_t chunks = s.size_blocks / s.lmcache.blocks_per_chunk;
  if (chunks == 0) {
    throw usage_error(where + ": the size " + s.size_given + " (" + std::to_string(s.size_blocks) +
                      " GPU blocks) is below one chunk of " +
                      std::to_string(s.lmcache.blocks_per_chunk) + " GPU blocks");
  }
  if (chunks >= (1ull << 31)) throw usage_error(where + ": the size must be below 2^31 chunks");
  s.lmcache.cpu_chunks = static_cast<std::uint32_t>(chunks);
  if (disk_usd_given && s.disk_given.empty()) {
    throw usage_error(where + ": disk_usd prices the disk tier: give disk=SIZE too");
  }
  if (s.disk_link_given && s.disk_given.empty()) {
    throw usage_error(where + ": disk_gb_per_s and disk_latency_us time the disk tier: give disk=SIZE too");
  }
  if (!s.disk_given.empty()) {
    const std::uint64_t disk_chunks = disk_blocks / s.lmcache.blocks_per_chunk;
    if (disk_chunks == 0) {
      throw usage_error(where + ": the disk size " + s.disk_given + " (" +
                        std::to_string(disk_blocks) + " GPU blocks) is below one chunk of " +
                        std::to_string(s.lmcache.blocks_per_chunk) + " GPU blocks");
    }
    if (disk_chunks >= (1ull << 31)) {
      throw usage_error(where + ": the disk size must be below 2^31 chunks");
    }
    s.lmcache.disk_chunks = static_cast<std::uint32_t>(disk_chunks);
  }
  return s;
}

// Dynamo KVBM under vLLM: kvbm:HOST[:lru[:usd]][,disk=SIZE][,disk_filter=on|off].
offload_spec parse_kvbm(offload_spec s, const std::string& where, const std::vector<std::string>& f,
                        const std::vector<std::string>& items, std::uint32_t block_tokens,
                        std::uint64_t bytes_per_token) {
  s.engine = "vllm";
  s.size_given = f[1];
  auto blocks = [&](const std::string& what, const std::string& text) -> std::uint32_t {
    std::uint64_t n = 0;
    try {
      n = parse_capacity(text, block_tokens, bytes_per_token);
    } catch (const usage_error& e) {
      throw usage_error(where + ": the " + what + " size: " + without_option(e.what()));
    }
    if (n >= (1ull << 31)) throw usage_error(where + ": the " + what + " size must be below 2^31 blocks");
    return static_cast<std::uint32_t>(n);
  };
  auto zero = [](const std::string& text) {
    return !text.empty() && text.find_first_not_of('0') == std::string::npos;
  };
  bool disk_usd_given = false;
  s.kvbm.host_blocks = zero(f[1]) ? 0 : blocks("host", f[1]);
  s.size_blocks = s.kvbm.host_blocks;
  if (f.size() >= 3 && !f[2].empty() && f[2] != "lru") {
    throw usage_error(where + ": unknown policy '" + f[2] + "' (KVBM's pools reuse their least "
                      "recently released block: lru)");
  }
  s.cfg.policy = "lru";
  if (f.size() == 4) s.usd_per_gb_month = parse_usd_per_gb_month(where, f[3]);
  for (std::size_t i = 1; i < items.size(); ++i) {
    const auto eq = items[i].find('=');
    if (eq == std::string::npos) throw usage_error(where + ": '" + items[i] + "' is not key=value");
    const std::string key = items[i].substr(0, eq), value = items[i].substr(eq + 1);
    if (key == "disk") {
      s.disk_given = value;
      s.kvbm.disk_blocks = zero(value) ? 0 : blocks("disk", value);
    } else if (key == "disk_filter") {
      if (value != "on" && value != "off") {
        throw usage_error(where + ": disk_filter='" + value + "' is not on or off");
      }
      s.kvbm.disk_filter = value == "on";
    } else if (key == "disk_usd") {
      s.disk_usd_per_gb_month = parse_usd_per_gb_month(where, value);
      disk_usd_given = true;
    } else if (!disk_link_knob(s, where, key, value)) {
      throw usage_error(where + ": unknown knob '" + key + "' (KVBM 1.6.1's modelled: disk "
                        "disk_filter disk_usd, and kvtk's disk_gb_per_s disk_latency_us; offload priorities and the v2 policies are not "
                        "modelled)");
    }
  }
  if (disk_usd_given && s.kvbm.disk_blocks == 0) {
    throw usage_error(where + ": disk_usd prices the disk tier: give disk=SIZE too");
  }
  if (s.disk_link_given && s.kvbm.disk_blocks == 0) {
    throw usage_error(where + ": disk_gb_per_s and disk_latency_us time the disk tier: give disk=SIZE too");
  }
  if (s.kvbm.host_blocks == 0 && s.kvbm.disk_blocks == 0) {
    throw usage_error(where + ": give a host size of at least one block, or disk=SIZE (KVBM "
                      "needs a tier)");
  }
  bool filter_given = false;
  for (std::size_t i = 1; i < items.size(); ++i) filter_given |= items[i].rfind("disk_filter=", 0) == 0;
  if (filter_given && (s.kvbm.disk_blocks == 0 || s.kvbm.host_blocks == 0)) {
    throw usage_error(where + ": disk_filter is the host -> disk filter: it needs a host size and "
                      "disk=SIZE (without a host, KVBM writes to disk unfiltered)");
  }
  if (s.usd_per_gb_month > 0 && s.kvbm.host_blocks == 0) {
    throw usage_error(where + ": the price is the host tier's rent: give a host size");
  }
  return s;
}

// SGLang HiCache: host:SIZE|RATIOx[:lru[:usd]][,write_policy=...].
offload_spec parse_hicache(offload_spec s, const std::string& where,
                           const std::vector<std::string>& f,
                           const std::vector<std::string>& items, std::uint32_t block_tokens,
                           std::uint64_t bytes_per_token) {
  s.engine = "sglang";
  s.size_given = f[1];
  if (f[1].back() == 'x') {
    const std::string r = f[1].substr(0, f[1].size() - 1);
    std::size_t used = 0;
    double ratio = 0;
    try {
      ratio = std::stod(r, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    const bool plain = !r.empty() && r.find_first_not_of("0123456789.") == std::string::npos;
    if (!plain || used != r.size() || !(ratio > 0) || !(ratio < 1e6)) {
      throw usage_error(where + ": the size '" + f[1] + "' is not a ratio of the device pool "
                        "such as 2x (--hicache-ratio)");
    }
    s.hicache_ratio = ratio;
  } else {
    try {
      s.size_blocks = parse_capacity(f[1], block_tokens, bytes_per_token);
    } catch (const usage_error& e) {
      throw usage_error(where + ": the size: " + without_option(e.what()));
    }
    if (s.size_blocks == 0) throw usage_error(where + ": the size is below one page");
    if (s.size_blocks >= (1ull << 30)) throw usage_error(where + ": the size must be below 2^30 pages");
    s.hicache.host_pages = static_cast<std::uint32_t>(s.size_blocks);
  }
  if (f.size() >= 3 && !f[2].empty() && f[2] != "lru") {
    throw usage_error(where + ": unknown policy '" + f[2] + "' (SGLang's HiCache is modelled with "
                      "its default radix eviction, lru)");
  }
  s.cfg.policy = "lru";
  if (f.size() == 4) s.usd_per_gb_month = parse_usd_per_gb_month(where, f[3]);
  for (std::size_t i = 1; i < items.size(); ++i) {
    const auto eq = items[i].find('=');
    if (eq == std::string::npos) throw usage_error(where + ": '" + items[i] + "' is not key=value");
    const std::string key = items[i].substr(0, eq), value = items[i].substr(eq + 1);
    if (hicache_l3_knob(s, where, key, value, block_tokens, bytes_per_token)) continue;
    if (key != "write_policy") {
      throw usage_error(where + ": unknown knob '" + key + "' (SGLang HiCache's: write_policy; "
                        "L3: storage=file, storage_size, prefetch_policy, prefetch_threshold, "
                        "prefetch_timeout_base, prefetch_timeout_per_ki_token, storage_gb_per_s, "
                        "storage_latency_us)");
    }
    using kvtk::tier::hicache_write_policy;
    if (value == "write_through") {
      s.hicache.policy = hicache_write_policy::write_through;
    } else if (value == "write_through_selective") {
      s.hicache.policy = hicache_write_policy::write_through_selective;
    } else if (value == "write_back") {
      s.hicache.policy = hicache_write_policy::write_back;
    } else {
      throw usage_error(where + ": unknown write_policy '" + value +
                        "' (write_through write_through_selective write_back)");
    }
  }
  if (s.l3_knobs_given && !s.hicache_l3.enabled) {
    throw usage_error(where + ": the L3 knobs need storage=file (--hicache-storage-backend file)");
  }
  return s;
}

}  // namespace

std::string vllm_flags(const offload_spec& s, std::uint32_t block_tokens) {
  nlohmann::json extra;
  if (s.block_bytes > 0) {
    // vLLM rounds each offloaded block up to a 4,096-byte page (CPUOffloadingSpec's alignment).
    const std::uint64_t chunk = std::uint64_t{s.cfg.blocks_per_chunk} * s.block_bytes;
    extra["cpu_bytes_to_use"] = static_cast<std::uint64_t>(s.cfg.cpu_chunks) * ((chunk + 4095) / 4096 * 4096);
  } else {
    extra["cpu_bytes_to_use"] = "<" + std::to_string(s.cfg.cpu_chunks) +
                                " x the KV bytes of " +
                                std::to_string(s.cfg.blocks_per_chunk * block_tokens) +
                                " tokens: give --model>";
  }
  extra["block_size"] = s.cfg.blocks_per_chunk * block_tokens;
  const std::string& p = s.cfg.policy;
  if (p == "lru" || p == "arc") {
    extra["eviction_policy"] = p;
  } else {
    const std::string name = p.rfind("kvtk-", 0) == 0 ? p.substr(5) : p;
    const std::string cls = adapter_class(name);
    extra["eviction_policy"] = cls.empty() ? "<kvtk.integrations.vllm.make_policy_class('" + name +
                                                 "') bound to a name in your module>"
                                           : cls;
    extra["cache_policy_module_path"] = "kvtk.integrations.vllm";
  }
  if (s.cfg.store_threshold >= 2) extra["store_threshold"] = s.cfg.store_threshold;
  if (s.cfg.max_tracker_size != 64000) extra["max_tracker_size"] = s.cfg.max_tracker_size;
  if (s.cfg.secondary_fs) {
    extra["spec_name"] = "TieringOffloadingSpec";
    extra["secondary_tiers"] = nlohmann::json::array({{{"type", "fs"}, {"root_dir", "/path/to/kv-offload-dir"}}});
  }
  const nlohmann::json cfg = {{"kv_connector", "OffloadingConnector"},
                              {"kv_role", "kv_both"},
                              {"kv_connector_extra_config", extra}};
  return kv_transfer_flags(block_tokens, cfg);
}

offload_spec parse_offload_spec(const std::string& text, std::uint32_t block_tokens,
                                std::uint64_t bytes_per_token) {
  const std::string where = "--offload '" + text + "'";
  offload_spec s;
  s.text = text;
  s.block_bytes = bytes_per_token * block_tokens;
  const auto items = split(text, ',');
  const auto f = split(items.empty() ? std::string() : items[0], ':');
  if (f.size() < 2 || f.size() > 4 || f[0].empty() || f[1].empty()) {
    throw usage_error(where + ": not medium:size[:policy[:usd_per_gb_month]][,key=value...]");
  }
  s.medium = f[0];
  if (s.medium == "kvbm") return parse_kvbm(std::move(s), where, f, items, block_tokens, bytes_per_token);
  if (s.medium == "host") return parse_hicache(std::move(s), where, f, items, block_tokens, bytes_per_token);
  if (s.medium == "lmcache-cpu") {
    return parse_lmcache(std::move(s), where, f, items, block_tokens, bytes_per_token);
  }
  if (s.medium != "cpu") {
    throw usage_error(where + ": unknown medium '" + s.medium + "' (cpu: vLLM 0.33's CPU "
                      "offloading, with its fs secondary tier as secondary=fs; lmcache-cpu: "
                      "LMCache 0.5.6's local CPU backend under vLLM; host: SGLang 0.5.23's "
                      "HiCache host pool; kvbm: Dynamo KVBM 1.6.1's host and disk tiers under vLLM)");
  }
  s.size_given = f[1];
  try {
    s.size_blocks = parse_capacity(f[1], block_tokens, bytes_per_token);
  } catch (const usage_error& e) {
    throw usage_error(where + ": the size: " + without_option(e.what()));
  }
  if (f.size() >= 3 && !f[2].empty()) s.cfg.policy = f[2];
  if (f.size() == 4) s.usd_per_gb_month = parse_usd_per_gb_month(where, f[3]);
  std::uint64_t block_size = block_tokens;
  for (std::size_t i = 1; i < items.size(); ++i) {
    const auto eq = items[i].find('=');
    if (eq == std::string::npos) throw usage_error(where + ": '" + items[i] + "' is not key=value");
    const std::string key = items[i].substr(0, eq), value = items[i].substr(eq + 1);
    if (key == "block_size") {
      block_size = whole(where, key, value);
    } else if (key == "store_threshold") {
      s.cfg.store_threshold = static_cast<std::uint32_t>(whole(where, key, value));
    } else if (key == "max_tracker_size") {
      s.cfg.max_tracker_size = static_cast<std::uint32_t>(whole(where, key, value));
      if (s.cfg.max_tracker_size == 0) {
        throw usage_error(where + ": max_tracker_size must be >= 1 (kvtk's tracker holds keys)");
      }
    } else if (key == "secondary") {
      if (value != "fs") {
        throw usage_error(where + ": secondary='" + value + "': kvtk models vLLM 0.33's fs "
                          "secondary tier (secondary=fs); obj, p2p and kvcr are not modelled");
      }
      s.cfg.secondary_fs = true;
    } else {
      throw usage_error(where + ": unknown knob '" + key +
                        "' (known: block_size store_threshold max_tracker_size secondary)");
    }
  }
  if (block_size == 0 || block_size % block_tokens != 0) {
    throw usage_error(where + ": block_size=" + std::to_string(block_size) +
                      " is not a positive multiple of the GPU block's " +
                      std::to_string(block_tokens) + " tokens");
  }
  s.cfg.blocks_per_chunk = static_cast<std::uint32_t>(block_size / block_tokens);
  const std::uint64_t chunks = s.size_blocks / s.cfg.blocks_per_chunk;
  if (chunks == 0) {
    throw usage_error(where + ": the size " + s.size_given + " (" +
                      std::to_string(s.size_blocks) + " GPU blocks) is below one offloaded "
                      "block of " + std::to_string(s.cfg.blocks_per_chunk) + " GPU blocks");
  }
  if (chunks >= (1ull << 31)) throw usage_error(where + ": the size must be below 2^31 blocks");
  s.cfg.cpu_chunks = static_cast<std::uint32_t>(chunks);
  if (s.cfg.secondary_fs && s.cfg.policy != "lru") {
    throw usage_error(where + ": secondary=fs is modelled with vLLM's lru only (how its promotions "
                      "interact with arc and the adapter's policies is not)");
  }
  if (s.cfg.secondary_fs && s.cfg.store_threshold >= 2) {
    throw usage_error(where + ": vLLM's TieringOffloadingSpec (secondary=fs) refuses store_threshold >= 2");
  }
  const std::string& p = s.cfg.policy;
  const std::string kvtk_name = p.rfind("kvtk-", 0) == 0 ? p.substr(5) : p;
  if (p != "lru" && p != "arc" && !is_policy_name(kvtk_name)) {
    std::string known;
    for (auto n : policy_names) known += " " + std::string(n);
    throw usage_error(where + ": unknown policy '" + p + "' (vLLM's: lru arc; kvtk's, through its "
                      "adapter, as kvtk-NAME or NAME:" + known + ")");
  }
  if (p == "arc" && s.cfg.cpu_chunks + 1 >= (1u << 29)) {
    throw usage_error(where + ": vLLM's arc is modelled up to 2^29 - 2 offloaded blocks");
  }
  if (kvtk_name == "belady") {
    throw usage_error(where + ": belady is offline (it needs next uses) and cannot run in vLLM");
  }
  return s;
}

std::uint64_t hicache_host_pages(const offload_spec& s, std::uint64_t device_pages,
                                 std::uint32_t block_tokens) {
  if (s.hicache_ratio <= 0) return s.hicache.host_pages;
  // Python's int(D * ratio) on doubles, then whole pages plus SGLang's padding page.
  const double tokens = std::floor(static_cast<double>(device_pages * block_tokens) * s.hicache_ratio);
  if (!(tokens / block_tokens < 2147483648.0)) {
    throw usage_error("--offload '" + s.text + "': " + s.size_given + " of " +
                      std::to_string(device_pages) + " device pages is 2^31 host pages or more");
  }
  return static_cast<std::uint64_t>(tokens) / block_tokens + 1;
}

std::string sglang_flags(const offload_spec& s, std::uint64_t device_pages,
                         std::uint32_t block_tokens) {
  std::string out = "--page-size " + std::to_string(block_tokens) +
                    " --enable-hierarchical-cache --hicache-write-policy " +
                    kvtk::tier::name_of(s.hicache.policy);
  // The ratio (as given, or the one that gives exactly the host pages asked for: SGLang takes
  // int(device tokens x ratio) / page + 1 pages), printed in the fewest digits that read back as
  // the same double, as Python's repr does.
  double r = s.hicache_ratio;
  if (r <= 0) {
    const double tokens = static_cast<double>(device_pages * block_tokens);
    r = static_cast<double>(s.hicache.host_pages - 1) / static_cast<double>(device_pages);
    while (static_cast<std::uint64_t>(std::floor(tokens * r)) / block_tokens + 1 < s.hicache.host_pages) {
      r = std::nextafter(r, 2 * r + 1);
    }
  }
  char ratio[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(ratio, sizeof ratio, "%.*g", digits, r);
    if (std::strtod(ratio, nullptr) == r) break;
  }
  out += std::string(" --hicache-ratio ") + ratio;
  return out;
}

std::string describe(const offload_spec& s) {
  if (s.medium == "kvbm") {
    std::string out = "kvbm:" + std::to_string(s.kvbm.host_blocks);
    if (s.kvbm.disk_blocks > 0) out += "+disk" + std::to_string(s.kvbm.disk_blocks);
    if (s.kvbm.disk_blocks > 0 && !s.kvbm.disk_filter) out += ":nofilter";
    return out;
  }
  if (s.medium == "lmcache-cpu") {
    std::string out = s.medium + ":" + std::to_string(s.lmcache.cpu_chunks);
    if (s.lmcache.blocks_per_chunk > 1) out += "x" + std::to_string(s.lmcache.blocks_per_chunk);
    if (s.lmcache.disk_chunks > 0) out += "+disk" + std::to_string(s.lmcache.disk_chunks);
    return out + ":" + s.cfg.policy;
  }
  if (s.engine == "sglang") {
    return s.medium + ":" + s.size_given + ":" + kvtk::tier::name_of(s.hicache.policy);
  }
  std::string out = s.medium + ":" + std::to_string(s.cfg.cpu_chunks);
  if (s.cfg.blocks_per_chunk > 1) out += "x" + std::to_string(s.cfg.blocks_per_chunk);
  out += ":" + s.cfg.policy;
  if (s.cfg.store_threshold >= 2) out += ":t" + std::to_string(s.cfg.store_threshold);
  return out;
}

nlohmann::json offload_report(const offload_spec& s, const kvtk::tier::vllm_offload_counters& c,
                              std::uint32_t gpu_blocks, std::uint32_t block_tokens,
                              double trace_days) {
  const double chunk_bytes =
      static_cast<double>(s.block_bytes) * static_cast<double>(s.cfg.blocks_per_chunk);
  const double tier_bytes = chunk_bytes * static_cast<double>(s.cfg.cpu_chunks);
  nlohmann::json counters = {{"requests", c.requests},
                             {"unscheduled", c.unscheduled},
                             {"gpu_hit_blocks", c.gpu_hit_blocks},
                             {"cpu_hit_blocks", c.cpu_hit_blocks},
                             {"loaded_tokens", c.loaded_tokens},
                             {"chunks_loaded", c.chunks_loaded},
                             {"chunks_stored", c.chunks_stored},
                             {"chunks_evicted", c.chunks_evicted},
                             {"store_refusals", c.store_refusals},
                             {"threshold_skips", c.threshold_skips},
                             {"reused_chunks", c.reused_chunks}};
  if (s.cfg.secondary_fs) {
    counters["fs_promoted_chunks"] = c.fs_promoted_chunks;
    counters["fs_promotion_evictions"] = c.fs_promotion_evictions;
    counters["fs_promotion_refusals"] = c.fs_promotion_refusals;
    counters["fs_written_chunks"] = c.fs_written_chunks;
    counters["lookup_retries"] = c.lookup_retries;
    counters["lookup_stalls"] = c.lookup_stalls;
  }
  nlohmann::json tiers = nlohmann::json::array();
  tiers.push_back(gpu_tier(gpu_blocks, c.gpu_hit_blocks, block_tokens));
  nlohmann::json cpu = {{"name", s.medium},
                        {"policy", s.cfg.policy},
                        {"capacity", s.size_given},
                        {"capacity_blocks", std::uint64_t{s.cfg.cpu_chunks} * s.cfg.blocks_per_chunk},
                        {"capacity_chunks", s.cfg.cpu_chunks},
                        {"hit_blocks", c.cpu_hit_blocks},
                        {"hit_tokens", c.loaded_tokens},
                        {"chunks_loaded", c.chunks_loaded},
                        {"chunks_stored", c.chunks_stored},
                        {"evictions", c.chunks_evicted}};
  if (s.block_bytes > 0) {
    add_bytes(cpu, static_cast<double>(c.chunks_loaded) * chunk_bytes,
              static_cast<double>(c.chunks_stored) * chunk_bytes, tier_bytes, s.usd_per_gb_month,
              trace_days);
  }
  if (s.cfg.secondary_fs) {  // the rows partition the loads: promoted chunks are the fs tier's
    const std::uint64_t promoted = c.fs_promoted_chunks * s.cfg.blocks_per_chunk;
    cpu["hit_blocks"] = c.cpu_hit_blocks > promoted ? c.cpu_hit_blocks - promoted : 0;
  }
  tiers.push_back(cpu);
  if (s.cfg.secondary_fs) {
    // What the fs tier served: the chunks promoted from it (each then loaded from the CPU).
    nlohmann::json fs = {{"name", "fs"},
                         {"policy", "none"},  // vLLM's fs tier has no size and never evicts
                         {"capacity", "unbounded"},
                         {"hit_blocks", c.fs_promoted_chunks * s.cfg.blocks_per_chunk},
                         {"chunks_loaded", c.fs_promoted_chunks},  // promoted into the CPU
                         {"chunks_stored", c.fs_written_chunks}};  // written through
    if (s.block_bytes > 0) {
      fs["bytes_read"] = static_cast<double>(c.fs_promoted_chunks) * chunk_bytes;
      fs["bytes_written"] = static_cast<double>(c.fs_written_chunks) * chunk_bytes;
    }
    tiers.push_back(fs);
  }
  return {{"engine", "vllm"},
          {"engine_version", kvtk::tier::vllm_offload<>::engine_version},
          {"spec", s.text},
          {"block_size_tokens", std::uint64_t{s.cfg.blocks_per_chunk} * block_tokens},
          {"blocks_per_chunk", s.cfg.blocks_per_chunk},
          {"store_threshold", s.cfg.store_threshold},
          {"max_tracker_size", s.cfg.max_tracker_size},
          {"vllm_flags", vllm_flags(s, block_tokens)},
          {"engine_flags", vllm_flags(s, block_tokens)},
          {"tiers", tiers},
          {"counters", counters}};
}

// The `vllm serve` flags of an LMCache spec: the connector and LMCache's settings as lmcache.*
// extras (LMCache 0.5.6 applies them to its config), max_local_cpu_size in GiB of 2^30 bytes.
std::string lmcache_flags(const offload_spec& s, std::uint32_t block_tokens) {
  // A tier of n chunks in LMCache's GiB (2^30 bytes), each chunk's buffer aligned to 4,096 bytes.
  auto gib = [&](std::uint32_t n) -> nlohmann::json {
    if (s.block_bytes == 0) {
      return "<GiB: " + std::to_string(n) + " chunks x their KV bytes, give --model>";
    }
    const std::uint64_t chunk = std::uint64_t{s.lmcache.blocks_per_chunk} * s.block_bytes;
    return static_cast<double>(std::uint64_t{n} * ((chunk + 4095) / 4096 * 4096)) / 1073741824.0;
  };
  nlohmann::json extra;
  extra["lmcache.chunk_size"] = std::uint64_t{s.lmcache.blocks_per_chunk} * block_tokens;
  extra["lmcache.local_cpu"] = true;
  extra["lmcache.max_local_cpu_size"] = gib(s.lmcache.cpu_chunks);
  if (s.lmcache.disk_chunks > 0) {
    extra["lmcache.local_disk"] = "file:///path/to/lmcache-disk/";
    extra["lmcache.max_local_disk_size"] = gib(s.lmcache.disk_chunks);
  }
  extra["lmcache.cache_policy"] = kvtk::tier::name_of(s.lmcache.policy);
  const nlohmann::json cfg = {{"kv_connector", "LMCacheConnectorV1"},
                              {"kv_role", "kv_both"},
                              {"kv_connector_extra_config", extra}};
  return kv_transfer_flags(block_tokens, cfg);
}

nlohmann::json lmcache_report(const offload_spec& s, const kvtk::tier::lmcache_offload_counters& c,
                              std::uint32_t gpu_blocks, std::uint32_t block_tokens, double trace_days) {
  const nlohmann::json counters = {{"requests", c.requests},
                                   {"unscheduled", c.unscheduled},
                                   {"gpu_hit_blocks", c.gpu_hit_blocks},
                                   {"cpu_hit_blocks", c.cpu_hit_blocks},
                                   {"lookup_hit_tokens", c.lookup_hit_tokens},
                                   {"loaded_tokens", c.loaded_tokens},
                                   {"chunks_loaded", c.chunks_loaded},
                                   {"chunks_stored", c.chunks_stored},
                                   {"chunks_evicted", c.chunks_evicted},
                                   {"cut_stores", c.cut_stores}};
  nlohmann::json all = counters;
  if (s.lmcache.disk_chunks > 0) {
    all["disk_hit_blocks"] = c.disk_hit_blocks;
    all["disk_loaded_tokens"] = c.disk_loaded_tokens;
    all["disk_lookup_chunks"] = c.disk_lookup_chunks;
    all["disk_chunks_loaded"] = c.disk_chunks_loaded;
    all["chunks_promoted"] = c.chunks_promoted;
    all["disk_chunks_stored"] = c.disk_chunks_stored;
    all["disk_chunks_evicted"] = c.disk_chunks_evicted;
    all["stalled_retrievals"] = c.stalled_retrievals;
    all["disk_lfu_key_errors"] = c.disk_lfu_key_errors;
    if (c.stalled_retrievals > 0) all["first_stall_request"] = c.first_stall_request;
    if (c.disk_lfu_key_errors > 0) all["first_key_error_request"] = c.first_key_error_request;
  }
  nlohmann::json tiers = nlohmann::json::array();
  tiers.push_back(gpu_tier(gpu_blocks, c.gpu_hit_blocks, block_tokens));
  const std::uint64_t k = s.lmcache.blocks_per_chunk;
  nlohmann::json cpu = {{"name", s.medium},
                        {"policy", s.cfg.policy},
                        {"capacity", s.size_given},
                        {"capacity_blocks", std::uint64_t{s.lmcache.cpu_chunks} * k},
                        {"capacity_chunks", s.lmcache.cpu_chunks},
                        {"hit_blocks", c.cpu_hit_blocks},
                        {"hit_tokens", c.loaded_tokens - c.disk_loaded_tokens},
                        {"chunks_loaded", c.chunks_loaded - c.disk_chunks_loaded},
                        {"chunks_stored", c.chunks_stored},
                        {"evictions", c.chunks_evicted}};
  if (s.lmcache.disk_chunks > 0) cpu["chunks_promoted"] = c.chunks_promoted;
  const double chunk_bytes = static_cast<double>(s.block_bytes) * static_cast<double>(k);
  if (s.block_bytes > 0) {
    add_bytes(cpu, static_cast<double>(c.chunks_loaded - c.disk_chunks_loaded) * chunk_bytes,
              static_cast<double>(c.chunks_stored + c.chunks_promoted) * chunk_bytes,
              chunk_bytes * static_cast<double>(s.lmcache.cpu_chunks), s.usd_per_gb_month, trace_days);
  }
  tiers.push_back(cpu);
  if (s.lmcache.disk_chunks > 0) {
    // The disk's rent is disk_usd's (the spec's price is the CPU's).
    nlohmann::json disk = {{"name", "disk"},
                           {"policy", s.cfg.policy},
                           {"capacity", s.disk_given},
                           {"capacity_blocks", std::uint64_t{s.lmcache.disk_chunks} * k},
                           {"capacity_chunks", s.lmcache.disk_chunks},
                           {"hit_blocks", c.disk_hit_blocks},
                           {"hit_tokens", c.disk_loaded_tokens},
                           {"chunks_loaded", c.disk_chunks_loaded},
                           {"chunks_stored", c.disk_chunks_stored},
                           {"evictions", c.disk_chunks_evicted}};
    if (s.block_bytes > 0) {
      add_bytes(disk, static_cast<double>(c.disk_chunks_loaded) * chunk_bytes,
                static_cast<double>(c.disk_chunks_stored) * chunk_bytes,
                chunk_bytes * static_cast<double>(s.lmcache.disk_chunks), s.disk_usd_per_gb_month,
                trace_days);
    }
    tiers.push_back(disk);
  }
  return {{"engine", "vllm"},
          {"engine_version", kvtk::tier::lmcache_offload::engine_version},
          {"spec", s.text},
          {"block_size_tokens", k * block_tokens},
          {"chunk_size_tokens", k * block_tokens},
          {"engine_flags", lmcache_flags(s, block_tokens)},
          {"vllm_flags", lmcache_flags(s, block_tokens)},
          {"tiers", tiers},
          {"counters", all}};
}

// Dynamo KVBM's environment and `vllm serve` flags (its DynamoConnector) for a spec.
std::string kvbm_env(const offload_spec& s) {
  std::string env;
  if (s.kvbm.host_blocks > 0) {
    env += "DYN_KVBM_CPU_CACHE_OVERRIDE_NUM_BLOCKS=" + std::to_string(s.kvbm.host_blocks) + " ";
  }
  if (s.kvbm.disk_blocks > 0) {
    env += "DYN_KVBM_DISK_CACHE_OVERRIDE_NUM_BLOCKS=" + std::to_string(s.kvbm.disk_blocks) + " ";
    if (!s.kvbm.disk_filter) env += "DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER=true ";
  }
  return env;
}

std::string kvbm_flags(std::uint32_t block_tokens) {
  const nlohmann::json cfg = {{"kv_connector", "DynamoConnector"},
                              {"kv_connector_module_path", "kvbm.vllm_integration.connector"},
                              {"kv_role", "kv_both"}};
  return kv_transfer_flags(block_tokens, cfg);
}

nlohmann::json kvbm_report(const offload_spec& s, const kvtk::tier::dynamo_kvbm_counters& c,
                           std::uint32_t gpu_blocks, std::uint32_t block_tokens, double trace_days) {
  const nlohmann::json counters = {{"requests", c.requests},
                                   {"unscheduled", c.unscheduled},
                                   {"gpu_hit_blocks", c.gpu_hit_blocks},
                                   {"host_hit_blocks", c.host_hit_blocks},
                                   {"disk_hit_blocks", c.disk_hit_blocks},
                                   {"offered_blocks", c.offered_blocks},
                                   {"host_stored_blocks", c.host_stored_blocks},
                                   {"host_duplicate_blocks", c.host_duplicate_blocks},
                                   {"host_dropped_batches", c.host_dropped_batches},
                                   {"host_dropped_blocks", c.host_dropped_blocks},
                                   {"host_evictions", c.host_evictions},
                                   {"disk_stored_blocks", c.disk_stored_blocks},
                                   {"disk_evictions", c.disk_evictions},
                                   {"disk_present_skips", c.disk_present_skips},
                                   {"filter_skips", c.filter_skips},
                                   {"disk_dropped_batches", c.disk_dropped_batches},
                                   {"disk_dropped_blocks", c.disk_dropped_blocks}};
  nlohmann::json tiers = nlohmann::json::array();
  tiers.push_back(gpu_tier(gpu_blocks, c.gpu_hit_blocks, block_tokens));
  const double block = static_cast<double>(s.block_bytes);
  auto lower = [&](const char* name, const std::string& given, std::uint32_t blocks,
                   std::uint64_t hits, std::uint64_t stored, std::uint64_t evictions) {
    nlohmann::json t = {{"name", name},
                        {"policy", "lru"},
                        {"capacity", given},
                        {"capacity_blocks", blocks},
                        {"hit_blocks", hits},
                        {"hit_tokens", hits * block_tokens},
                        {"blocks_loaded", hits},
                        {"blocks_stored", stored},
                        {"evictions", evictions}};
    // The host's rent is the spec's price; the disk's is disk_usd's.
    if (s.block_bytes > 0) {
      add_bytes(t, static_cast<double>(hits) * block, static_cast<double>(stored) * block,
                static_cast<double>(blocks) * block,
                name == std::string("host") ? s.usd_per_gb_month : s.disk_usd_per_gb_month,
                trace_days);
    }
    tiers.push_back(t);
  };
  if (s.kvbm.host_blocks > 0) {
    lower("host", s.size_given, s.kvbm.host_blocks, c.host_hit_blocks, c.host_stored_blocks,
          c.host_evictions);
  }
  if (s.kvbm.disk_blocks > 0) {
    lower("disk", s.disk_given, s.kvbm.disk_blocks, c.disk_hit_blocks, c.disk_stored_blocks,
          c.disk_evictions);
    tiers.back()["filter"] = s.kvbm.host_blocks == 0 ? "bypass (unfiltered)"
                             : s.kvbm.disk_filter  ? "frequency"
                                                   : "off";
  }
  return {{"engine", "vllm"},
          {"engine_version", kvtk::tier::dynamo_kvbm::engine_version},
          {"spec", s.text},
          {"block_size_tokens", block_tokens},
          {"engine_env", kvbm_env(s)},
          {"engine_flags", kvbm_flags(block_tokens)},
          {"vllm_flags", kvbm_flags(block_tokens)},
          {"tiers", tiers},
          {"counters", counters}};
}

nlohmann::json hicache_report(const offload_spec& s, const kvtk::tier::sglang_hicache_counters& c,
                              std::uint64_t device_pages, std::uint64_t host_pages,
                              std::uint32_t block_tokens, double trace_days) {
  const nlohmann::json counters = {{"requests", c.requests},
                                   {"unscheduled", c.unscheduled},
                                   {"device_hit_blocks", c.device_hit_blocks},
                                   {"host_hit_blocks", c.host_hit_blocks},
                                   {"host_stored_blocks", c.host_stored_blocks},
                                   {"host_freed_blocks", c.host_freed_blocks},
                                   {"host_evicted_blocks", c.host_evicted_blocks},
                                   {"device_evicted_blocks", c.device_evicted_blocks},
                                   {"host_resident_blocks", c.host_stored_blocks - c.host_freed_blocks},
                                   {"declined_loads", c.declined_loads},
                                   {"failed_backups", c.failed_backups}};
  nlohmann::json tiers = nlohmann::json::array();
  tiers.push_back({{"name", "device"},
                   {"capacity_blocks", device_pages},
                   {"hit_blocks", c.device_hit_blocks},
                   {"hit_tokens", c.device_hit_blocks * block_tokens},
                   {"evictions", c.device_evicted_blocks}});
  nlohmann::json host = {{"name", s.medium},
                         {"policy", "lru"},
                         {"write_policy", kvtk::tier::name_of(s.hicache.policy)},
                         {"capacity", s.size_given},
                         {"capacity_blocks", host_pages},
                         {"hit_blocks", c.host_hit_blocks},
                         {"hit_tokens", c.host_hit_blocks * block_tokens},
                         {"blocks_loaded", c.host_hit_blocks},
                         {"blocks_stored", c.host_stored_blocks},
                         {"evictions", c.host_evicted_blocks}};
  if (s.block_bytes > 0) {
    const double tier_bytes = static_cast<double>(host_pages) * static_cast<double>(s.block_bytes);
    const double page = static_cast<double>(s.block_bytes);
    add_bytes(host, static_cast<double>(c.host_hit_blocks) * page,
              static_cast<double>(c.host_stored_blocks) * page, tier_bytes, s.usd_per_gb_month,
              trace_days);
  }
  tiers.push_back(host);
  return {{"engine", "sglang"},
          {"engine_version", kvtk::tier::sglang_hicache::engine_version},
          {"spec", s.text},
          {"block_size_tokens", block_tokens},
          {"write_policy", kvtk::tier::name_of(s.hicache.policy)},
          {"engine_flags", sglang_flags(s, device_pages, block_tokens)},
          {"tiers", tiers},
          {"counters", counters}};
}

}  // namespace kvtk::sim
