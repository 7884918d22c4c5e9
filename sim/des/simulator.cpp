#include "des/simulator.hpp"

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

template <class List>
struct manager_variant_of;
template <class... Ss>
struct manager_variant_of<kvtk::sparse::scorer_list<Ss...>> {
  using type = std::variant<std::monostate, kvtk::sparse::offload_recall_manager<Ss>...>;
};
using any_manager = manager_variant_of<kvtk::sparse::all_scorers>::type;

// One decoding request's sparse-attention state: its residency manager, its selection pattern,
// and (prefetch next-step) the next step's selection, generated one step ahead.
struct sparse_request {
  any_manager manager;
  std::unique_ptr<kvtk::sparse::pattern_generator> gen;
  std::vector<std::uint32_t> next_blocks;
  std::vector<float> next_weights;
  bool has_next = false;

  template <class F>
  decltype(auto) with_manager(F&& f) {
    return std::visit(
        [&](auto& m) -> decltype(auto) {
          if constexpr (std::is_same_v<std::decay_t<decltype(m)>, std::monostate>) {
            throw std::logic_error("empty residency manager");
            return f(std::get<1>(manager));
          } else {
            return f(m);
          }
        },
        manager);
  }
  // Appends pages until the manager's context is n pages (decode wrote a new page).
  void grow_to(std::uint32_t n) {
    with_manager([&](auto& m) {
      while (m.context_blocks() < n && m.append_block() != kvtk::sparse::no_block) {
      }
    });
  }
};

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
  std::unique_ptr<sparse_request> sparse;  // while decoding with sparse attention
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

class cluster {
 public:
  cluster(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c)
      : t_(t), c_(c), rng_(c.seed), out_(t.requests()), st_(t.requests()) {
    validate();
    bt_ = t.block_tokens;
    block_bytes_ = static_cast<double>(c.model.kv_bytes_per_token) * bt_;
    page_bytes_ = static_cast<double>(c.model.kv_bytes_per_token) * c.sparse.page_tokens;
    flops_per_s_ = c.gpu.tflops * 1e12 * c.gpu.efficiency * c.gpus_per_instance;
    p_ = c.cache_partial_block ? kvtk::prefix::partial_block::cache
                               : kvtk::prefix::partial_block::skip;
    prefill_.resize(c.prefill_instances);
    for (auto& in : prefill_) {
      if (c.local_cache_blocks > 0) in.cache = make_cache(c.local_policy, c.local_cache_blocks);
      if (c.dram_blocks > 0) in.dram = make_cache("lru", c.dram_blocks);
    }
    decode_.resize(c.decode_instances);
    if (c.pool_blocks > 0) pool_ = make_cache("lru", c.pool_blocks);
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
    static const char* routers[] = {"random", "round-robin", "least-loaded", "cache-aware",
                                    "conductor"};
    if (std::find(std::begin(routers), std::end(routers), c_.router) == std::end(routers)) {
      throw std::invalid_argument("router: unknown router '" + c_.router +
                                  "' (random round-robin least-loaded cache-aware conductor)");
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
    const sparse_config& s = c_.sparse;
    if (!s.enabled) return;
    if (s.pattern != "dsa" && s.pattern != "quest") {
      throw std::invalid_argument("sparse.pattern: unknown pattern '" + s.pattern +
                                  "' (dsa quest)");
    }
    if (kvtk::sparse::all_scorers::index_of(s.scorer) == kvtk::sparse::all_scorers::npos) {
      throw std::invalid_argument("sparse.scorer: unknown scorer '" + s.scorer + "'");
    }
    if (s.page_tokens == 0) throw std::invalid_argument("sparse.page_tokens must be >= 1");
    if (s.top_k_pages == 0) throw std::invalid_argument("sparse.top_k_pages must be >= 1");
    const bool fraction = s.budget.kind == kvtk::sparse::hbm_budget::unit::context_fraction;
    if (!(s.budget.amount > 0) || (fraction && s.budget.amount > 1) ||
        !std::isfinite(s.budget.amount)) {
      throw std::invalid_argument("sparse.budget must be > 0 (a fraction at most 100%)");
    }
    if (!(s.persistence >= 0 && s.persistence <= 1)) {
      throw std::invalid_argument("sparse.persistence must be in [0, 1]");
    }
    if (!(s.drift >= 0 && s.drift <= 1)) {
      throw std::invalid_argument("sparse.drift must be in [0, 1]");
    }
    if (!(s.zipf >= 0) || !std::isfinite(s.zipf)) {
      throw std::invalid_argument("sparse.zipf must be finite and >= 0");
    }
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
           prefill_s(m, t_.input_length[r]);
  }

  std::uint32_t route(std::uint32_t r) {
    const std::size_t n = prefill_.size();
    if (c_.router == "random") return static_cast<std::uint32_t>(rng_() % n);
    if (c_.router == "round-robin") return static_cast<std::uint32_t>(rr_++ % n);
    const auto b = t_.cacheable(r, p_);
    std::vector<double> cost(n);
    for (std::size_t i = 0; i < n; ++i) {
      instance& in = prefill_[i];
      if (c_.router == "least-loaded") {
        cost[i] = static_cast<double>(in.queued_tokens);
      } else if (c_.router == "cache-aware") {
        std::uint64_t overlap = 0;
        while (overlap < b.size() && local_has(in, b[overlap])) ++overlap;
        const double prefill_blocks = static_cast<double>(b.size() - overlap) +
                                      static_cast<double>(in.queued_tokens) / bt_;
        cost[i] = c_.router_prefill_weight * prefill_blocks + static_cast<double>(in.batch.size());
      } else {  // conductor: predicted TTFT
        cost[i] = predicted_ttft(static_cast<std::uint32_t>(i), r);
      }
    }
    if (c_.router == "cache-aware" && c_.router_temperature > 0) {
      const double lo = *std::min_element(cost.begin(), cost.end());
      std::vector<double> w(n);
      for (std::size_t i = 0; i < n; ++i) w[i] = std::exp(-(cost[i] - lo) / c_.router_temperature);
      std::discrete_distribution<std::uint32_t> pick(w.begin(), w.end());
      return pick(rng_);
    }
    return static_cast<std::uint32_t>(std::min_element(cost.begin(), cost.end()) - cost.begin());
  }

  void on_arrival(std::uint32_t r) {
    out_[r].arrival = now_;
    out_[r].input_tokens = t_.input_length[r];
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
    st_[r].predicted_prefill_s = compute_s(0, t_.input_length[r]);
    in.queued_prefill_s += st_[r].predicted_prefill_s;
    in.queued_tokens += t_.input_length[r];
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
    const std::uint64_t L = t_.input_length[r];
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
    const std::uint64_t L = t_.input_length[r];
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
    const std::uint64_t L = t_.input_length[r];
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
    if (in.prefilling >= 0 && in.prefill_pos < t_.input_length[r]) {
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
      const double bytes = static_cast<double>(t_.input_length[r]) * c_.model.kv_bytes_per_token;
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

  // The request's sparse state, created at its first decode step.
  sparse_request& sparse_state(std::uint32_t r) {
    auto& sp = st_[r].sparse;
    if (sp) return *sp;
    const sparse_config& s = c_.sparse;
    const std::uint64_t tokens = t_.input_length[r] + out_[r].output_tokens;
    const auto context = static_cast<std::uint32_t>(
        std::max<std::uint64_t>(1, (tokens + s.page_tokens - 1) / s.page_tokens));
    const std::uint64_t seed =
        kvtk::sparse::splitmix64{s.seed ^ (0xD1B54A32D192ED03ull * (r + 1))}.next();
    kvtk::sparse::pattern_config pc = s.pattern == "quest"
                                          ? kvtk::sparse::pattern_config::quest(context, 2, seed)
                                          : kvtk::sparse::pattern_config::dsa(context, seed);
    pc.block_tokens = s.page_tokens;
    pc.grow = true;
    const std::uint32_t guarded = pc.sinks + pc.recent_window;
    pc.heavy_blocks = s.top_k_pages > guarded ? s.top_k_pages - guarded : 0;
    pc.persistence = s.persistence;
    pc.drift = s.drift;
    pc.zipf_exponent = s.zipf;
    kvtk::sparse::residency_config rc;
    rc.max_blocks = context + static_cast<std::uint32_t>(st_[r].remaining / s.page_tokens) + 2;
    rc.budget = s.budget;
    rc.block_tokens = s.page_tokens;
    rc.sinks = pc.sinks;
    rc.recent_window = pc.recent_window;
    rc.prefetch = s.prefetch_next_step ? kvtk::sparse::prefetch_mode::next_step
                                       : kvtk::sparse::prefetch_mode::none;
    sp = std::make_unique<sparse_request>();
    sp->gen = std::make_unique<kvtk::sparse::pattern_generator>(pc);
    kvtk::sparse::all_scorers::visit(s.scorer, [&]<class S>() {
      sp->manager.template emplace<kvtk::sparse::offload_recall_manager<S>>(rc);
    });
    sp->grow_to(context);  // the prefill wrote every prompt page to HBM
    return *sp;
  }

  // One sparse decode step of request r: selection, residency step, prefetch of the next step.
  // Returns the pages the step reads; adds recalls and prefetches issued.
  std::uint64_t sparse_step(std::uint32_t r, std::uint64_t& recalls, std::uint64_t& prefetched) {
    sparse_request& sp = sparse_state(r);
    std::span<const std::uint32_t> blocks;
    std::span<const float> weights;
    if (sp.has_next) {
      blocks = sp.next_blocks;
      weights = sp.next_weights;
      sp.has_next = false;
    } else {
      const auto sel = sp.gen->next();
      blocks = sel.blocks;
      weights = sel.weights;
      sp.grow_to(sel.context_blocks);
    }
    sp.with_manager([&](auto& m) {
      m.step(blocks, weights);
      const auto& k = m.counters();
      recalls += k.last_step_recalls;
      out_[static_cast<std::size_t>(r)].recalls += k.last_step_recalls;
      resident_sum_ += k.resident_blocks;
      resident_max_ = std::max(resident_max_, k.resident_blocks);
    });
    const std::uint64_t pages = blocks.size();
    if (c_.sparse.prefetch_next_step && st_[r].remaining > 1) {
      const auto sel = sp.gen->next();
      sp.next_blocks.assign(sel.blocks.begin(), sel.blocks.end());
      sp.next_weights.assign(sel.weights.begin(), sel.weights.end());
      sp.grow_to(sel.context_blocks);
      sp.has_next = true;
      sp.with_manager([&](auto& m) { prefetched += m.prefetch(sp.next_blocks); });
    }
    return pages;
  }

  // Adds a finished request's manager counters to the totals and releases its state.
  void release_sparse(std::uint32_t r) {
    auto& sp = st_[r].sparse;
    if (!sp) return;
    sp->with_manager([&](auto& m) {
      const auto& k = m.counters();
      sparse_totals_.steps += k.steps;
      sparse_totals_.selections += k.selections;
      sparse_totals_.hits += k.hits;
      sparse_totals_.recalls += k.recalls;
      sparse_totals_.prefetches_issued += k.prefetches_issued;
      sparse_totals_.prefetch_hits += k.prefetch_hits;
      sparse_totals_.wasted_prefetches += k.wasted_prefetches;
      sparse_totals_.prefetches_dropped += k.prefetches_dropped;
      sparse_totals_.evictions += k.evictions;
      sparse_totals_.over_budget_steps += k.over_budget_steps;
    });
    sp.reset();
  }

  void start_decode_step(instance& in, std::uint32_t i, bool decode_pool) {
    in.stepping.assign(in.batch.begin(),
                       in.batch.begin() + std::min<std::size_t>(in.batch.size(), c_.max_batch));
    double kv_bytes = 0;
    std::uint64_t recalls = 0, prefetched = 0;
    for (std::uint32_t r : in.stepping) {
      if (c_.sparse.enabled) {
        kv_bytes += static_cast<double>(sparse_step(r, recalls, prefetched)) * page_bytes_;
      } else {
        kv_bytes += static_cast<double>(t_.input_length[r] + out_[r].output_tokens) *
                    c_.model.kv_bytes_per_token;
      }
    }
    double dur = (2.0 * c_.model.active_params + kv_bytes) /
                 (c_.gpu.hbm_bytes_per_s * c_.gpu.efficiency * c_.gpus_per_instance) *
                 c_.time_scale;
    if (c_.sparse.enabled) {
      decode_kv_read_bytes_ += kv_bytes;
      ++sparse_batch_steps_;
      const double stall = link_s(recalls) + in.prefetch_excess_s;
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
    release_sparse(r);
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
        {"prefill_gpu_s_saved", saved_flops_ / flops_per_s_},
        {"bytes", {{"dram_read", static_cast<double>(dram_read_blocks_) * block_bytes_},
                   {"pool_read", static_cast<double>(pool_read_blocks_) * block_bytes_},
                   {"pool_write", static_cast<double>(pool_write_blocks_) * block_bytes_},
                   {"prefill_to_decode", pd_bytes_}}}};
    if (c_.sparse.enabled) {
      for (std::uint32_t r = 0; r < st_.size(); ++r) release_sparse(r);
      const auto& k = sparse_totals_;
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
             k.steps ? static_cast<double>(resident_sum_) / static_cast<double>(k.steps) : 0.0},
            {"max", resident_max_}}},
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
  kvtk::sparse::residency_counters sparse_totals_{};
  double page_bytes_ = 0, stall_s_ = 0, decode_kv_read_bytes_ = 0;
  std::uint64_t sparse_batch_steps_ = 0, stalled_steps_ = 0, resident_sum_ = 0;
  std::uint32_t resident_max_ = 0;
};

}  // namespace

simulation_result simulate(const kvtk::prefix::prefix_trace_view& trace, const cluster_config& cfg) {
  cluster c(trace, cfg);
  return c.run();
}

}  // namespace kvtk::sim::des
