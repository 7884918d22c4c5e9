#include "des/simulator.hpp"
#include "util/memory_budget.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <kvtk/kvtk.hpp>
#include <memory>
#include <queue>
#include <random>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <variant>

#include "des/sparse_decode.hpp"

namespace kvtk::sim::des {
namespace {

template <class List>
struct variant_of;
template <class... Ps>
struct variant_of<kvtk::type_list<Ps...>> {
  using type = std::variant<std::monostate, kvtk::block_cache<Ps>...>;
};
using any_cache = variant_of<kvtk::all_policies>::type;

std::unique_ptr<any_cache> make_cache(const std::string& policy, std::uint64_t capacity) {
  auto c = std::make_unique<any_cache>();
  kvtk::visit_policy(policy, [&]<class P>() {
    typename kvtk::block_cache<P>::config cfg{};
    cfg.capacity = capacity;
    c->template emplace<kvtk::block_cache<P>>(cfg);
  });
  return c;
}

template <class F>
decltype(auto) with(any_cache& c, F&& f) {
  return std::visit(
      [&](auto& x) -> decltype(auto) {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::monostate>) {
          throw std::logic_error("empty cache");
          return f(std::get<1>(c));
        } else {
          return f(x);
        }
      },
      c);
}

enum kind : int { prefill_done = 0, transfer_done = 1, decode_done = 2, arrival = 3 };

struct event {
  double t;
  int kind;
  std::uint64_t seq;
  std::uint32_t instance, request;
  bool operator>(const event& o) const noexcept {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

struct instance {
  std::unique_ptr<any_cache> cache;  // null when there is no local cache
  std::unique_ptr<any_cache> dram;   // per-node host DRAM tier (LRU); null when none
  std::deque<std::uint32_t> queue;   // waiting prefills
  std::vector<std::uint32_t> batch;  // decoding requests
  std::vector<std::uint32_t> stepping;  // the requests of the decode step in progress
  std::unordered_map<kvtk::block_key, std::uint32_t> in_flight;
  bool busy = false;
  double busy_s = 0;
  double queued_prefill_s = 0;  // predicted prefill time of the queue (conductor)
  double busy_until = 0;
  double prefetch_excess_s = 0;  // sparse: prefetch link time the last step could not hide
  std::int64_t prefilling = -1;  // chunked prefill in progress (request), or -1
  std::uint64_t prefill_pos = 0;  // tokens of it done
  std::uint64_t queued_tokens = 0;
};

struct request_state {
  std::uint64_t remaining = 0;  // output tokens still to produce
  double last_token = 0, tbt_sum = 0;
  std::uint64_t tbt_n = 0;
  std::vector<kvtk::block_key> pinned;
  double predicted_prefill_s = 0;
};

// Token gaps are too many to keep: a log-bucketed histogram (1 % wide buckets from 1 us to
// ~10^5 s) gives quantiles within 1 %; the maximum is kept exactly.
class gap_histogram {
 public:
  void add(double s) {
    ++n_;
    max_ = std::max(max_, s);
    counts_[bucket(s)]++;
  }
  [[nodiscard]] double quantile(double q) const {
    if (n_ == 0) return 0;
    const auto want = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(n_)));
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < counts_.size(); ++b) {
      seen += counts_[b];
      if (seen >= std::max<std::uint64_t>(want, 1)) {
        return std::min(max_, b == 0 ? lo : lo * std::pow(ratio, static_cast<double>(b)));
      }
    }
    return max_;
  }
  [[nodiscard]] nlohmann::json json() const {
    return {{"p50", quantile(0.5)},   {"p90", quantile(0.9)}, {"p99", quantile(0.99)},
            {"p999", quantile(0.999)}, {"max", max_},          {"count", n_}};
  }

 private:
  static constexpr double lo = 1e-6, ratio = 1.01;
  static std::size_t bucket(double s) {
    if (!(s > lo)) return 0;
    const double b = std::ceil(std::log(s / lo) / std::log(ratio));
    return static_cast<std::size_t>(std::min(b, static_cast<double>(buckets - 1)));
  }
  static constexpr std::size_t buckets = 2600;
  std::vector<std::uint64_t> counts_ = std::vector<std::uint64_t>(buckets, 0);
  std::uint64_t n_ = 0;
  double max_ = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

nlohmann::json dist(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return {{"mean", v.empty() ? 0.0 : sum / static_cast<double>(v.size())},
          {"p50", percentile(v, 0.5)},
          {"p90", percentile(v, 0.9)},
          {"p99", percentile(v, 0.99)}};
}

// The routers, chosen once per simulation (not by comparing strings per request).
enum class router_kind { random, round_robin, least_loaded, cache_aware, conductor };
constexpr std::string_view router_names[] = {"random", "round-robin", "least-loaded",
                                             "cache-aware", "conductor"};

// Throws: kvtk::unknown_name (kind "router") listing the routers.
router_kind parse_router(const std::string& name) {
  for (std::size_t i = 0; i < std::size(router_names); ++i) {
    if (router_names[i] == name) return static_cast<router_kind>(i);
  }
  throw kvtk::unknown_name("router", name, kvtk::name_list(router_names));
}

class cluster {
 public:
  cluster(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c)
      : t_(t), c_(c), rng_(c.seed), out_(t.requests()), st_(t.requests()) {
    validate();
    router_ = parse_router(c.router);
    bt_ = t.block_tokens;
    block_bytes_ = static_cast<double>(c.model.kv_bytes_per_token) * bt_;
    page_bytes_ = static_cast<double>(c.model.kv_bytes_per_token) * c.sparse.page_tokens;
    if (c.sparse.enabled) sparse_ = std::make_unique<sparse_decoder>(c.sparse, t.requests());
    flops_per_s_ = c.gpu.tflops * 1e12 * c.gpu.efficiency * c.gpus_per_instance;
    p_ = c.cache_partial_block ? kvtk::prefix::partial_block::cache
                               : kvtk::prefix::partial_block::skip;
    // A cache never holds more blocks than the trace references, and one that can hold them
    // all never evicts: allocating min(capacity, refs) gives the same results with memory that
    // grows with the trace rather than with the option.
    const std::uint64_t refs = std::max<std::uint64_t>(t.keys.size(), 1);
    const std::uint64_t local = std::min(c.local_cache_blocks, refs);
    const std::uint64_t dram = std::min(c.dram_blocks, refs);
    const std::uint64_t pool = std::min(c.pool_blocks, refs);
    check_memory("prefill_instances x (local_cache + dram) + pool (" +
                     std::to_string(c.prefill_instances) + " x (" + std::to_string(local) + " + " +
                     std::to_string(dram) + ") + " + std::to_string(pool) +
                     " blocks, each capped at the trace's block references)",
                 (static_cast<double>(c.prefill_instances) * static_cast<double>(local + dram) +
                  static_cast<double>(pool)) *
                     cache_entry_bytes);
    prefill_.resize(c.prefill_instances);
    route_cost_.resize(c.prefill_instances);
    route_weight_.resize(c.prefill_instances);
    for (auto& in : prefill_) {
      if (local > 0) in.cache = make_cache(c.local_policy, local);
      if (dram > 0) in.dram = make_cache("lru", dram);
    }
    decode_.resize(c.decode_instances);
    if (pool > 0) pool_ = make_cache("lru", pool);
  }

  simulation_result run() {
    for (std::uint32_t r = 0; r < t_.requests(); ++r) push(t_.arrival_s[r], arrival, 0, r);
    while (!events_.empty()) {
      const event e = events_.top();
      events_.pop();
      now_ = e.t;
      switch (e.kind) {
        case arrival:
          on_arrival(e.request);
          break;
        case prefill_done:
          on_prefill_done(e.instance, e.request);
          break;
        case transfer_done:
          on_transfer_done(e.request);
          break;
        case decode_done:
          on_decode_done(e.instance);
          break;
      }
    }
    return summarize();
  }

 private:
  void validate() const {
    if (c_.prefill_instances == 0) throw std::invalid_argument("prefill_instances must be >= 1");
    if (c_.gpus_per_instance == 0) throw std::invalid_argument("gpus_per_instance must be >= 1");
    if (c_.max_batch == 0) throw std::invalid_argument("max_batch must be >= 1");
    if (!kvtk::is_policy_name(c_.local_policy) || c_.local_policy == "belady") {
      throw std::invalid_argument("local_policy: unknown or offline policy '" + c_.local_policy +
                                  "'");
    }
    for (double v : {c_.host_link_latency_s, c_.host_link_per_block_s, c_.pool_bytes_per_s, c_.pool_latency_s, c_.pd_link_bytes_per_s,
                     c_.time_scale, c_.router_temperature, c_.ttft_slo_s, c_.tbt_slo_s,
                     c_.router_prefill_weight}) {
      if (!(v >= 0) || !std::isfinite(v)) {
        throw std::invalid_argument("times, bandwidths, weights and SLOs must be finite and >= 0");
      }
    }
    if (!(c_.gpu.tflops > 0) || !(c_.gpu.hbm_bytes_per_s > 0) || !(c_.gpu.efficiency > 0)) {
      throw std::invalid_argument("gpu: tflops, hbm bandwidth and efficiency must be > 0");
    }
    if (t_.arrival_s.size() != t_.requests()) {
      throw std::invalid_argument("the trace has no arrival times (simulate needs them)");
    }
    sparse_decoder::validate(c_.sparse);
  }

  void push(double t, int kind, std::uint32_t inst, std::uint32_t req) {
    events_.push({t, kind, seq_++, inst, req});
  }

  std::uint64_t output_tokens(std::uint32_t r) const {
    std::uint64_t o = t_.output_length.empty() ? 1 : t_.output_length[r];
    if (c_.max_output_tokens >= 0) o = std::min<std::uint64_t>(o, c_.max_output_tokens);
    return std::max<std::uint64_t>(o, 1);  // the prefill's token
  }

  bool local_has(instance& in, kvtk::block_key k) {
    return in.cache && with(*in.cache, [&](auto& c) { return c.contains(k); });
  }
  bool pool_has(kvtk::block_key k) {
    return pool_ && with(*pool_, [&](auto& c) { return c.contains(k); });
  }
  bool dram_has(instance& in, kvtk::block_key k) {
    return in.dram && with(*in.dram, [&](auto& c) { return c.contains(k); });
  }
  struct match_result {
    std::uint64_t hit = 0, dram = 0, pool = 0;  // the run, and the parts from DRAM and the pool
  };
  // Leading run resident in the instance's HBM cache, its DRAM tier or the pool (the fastest
  // holder serves each block).
  match_result match(instance& in, std::span<const kvtk::block_key> b) {
    match_result m;
    for (; m.hit < b.size(); ++m.hit) {
      const kvtk::block_key k = b[m.hit];
      if (local_has(in, k)) continue;
      if (dram_has(in, k)) {
        ++m.dram;
        continue;
      }
      if (pool_has(k)) {
        ++m.pool;
        continue;
      }
      break;
    }
    return m;
  }
  double compute_s(std::uint64_t cached_tokens, std::uint64_t total) const {
    return prefill_flops(c_.model, cached_tokens, total) / flops_per_s_ * c_.time_scale;
  }
  // Loading hits from DRAM (host link) and the pool, one after the other.
  double load_s(const match_result& m) const {
    double s = 0;
    if (m.dram > 0) {
      // alpha + n*beta + bytes/B (a calibration fit; alpha = beta = 0 by default). Each of the
      // instance's GPUs moves its 1/TP share of every block over its own link.
      s += c_.host_link_latency_s + static_cast<double>(m.dram) * c_.host_link_per_block_s;
      if (c_.gpu.host_link_bytes_per_s > 0) {
        s += static_cast<double>(m.dram) * block_bytes_ /
             (c_.gpu.host_link_bytes_per_s * c_.gpus_per_instance);
      }
    }
    if (m.pool > 0) {
      s += c_.pool_latency_s;
      if (c_.pool_bytes_per_s > 0) s += static_cast<double>(m.pool) * block_bytes_ / c_.pool_bytes_per_s;
    }
    return s;
  }
  double prefill_s(const match_result& m, std::uint64_t L) const {
    const std::uint64_t cached = std::min<std::uint64_t>(m.hit * bt_, L);
    const double comp = compute_s(cached, L), load = load_s(m);
    return c_.overlap_load ? std::max(comp, load) : comp + load;
  }
  // What the request would wait for on instance i: its remaining busy time, its queue's
  // predicted prefills, and this request's prefill with its hits there.
  double predicted_ttft(std::uint32_t i, std::uint32_t r) {
    instance& in = prefill_[i];
    const auto m = match(in, t_.cacheable(r, p_));
    return std::max(0.0, in.busy_until - now_) + in.queued_prefill_s +
           prefill_s(m, t_.input_tokens(r));
  }

  std::uint32_t route(std::uint32_t r) {
    const std::size_t n = prefill_.size();
    if (router_ == router_kind::random) return static_cast<std::uint32_t>(rng_() % n);
    if (router_ == router_kind::round_robin) return static_cast<std::uint32_t>(rr_++ % n);
    const auto b = t_.cacheable(r, p_);
    std::vector<double>& cost = route_cost_;  // sized once: no allocation per request
    for (std::size_t i = 0; i < n; ++i) {
      instance& in = prefill_[i];
      if (router_ == router_kind::least_loaded) {
        cost[i] = static_cast<double>(in.queued_tokens);
      } else if (router_ == router_kind::cache_aware) {
        std::uint64_t overlap = 0;
        while (overlap < b.size() && local_has(in, b[overlap])) ++overlap;
        const double prefill_blocks = static_cast<double>(b.size() - overlap) +
                                      static_cast<double>(in.queued_tokens) / bt_;
        cost[i] = c_.router_prefill_weight * prefill_blocks + static_cast<double>(in.batch.size());
      } else {  // conductor: predicted TTFT
        cost[i] = predicted_ttft(static_cast<std::uint32_t>(i), r);
      }
    }
    if (router_ == router_kind::cache_aware && c_.router_temperature > 0) {
      const double lo = *std::min_element(cost.begin(), cost.end());
      std::vector<double>& w = route_weight_;
      for (std::size_t i = 0; i < n; ++i) w[i] = std::exp(-(cost[i] - lo) / c_.router_temperature);
      std::discrete_distribution<std::uint32_t> pick(w.begin(), w.end());
      return pick(rng_);
    }
    return static_cast<std::uint32_t>(std::min_element(cost.begin(), cost.end()) - cost.begin());
  }

  void on_arrival(std::uint32_t r) {
    out_[r].arrival = now_;
    out_[r].input_tokens = t_.input_tokens(r);
    out_[r].blocks = t_.cacheable(r, p_).size();
    const std::uint32_t i = route(r);
    out_[r].instance = i;
    instance& in = prefill_[i];
    if (c_.reject_over_slo && c_.ttft_slo_s > 0 && predicted_ttft(i, r) > c_.ttft_slo_s) {
      out_[r].rejected = true;  // admission control: it would miss its TTFT SLO
      out_[r].prefill_start = out_[r].first_token = out_[r].done = now_;
      ++rejected_;
      return;
    }
    match_and_pin(i, r);
    // Conductor's queue estimate: the request's prefill without cache as an upper bound.
    st_[r].predicted_prefill_s = compute_s(0, t_.input_tokens(r));
    in.queued_prefill_s += st_[r].predicted_prefill_s;
    in.queued_tokens += t_.input_tokens(r);
    in.queue.push_back(r);
    try_start(i);
  }

  void try_start(std::uint32_t i) {
    instance& in = prefill_[i];
    if (in.busy) return;
    if (in.prefilling >= 0) {
      run_chunk(i);  // resume the chunked prefill after the decode step
      return;
    }
    if (!in.queue.empty()) {
      const std::uint32_t r = in.queue.front();
      in.queue.pop_front();
      in.queued_prefill_s -= st_[r].predicted_prefill_s;
      start_prefill(i, r);
    } else if (c_.decode_instances == 0 && !in.batch.empty()) {
      start_decode_step(in, i, /*decode pool*/ false);
    }
  }

  // Blocks being computed: per instance, or cluster-wide when a pool shares results.
  std::unordered_map<kvtk::block_key, std::uint32_t>& in_flight(std::uint32_t i) {
    return pool_ ? pool_in_flight_ : prefill_[i].in_flight;
  }

  // At arrival: the hit run (local cache or pool), local hits pinned until the prefill finishes,
  // in-flight misses counted, and the request's own missing blocks marked in flight.
  void match_and_pin(std::uint32_t i, std::uint32_t r) {
    instance& in = prefill_[i];
    const auto b = t_.cacheable(r, p_);
    const std::uint64_t L = t_.input_tokens(r);
    const match_result m = match(in, b);
    const std::uint64_t h = m.hit;
    auto& flying = in_flight(i);
    std::uint64_t inflight = 0;
    while (h + inflight < b.size() && flying.count(b[h + inflight])) ++inflight;
    request_outcome& o = out_[r];
    o.hit_blocks = h;
    o.pool_blocks = m.pool;
    o.dram_blocks = m.dram;
    o.inflight_miss_blocks = inflight;
    o.hit_tokens = std::min<std::uint64_t>(h * bt_, L);
    for (std::uint64_t k = 0; k < h; ++k) {
      if (in.cache && with(*in.cache, [&](auto& c) { return c.pin(b[k]); })) {
        st_[r].pinned.push_back(b[k]);
      }
    }
    for (std::uint64_t k = h; k < b.size(); ++k) ++flying[b[k]];
  }

  void start_prefill(std::uint32_t i, std::uint32_t r) {
    instance& in = prefill_[i];
    const std::uint64_t L = t_.input_tokens(r);
    request_outcome& o = out_[r];
    o.prefill_start = now_;
    pool_read_blocks_ += o.pool_blocks;
    dram_read_blocks_ += o.dram_blocks;
    saved_flops_ += prefill_flops(c_.model, 0, L) - prefill_flops(c_.model, o.hit_tokens, L);
    in.queued_tokens -= L;
    if (c_.chunk_tokens > 0) {
      in.prefilling = r;
      in.prefill_pos = o.hit_tokens;
      run_chunk(i);
      return;
    }
    const double dur = prefill_s({o.hit_blocks, o.dram_blocks, o.pool_blocks}, L);
    in.busy = true;
    in.busy_s += dur;
    in.busy_until = now_ + dur;
    push(now_ + dur, prefill_done, i, r);
  }

  // One chunk of a chunked prefill: the next chunk_tokens uncached tokens (the first chunk also
  // loads the DRAM and pool hits, overlapped or not as configured).
  void run_chunk(std::uint32_t i) {
    instance& in = prefill_[i];
    const auto r = static_cast<std::uint32_t>(in.prefilling);
    const std::uint64_t L = t_.input_tokens(r);
    const request_outcome& o = out_[r];
    const std::uint64_t end = std::min<std::uint64_t>(L, in.prefill_pos + c_.chunk_tokens);
    double dur = prefill_flops(c_.model, in.prefill_pos, end) / flops_per_s_ * c_.time_scale;
    if (in.prefill_pos == o.hit_tokens) {
      const double load = load_s({o.hit_blocks, o.dram_blocks, o.pool_blocks});
      dur = c_.overlap_load ? std::max(dur, load) : dur + load;
    }
    in.prefill_pos = end;
    in.busy = true;
    in.busy_s += dur;
    in.busy_until = now_ + dur;
    push(now_ + dur, prefill_done, i, r);
  }

  void on_prefill_done(std::uint32_t i, std::uint32_t r) {
    instance& in = prefill_[i];
    if (in.prefilling >= 0 && in.prefill_pos < t_.input_tokens(r)) {
      // A chunk ended: decode gets a step in between (colocated), then the prefill resumes.
      in.busy = false;
      if (c_.decode_instances == 0 && !in.batch.empty()) {
        start_decode_step(in, i, false);
      } else {
        run_chunk(i);
      }
      return;
    }
    in.prefilling = -1;
    const auto b = t_.cacheable(r, p_);
    kvtk::access_hint hint;
    for (std::size_t k = 0; k < b.size(); ++k) {
      hint.depth = static_cast<std::uint32_t>(k);
      if (in.cache) with(*in.cache, [&](auto& c) { c.access(b[k], hint); });
      if (in.dram) with(*in.dram, [&](auto& c) { c.access(b[k], hint); });
      if (pool_) {
        const bool had = pool_has(b[k]);
        with(*pool_, [&](auto& c) { c.access(b[k], hint); });
        if (!had) ++pool_write_blocks_;
      }
    }
    for (kvtk::block_key k : st_[r].pinned) with(*in.cache, [&](auto& c) { c.unpin(k); });
    st_[r].pinned.clear();
    auto& flying = in_flight(i);
    for (std::size_t k = out_[r].hit_blocks; k < b.size(); ++k) {
      auto it = flying.find(b[k]);
      if (it != flying.end() && --it->second == 0) flying.erase(it);
    }
    request_outcome& o = out_[r];
    o.first_token = now_;
    st_[r].last_token = now_;
    st_[r].remaining = output_tokens(r) - 1;
    o.output_tokens = 1;
    in.busy = false;
    if (st_[r].remaining == 0) {
      finish(r);
    } else if (c_.decode_instances == 0) {
      in.batch.push_back(r);
    } else {
      const double bytes = static_cast<double>(t_.input_tokens(r)) * c_.model.kv_bytes_per_token;
      pd_bytes_ += bytes;
      const double dt = c_.pd_link_bytes_per_s > 0 ? bytes / c_.pd_link_bytes_per_s : 0.0;
      push(now_ + dt, transfer_done, 0, r);
    }
    try_start(i);
  }

  void on_transfer_done(std::uint32_t r) {
    std::uint32_t best = 0;
    for (std::uint32_t d = 1; d < decode_.size(); ++d) {
      if (decode_[d].batch.size() < decode_[best].batch.size()) best = d;
    }
    decode_[best].batch.push_back(r);
    if (!decode_[best].busy) start_decode_step(decode_[best], best, true);
  }

  // Host-link time of n pages (recall or prefetch): alpha + n beta + bytes / (B TP).
  double link_s(std::uint64_t pages) const {
    if (pages == 0) return 0;
    double s = c_.host_link_latency_s + static_cast<double>(pages) * c_.host_link_per_block_s;
    if (c_.gpu.host_link_bytes_per_s > 0) {
      s += static_cast<double>(pages) * page_bytes_ /
           (c_.gpu.host_link_bytes_per_s * c_.gpus_per_instance);
    }
    return s;
  }

  void start_decode_step(instance& in, std::uint32_t i, bool decode_pool) {
    in.stepping.assign(in.batch.begin(),
                       in.batch.begin() + std::min<std::size_t>(in.batch.size(), c_.max_batch));
    double kv_bytes = 0;
    std::uint64_t recalls = 0, prefetched = 0;
    for (std::uint32_t r : in.stepping) {
      if (c_.sparse.enabled) {
        const auto k =
            sparse_->step(r, t_.input_tokens(r) + out_[r].output_tokens, st_[r].remaining);
        kv_bytes += static_cast<double>(k.pages) * page_bytes_;
        recalls += k.recalls;
        prefetched += k.prefetched;
        out_[r].recalls += k.recalls;
      } else {
        kv_bytes += static_cast<double>(t_.input_tokens(r) + out_[r].output_tokens) *
                    c_.model.kv_bytes_per_token;
      }
    }
    double dur = (2.0 * c_.model.active_params + kv_bytes) /
                 (c_.gpu.hbm_bytes_per_s * c_.gpu.efficiency * c_.gpus_per_instance) *
                 c_.time_scale;
    if (c_.sparse.enabled) {
      decode_kv_read_bytes_ += kv_bytes;
      ++sparse_batch_steps_;
      const double recall_s =
          c_.sparse.prefetch_layer_ahead
              ? layer_ahead_stall(link_s(recalls), c_.host_link_latency_s, dur,
                                  std::max<std::uint32_t>(1, c_.model.layers))
              : link_s(recalls);
      const double stall = recall_s + in.prefetch_excess_s;
      in.prefetch_excess_s = 0;
      if (stall > 0) {
        ++stalled_steps_;
        stall_s_ += stall;
        for (std::uint32_t r : in.stepping) out_[r].stall_s += stall;
      }
      dur += stall;
      // Prefetches for the next step load during this one; what does not fit stalls the next.
      in.prefetch_excess_s = std::max(0.0, link_s(prefetched) - dur);
    }
    in.busy = true;
    in.busy_s += dur;
    in.busy_until = now_ + dur;
    push(now_ + dur, decode_done, i + (decode_pool ? decode_flag : 0), 0);
  }

  void on_decode_done(std::uint32_t tagged) {
    const bool decode_pool = (tagged & decode_flag) != 0;
    const std::uint32_t i = tagged & ~decode_flag;
    instance& in = decode_pool ? decode_[i] : prefill_[i];
    std::vector<std::uint32_t> finished;
    for (std::uint32_t r : in.stepping) {
      ++out_[r].output_tokens;
      st_[r].tbt_sum += now_ - st_[r].last_token;
      gaps_.add(now_ - st_[r].last_token);
      ++st_[r].tbt_n;
      st_[r].last_token = now_;
      if (--st_[r].remaining == 0) finished.push_back(r);
    }
    for (std::uint32_t r : finished) {
      in.batch.erase(std::find(in.batch.begin(), in.batch.end(), r));
      finish(r);
    }
    in.stepping.clear();
    in.busy = false;
    if (decode_pool) {
      if (!in.batch.empty()) start_decode_step(in, i, true);
    } else {
      try_start(i);
    }
  }

  void finish(std::uint32_t r) {
    if (sparse_) sparse_->release(r);
    out_[r].done = now_;
    out_[r].mean_tbt = st_[r].tbt_n ? st_[r].tbt_sum / static_cast<double>(st_[r].tbt_n) : 0.0;
  }

  simulation_result summarize() {
    std::uint64_t refs = 0, hits = 0, pool_hits = 0, inflight = 0, tok = 0, tok_hits = 0;
    std::uint64_t out_tokens = 0, good = 0;
    std::vector<double> ttft, tbt, e2e, queueing;
    double first = 0, last = 0;
    std::uint64_t dram_hits = 0;
    for (std::size_t r = 0; r < out_.size(); ++r) {
      const request_outcome& o = out_[r];
      if (o.rejected) continue;  // counted in "rejected"; no latency, no goodput
      refs += o.blocks;
      hits += o.hit_blocks;
      pool_hits += o.pool_blocks;
      dram_hits += o.dram_blocks;
      inflight += o.inflight_miss_blocks;
      tok += o.input_tokens;
      tok_hits += o.hit_tokens;
      out_tokens += o.output_tokens;
      ttft.push_back(o.first_token - o.arrival);
      if (o.output_tokens > 1) tbt.push_back(o.mean_tbt);
      e2e.push_back(o.done - o.arrival);
      queueing.push_back(o.prefill_start - o.arrival);
      const bool ok = (c_.ttft_slo_s == 0 || o.first_token - o.arrival <= c_.ttft_slo_s) &&
                      (c_.tbt_slo_s == 0 || o.mean_tbt <= c_.tbt_slo_s);
      good += ok;
      if (r == 0 || o.arrival < first) first = o.arrival;
      last = std::max(last, o.done);
    }
    const double span = last - first;
    double busy = 0;
    for (const auto& in : prefill_) busy += in.busy_s;
    for (const auto& in : decode_) busy += in.busy_s;
    const double gpus = static_cast<double>(prefill_.size() + decode_.size());
    auto ratio = [](std::uint64_t a, std::uint64_t b) {
      return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
    };
    simulation_result res;
    res.summary = {
        {"requests", out_.size()},
        {"block_refs", refs},
        {"block_hits", hits},
        {"block_hit_ratio", ratio(hits, refs)},
        {"token_refs", tok},
        {"token_hits", tok_hits},
        {"token_hit_ratio", ratio(tok_hits, tok)},
        {"rejected", rejected_},
        {"pool_block_hits", pool_hits},
        {"dram_block_hits", dram_hits},
        {"local_block_hits", hits - pool_hits - dram_hits},
        {"inflight_miss_blocks", inflight},
        {"ttft_s", dist(ttft)},
        {"tbt_s", dist(tbt)},
        {"token_gap_s", gaps_.json()},
        {"e2e_s", dist(e2e)},
        {"queueing_s", dist(queueing)},
        {"span_s", span},
        {"throughput_requests_per_s",
         span > 0 ? static_cast<double>(out_.size() - rejected_) / span : 0.0},
        {"output_tokens", out_tokens},
        {"output_tokens_per_s", span > 0 ? static_cast<double>(out_tokens) / span : 0.0},
        {"goodput_requests_per_s", span > 0 ? static_cast<double>(good) / span : 0.0},
        {"gpu_busy_fraction", span > 0 && gpus > 0 ? busy / (span * gpus) : 0.0},
        {"prefill_flops_saved", saved_flops_},
        // Instance-seconds x GPUs per instance: the GPU-seconds an operator pays for.
        {"prefill_instance_s_saved", saved_flops_ / flops_per_s_},
        {"prefill_gpu_s_saved", saved_flops_ / flops_per_s_ * c_.gpus_per_instance},
        {"bytes", {{"dram_read", static_cast<double>(dram_read_blocks_) * block_bytes_},
                   {"pool_read", static_cast<double>(pool_read_blocks_) * block_bytes_},
                   {"pool_write", static_cast<double>(pool_write_blocks_) * block_bytes_},
                   {"prefill_to_decode", pd_bytes_}}}};
    if (c_.sparse.enabled) {
      for (std::uint32_t r = 0; r < st_.size(); ++r) sparse_->release(r);
      const auto& k = sparse_->totals();
      res.summary["sparse"] = {
          {"steps", k.steps},
          {"batch_steps", sparse_batch_steps_},
          {"selections", k.selections},
          {"hits", k.hits},
          {"recalls", k.recalls},
          {"recall_bytes", static_cast<double>(k.recalls) * page_bytes_},
          {"prefetches_issued", k.prefetches_issued},
          {"prefetch_hits", k.prefetch_hits},
          {"wasted_prefetches", k.wasted_prefetches},
          {"prefetches_dropped", k.prefetches_dropped},
          {"prefetch_bytes", static_cast<double>(k.prefetches_issued) * page_bytes_},
          {"evictions", k.evictions},
          {"stalled_steps", stalled_steps_},
          {"stall_s", stall_s_},
          {"mean_stall_per_stalled_step_s",
           stalled_steps_ ? stall_s_ / static_cast<double>(stalled_steps_) : 0.0},
          {"resident_pages",
           {{"mean",
             k.steps ? static_cast<double>(sparse_->resident_sum()) / static_cast<double>(k.steps)
                     : 0.0},
            {"max", sparse_->resident_max()}}},
          {"over_budget_steps", k.over_budget_steps},
          {"decode_kv_read_bytes", decode_kv_read_bytes_}};
    }
    res.requests = std::move(out_);
    return res;
  }

  static constexpr std::uint32_t decode_flag = 1u << 31;
  const kvtk::prefix::prefix_trace_view& t_;
  const cluster_config& c_;
  std::mt19937_64 rng_;
  router_kind router_ = router_kind::round_robin;    // c_.router, parsed once
  std::vector<double> route_cost_, route_weight_;     // one entry per prefill instance
  std::vector<request_outcome> out_;
  std::vector<request_state> st_;
  std::vector<instance> prefill_, decode_;
  std::unique_ptr<any_cache> pool_;
  std::unordered_map<kvtk::block_key, std::uint32_t> pool_in_flight_;
  gap_histogram gaps_;
  std::priority_queue<event, std::vector<event>, std::greater<>> events_;
  kvtk::prefix::partial_block p_ = kvtk::prefix::partial_block::cache;
  double now_ = 0, block_bytes_ = 0, flops_per_s_ = 1, saved_flops_ = 0, pd_bytes_ = 0;
  std::uint64_t seq_ = 0, rr_ = 0, pool_read_blocks_ = 0, pool_write_blocks_ = 0;
  std::uint64_t dram_read_blocks_ = 0, rejected_ = 0;
  std::uint32_t bt_ = 1;
  // Sparse attention: totals of released managers, and the batch-level stall accounting.
  std::unique_ptr<sparse_decoder> sparse_;  // null for dense decode
  double page_bytes_ = 0, stall_s_ = 0, decode_kv_read_bytes_ = 0;
  std::uint64_t sparse_batch_steps_ = 0, stalled_steps_ = 0;
};

}  // namespace

simulation_result simulate(const kvtk::prefix::prefix_trace_view& trace, const cluster_config& cfg) {
  cluster c(trace, cfg);
  return c.run();
}

}  // namespace kvtk::sim::des
