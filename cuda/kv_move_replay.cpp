// cuda/kv_move_replay.cpp — the executor on real device memory: replays a request trace through
// a kvtk tier hierarchy whose top tier is a device arena (cudaMalloc) and whose lower tiers are
// pinned host arenas (cudaHostAlloc), and performs every decision with cudaMemcpyAsync:
//   promotion   lower tier (pinned) -> device staging   (H2D; staged before its slot is reused)
//   placement   device staging -> HBM slot (D2D), or a computed block's pattern -> HBM (H2D)
//   demotion    HBM slot -> pinned lower tier (D2H), lower -> lower tier (host memcpy)
// Every arrival is verified against the block's deterministic pattern (an HBM arrival is read back
// to the host for the check), and at the end every resident block of every tier is checked where
// it rests. One stream; each decision's copies are synchronised before the check, so a block is
// never read while a copy into it is in flight.
//
// Builds from the CUDA runtime, kvtk's headers (which need Boost.Intrusive's headers: staged by
// cuda/stage-headers.sh for machines without Boost) and the trace readers in sim/formats — no
// Boost.Program_options, no JSON library. `--emulate` runs the same code with host memory and
// memcpy in place of the device and cudaMemcpyAsync, so the executor's logic is tested in CI on
// machines without a GPU (ctest cuda.replay_emulated); without --emulate and without a device it
// prints "skipped: no CUDA device" and exits 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "formats/requests.hpp"
#include "kvtk/move/block_pattern.hpp"
#include "kvtk/tier/tier.hpp"

namespace {

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "kv_move_replay: %s\n", why.c_str());
  std::exit(2);
}

#define CK(call)                                                                             \
  do {                                                                                       \
    const cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "kv_move_replay: %s failed: %s (%s:%d)\n", #call,                 \
                   cudaGetErrorString(e_), __FILE__, __LINE__);                              \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Device memory and copies, or their host emulation.
struct copy_engine {
  bool emulate = false;
  cudaStream_t stream = nullptr;
  std::vector<void*> device_blocks, pinned_blocks, plain_blocks;

  // Emulation: page-aligned host memory stands in for both kinds.
  void* plain(std::size_t bytes) {
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (p == nullptr) die("cannot allocate " + std::to_string(bytes) + " bytes");
    plain_blocks.push_back(p);
    return p;
  }
  void* device(std::size_t bytes) {
    if (emulate) return plain(bytes);
    void* p = nullptr;
    CK(cudaMalloc(&p, bytes));
    device_blocks.push_back(p);
    return p;
  }
  void* pinned(std::size_t bytes) {
    if (emulate) return plain(bytes);
    void* p = nullptr;
    CK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    pinned_blocks.push_back(p);
    return p;
  }
  // Any direction: unified addressing tells the runtime which.
  void copy(void* dst, const void* src, std::size_t bytes) {
    if (emulate) {
      std::memcpy(dst, src, bytes);
    } else {
      CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
    }
  }
  void sync() {
    if (!emulate) CK(cudaStreamSynchronize(stream));
  }
  ~copy_engine() {
    for (void* p : plain_blocks) std::free(p);
    for (void* p : pinned_blocks) cudaFreeHost(p);
    for (void* p : device_blocks) cudaFree(p);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

struct link_measure {
  std::uint64_t blocks_up = 0, blocks_down = 0;
  double seconds_up = 0, seconds_down = 0;
};

struct state {
  copy_engine* eng = nullptr;
  std::uint64_t block_bytes = 0;
  std::vector<std::byte*> arena;  // per tier; tier 0 on the device
  std::byte* staging = nullptr;   // device: promotions of the current request
  std::size_t staging_blocks = 0;
  std::byte* host_scratch = nullptr;  // pinned: patterns to upload and read-backs to check
  std::vector<std::pair<kvtk::block_key, std::size_t>> staged;
  std::vector<link_measure> links;
  std::uint64_t verified = 0, failures = 0, fresh = 0, readbacks = 0;
  std::uint64_t corrupt_every = 0, copies_down = 0;  // test hook: --inject-corruption N

  std::byte* at(std::size_t tier, std::uint32_t slot) const {
    return arena[tier] + static_cast<std::size_t>(slot) * block_bytes;
  }
  // Checks the block at p (device or host) against key's pattern.
  void check(const std::byte* p, bool on_device, kvtk::block_key key) {
    const std::byte* host = p;
    if (on_device) {
      eng->copy(host_scratch, p, block_bytes);
      eng->sync();
      host = host_scratch;
      ++readbacks;
    }
    if (kvtk::move::check_pattern(host, key, 0, block_bytes)) {
      ++verified;
    } else {
      ++failures;
    }
  }
};

struct observer {
  state* st = nullptr;
  void staged(std::size_t tier, std::uint32_t slot, kvtk::block_key key) noexcept {
    state& s = *st;
    const std::size_t i = s.staged.size();
    if (i >= s.staging_blocks) return;  // sized for the longest request
    const auto t0 = clock_type::now();
    s.eng->copy(s.staging + i * s.block_bytes, s.at(tier, slot), s.block_bytes);
    s.eng->sync();
    s.links[tier].seconds_up += since(t0);
    for (std::size_t l = tier; l >= 1; --l) ++s.links[l].blocks_up;
    s.staged.emplace_back(key, i);
  }
  void placed(std::size_t tier, std::uint32_t slot, kvtk::block_key key, bool from_staging) noexcept {
    state& s = *st;
    if (from_staging) {
      const auto it = std::find_if(s.staged.begin(), s.staged.end(),
                                   [&](const auto& e) { return e.first == key; });
      if (it == s.staged.end()) {
        ++s.failures;  // a promotion whose bytes were never read
        return;
      }
      s.eng->copy(s.at(tier, slot), s.staging + it->second * s.block_bytes, s.block_bytes);
    } else {
      kvtk::move::fill_pattern(s.host_scratch, key, 0, s.block_bytes);  // computed by prefill
      s.eng->copy(s.at(tier, slot), s.host_scratch, s.block_bytes);
      ++s.fresh;
    }
    s.eng->sync();
    s.check(s.at(tier, slot), tier == 0, key);
  }
  void copied(std::size_t from, std::uint32_t from_slot, std::size_t to, std::uint32_t to_slot,
              kvtk::block_key key) noexcept {
    state& s = *st;
    const auto t0 = clock_type::now();
    s.eng->copy(s.at(to, to_slot), s.at(from, from_slot), s.block_bytes);
    s.eng->sync();
    s.links[to].seconds_down += since(t0);
    ++s.links[to].blocks_down;
    // The test hook flips one byte of every N-th copy into a host tier: verification must see it.
    if (s.corrupt_every != 0 && to > 0 && ++s.copies_down % s.corrupt_every == 0) {
      s.at(to, to_slot)[s.block_bytes / 2] ^= std::byte{0x5a};
    }
    s.check(s.at(to, to_slot), to == 0, key);
  }
};

// A JSON string body (quotes, backslashes and control characters escaped).
std::string escaped(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::uint64_t number(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') die(opt + ": '" + v + "' is not a whole number");
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  std::string trace, tiers = "hbm:2500:lru,dram:7500:lru", json_out, write = "write-back";
  std::uint64_t block_bytes = 65536;
  bool emulate = false, inclusive = false;
  std::uint64_t corrupt_every = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--trace") {
      trace = value();
    } else if (a == "--tiers") {
      tiers = value();
    } else if (a == "--block-bytes") {
      block_bytes = number(a, value());
    } else if (a == "--json") {
      json_out = value();
    } else if (a == "--write-policy") {
      write = value();
    } else if (a == "--inclusive") {
      inclusive = true;
    } else if (a == "--emulate") {
      emulate = true;
    } else if (a == "--inject-corruption") {
      corrupt_every = number(a, value());
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "kv_move_replay --trace F [--tiers hbm:2500:lru,dram:7500:lru] [--block-bytes 65536]\n"
          "               [--inclusive] [--write-policy write-back|write-through] [--json F]\n"
          "               [--emulate]   (host memory and memcpy instead of the device)\n"
          "               [--inject-corruption N]   (test: corrupt every N-th copy down)\n");
      return 0;
    } else {
      die("unknown option '" + a + "' (--help)");
    }
  }
  if (trace.empty()) die("--trace is required");
  if (block_bytes < 64 || block_bytes % 8 != 0 || block_bytes > (64u << 20)) {
    die("--block-bytes: a multiple of 8 in [64, 64 MiB]");
  }
  kvtk::tier::hierarchy_config cfg;
  cfg.mode = inclusive ? kvtk::tier::inclusion::inclusive : kvtk::tier::inclusion::exclusive;
  if (write == "write-through") {
    cfg.write.kind = kvtk::tier::write_policy::write_through;
  } else if (write != "write-back") {
    die("--write-policy: '" + write + "' (write-back, write-through)");
  }
  for (const auto& item : split(tiers, ',')) {
    const auto f = split(item, ':');
    if (f.size() != 3 || f[0].empty() || f[2].empty()) die("--tiers: '" + item + "' is not name:blocks:policy");
    kvtk::tier::tier_spec t;
    t.name = f[0];
    t.capacity_blocks = number("--tiers", f[1]);
    t.policy = f[2];
    cfg.tiers.push_back(t);
  }
  double total = 0;
  for (const auto& t : cfg.tiers) total += static_cast<double>(t.capacity_blocks) * block_bytes;
  if (total > 32.0 * (1ull << 30)) die("--tiers x --block-bytes needs more than 32 GiB");

  copy_engine eng;
  eng.emulate = emulate;
  if (!emulate) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      cudaGetLastError();
      std::printf("skipped: no CUDA device (use --emulate to run the executor on host memory)\n");
      return 0;
    }
    CK(cudaStreamCreate(&eng.stream));
  }

  kvtk::sim::loaded_trace loaded;
  try {
    const auto fmt = kvtk::sim::detect_trace_format(trace);
    loaded = kvtk::sim::loaded_trace::load(trace, fmt, kvtk::sim::default_block_tokens(trace, fmt),
                                           {}, nullptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kv_move_replay: %s\n", e.what());
    return 1;
  }
  const auto& t = loaded.view();
  const auto partial = kvtk::prefix::partial_block::cache;

  state st;
  st.eng = &eng;
  st.block_bytes = block_bytes;
  st.corrupt_every = corrupt_every;
  st.links.resize(cfg.tiers.size());
  std::unique_ptr<kvtk::tier::tier_hierarchy<kvtk::all_policies, observer>> h;
  try {
    h = std::make_unique<kvtk::tier::tier_hierarchy<kvtk::all_policies, observer>>(cfg, observer{&st});
  } catch (const std::invalid_argument& e) {
    die(std::string("--tiers: ") + e.what());
  }
  for (std::size_t i = 0; i < cfg.tiers.size(); ++i) {
    const std::size_t bytes = cfg.tiers[i].capacity_blocks * block_bytes;
    st.arena.push_back(static_cast<std::byte*>(i == 0 ? eng.device(bytes) : eng.pinned(bytes)));
  }
  std::size_t longest = 1;
  for (std::size_t r = 0; r < t.requests(); ++r) longest = std::max(longest, t.cacheable(r, partial).size());
  st.staging_blocks = longest;
  st.staging = static_cast<std::byte*>(eng.device(longest * block_bytes));
  st.host_scratch = static_cast<std::byte*>(eng.pinned(block_bytes));

  std::vector<std::uint8_t> served(longest);
  std::uint64_t refs = 0, hits = 0;
  const auto t0 = clock_type::now();
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const auto b = t.cacheable(r, partial);
    const std::uint64_t L = t.input_tokens(r), bt = t.block_tokens_of(r);
    st.staged.clear();
    kvtk::access_hint hint;
    const std::uint32_t hit = h->process(b, served, hint, [&](std::size_t i) {
      return std::min<std::uint64_t>((i + 1) * bt, L) - std::min<std::uint64_t>(i * bt, L);
    });
    refs += b.size();
    hits += hit;
  }
  const double wall = since(t0);
  std::uint64_t at_rest = 0, at_rest_bad = 0;
  for (std::size_t tier = 0; tier < cfg.tiers.size(); ++tier) {
    h->for_each_resident(tier, [&](kvtk::block_key key, std::uint32_t slot) {
      const std::uint64_t before = st.failures;
      st.check(st.at(tier, slot), tier == 0, key);
      ++at_rest;
      if (st.failures != before) ++at_rest_bad;
    });
  }
  const std::string audit = h->audit();
  std::uint64_t moves = 0;
  std::string links;
  for (std::size_t u = 1; u < cfg.tiers.size(); ++u) {
    const auto& m = st.links[u];
    moves += m.blocks_up + m.blocks_down;
    const double up = static_cast<double>(m.blocks_up) * block_bytes;
    const double down = static_cast<double>(m.blocks_down) * block_bytes;
    char line[512];
    std::snprintf(line, sizeof line,
                  "\", \"blocks_up\": %llu, \"blocks_down\": %llu, "
                  "\"seconds_up\": %.6g, \"seconds_down\": %.6g, \"bytes_per_s_up\": %.6g, "
                  "\"bytes_per_s_down\": %.6g}",
                  static_cast<unsigned long long>(m.blocks_up),
                  static_cast<unsigned long long>(m.blocks_down), m.seconds_up, m.seconds_down,
                  m.seconds_up > 0 ? up / m.seconds_up : 0.0,
                  m.seconds_down > 0 ? down / m.seconds_down : 0.0);
    links += std::string(links.empty() ? "" : ",\n") + "    {\"link\": \"" +
             escaped(cfg.tiers[u - 1].name) + "<->" + escaped(cfg.tiers[u].name) + line;
  }
  cudaDeviceProp prop{};
  std::string device = "emulated (host memory)";
  if (!emulate) {
    CK(cudaGetDeviceProperties(&prop, 0));
    device = prop.name;
  }
  char head[1024];
  std::snprintf(head, sizeof head,
                "  \"block_bytes\": %llu,\n  \"requests\": %zu,\n  \"block_refs\": %llu,\n"
                "  \"block_hits\": %llu,\n  \"blocks_computed\": %llu,\n  \"block_moves\": %llu,\n"
                "  \"arrivals_verified\": %llu,\n  \"readbacks\": %llu,\n  \"at_rest_verified\": %llu,\n"
                "  \"integrity_failures\": %llu,\n  \"wall_seconds\": %.6g,\n",
                static_cast<unsigned long long>(block_bytes), t.requests(),
                static_cast<unsigned long long>(refs), static_cast<unsigned long long>(hits),
                static_cast<unsigned long long>(st.fresh), static_cast<unsigned long long>(moves),
                static_cast<unsigned long long>(st.verified - (at_rest - at_rest_bad)),
                static_cast<unsigned long long>(st.readbacks),
                static_cast<unsigned long long>(at_rest - at_rest_bad),
                static_cast<unsigned long long>(st.failures), wall);
  const std::string out = "{\n  \"device\": \"" + escaped(device) + "\",\n  \"trace\": \"" +
                          escaped(trace) + "\",\n  \"tiers\": \"" + escaped(tiers) +
                          "\",\n  \"audit\": \"" + escaped(audit) + "\",\n" + head + "  \"links\": [\n" + links + "\n  ],\n  \"verified\": " +
                          (st.failures == 0 && audit.empty() ? "true" : "false") + "\n}\n";
  if (!json_out.empty()) {
    std::FILE* f = std::fopen(json_out.c_str(), "w");
    if (f == nullptr || std::fputs(out.c_str(), f) < 0 || std::fclose(f) != 0) {
      die("cannot write '" + json_out + "'");
    }
  }
  std::fputs(out.c_str(), stdout);
  if (st.failures != 0 || !audit.empty()) {
    std::fprintf(stderr, "kv_move_replay: %llu block(s) failed verification%s%s\n",
                 static_cast<unsigned long long>(st.failures), audit.empty() ? "" : "; audit: ",
                 audit.c_str());
    return 1;
  }
  return 0;
}
