#include "des/sparse_decode.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <variant>

#include "kvtk/detail/engaged_variant.hpp"
#include "kvtk/sparse/pattern_gen.hpp"

namespace kvtk::sim::des {
namespace {

template <class List>
struct manager_variant_of;
template <class... Ss>
struct manager_variant_of<kvtk::sparse::scorer_list<Ss...>> {
  using type = std::variant<std::monostate, kvtk::sparse::offload_recall_manager<Ss>...>;
};
using any_manager = manager_variant_of<kvtk::sparse::all_scorers>::type;

}  // namespace

// One decoding request's sparse-attention state: its residency manager, its selection source
// (a generator, or recorded selections) and, when it prefetches, the selections of this step and
// the next (a generator's spans last only until its next call, so both are copied).
struct sparse_request {
  any_manager manager;
  std::unique_ptr<kvtk::sparse::pattern_generator> gen;  // null when replaying records
  const recorded_selection* recorded = nullptr;
  std::size_t record = 0;  // the record in use (recorded)
  std::vector<std::uint32_t> cur_blocks, next_blocks, predicted;
  std::vector<float> cur_weights, next_weights;
  bool has_next = false;
  kvtk::sparse::splitmix64 rng{0};  // the predictor's (unused at accuracy 1)

  template <class F>
  decltype(auto) with_manager(F&& f) {
    return kvtk::detail::visit_engaged(manager, f);  // emplaced when the state is created
  }
  // The last record at or before step k (the first one before it), from index i on.
  std::size_t record_at(std::uint64_t k, std::size_t i) const {
    const auto& steps = recorded->step;
    while (i + 1 < steps.size() && steps[i + 1] <= k) ++i;
    return i;
  }
  // The generator's next selection, copied into (blocks, weights).
  kvtk::sparse::step_selection generate_into(std::vector<std::uint32_t>& blocks,
                                             std::vector<float>& weights) {
    const auto sel = gen->next();
    blocks.assign(sel.blocks.begin(), sel.blocks.end());
    weights.assign(sel.weights.begin(), sel.weights.end());
    return {blocks, weights, sel.context_blocks};
  }
};

void sparse_decoder::validate(const sparse_config& s) {
  if (!s.enabled) return;
  if (s.pattern != "dsa" && s.pattern != "quest") {
    throw std::invalid_argument("sparse.pattern: unknown pattern '" + s.pattern + "' (dsa quest)");
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
  if (!(s.drift >= 0 && s.drift <= 1)) throw std::invalid_argument("sparse.drift must be in [0, 1]");
  if (!(s.zipf >= 0) || !std::isfinite(s.zipf)) {
    throw std::invalid_argument("sparse.zipf must be finite and >= 0");
  }
}

sparse_decoder::sparse_decoder(const cluster_config& c, std::size_t requests,
                               const kvtk::move::timing_model& host_link)
    : s_(c.sparse), state_(requests) {
  link_.link = host_link;
  link_.page_bytes = static_cast<double>(c.model.kv_bytes_per_token) * c.sparse.page_tokens;
  link_.layer_ahead = c.sparse.prefetch_layer_ahead;
  link_.layers = std::max<std::uint32_t>(1, c.model.layers);
}

sparse_decoder::~sparse_decoder() = default;

// The request's state, created at its first decode step.
sparse_request& sparse_decoder::state(std::uint32_t r, std::uint64_t tokens,
                                      std::uint64_t remaining) {
  auto& sp = state_[r];
  if (sp) return *sp;
  const auto context = static_cast<std::uint32_t>(
      std::max<std::uint64_t>(1, (tokens + s_.page_tokens - 1) / s_.page_tokens));
  const std::uint64_t seed =
      kvtk::sparse::splitmix64{s_.seed ^ (0xD1B54A32D192ED03ull * (r + 1))}.next();
  kvtk::sparse::pattern_config pc = s_.pattern == "quest"
                                        ? kvtk::sparse::pattern_config::quest(context, 2, seed)
                                        : kvtk::sparse::pattern_config::dsa(context, seed);
  pc.block_tokens = s_.page_tokens;
  pc.grow = true;
  const std::uint32_t guarded = pc.sinks + pc.recent_window;
  pc.heavy_blocks = s_.top_k_pages > guarded ? s_.top_k_pages - guarded : 0;
  pc.persistence = s_.persistence;
  pc.drift = s_.drift;
  pc.zipf_exponent = s_.zipf;
  kvtk::sparse::residency_config rc;
  rc.max_blocks = context + static_cast<std::uint32_t>(remaining / s_.page_tokens) + 2;
  rc.budget = s_.budget;
  rc.block_tokens = s_.page_tokens;
  rc.sinks = pc.sinks;
  rc.recent_window = pc.recent_window;
  rc.prefetch = s_.prefetch_next_step ? kvtk::sparse::prefetch_mode::next_step
                                      : kvtk::sparse::prefetch_mode::none;
  sp = std::make_unique<sparse_request>();
  const recorded_selection* rec =
      s_.recorded && r < s_.recorded->size() && !(*s_.recorded)[r].step.empty()
          ? &(*s_.recorded)[r]
          : nullptr;
  if (rec != nullptr) {
    sp->recorded = rec;
    rc.max_blocks = std::max(rc.max_blocks, rec->pattern.max_context() + 1);
  } else {
    sp->gen = std::make_unique<kvtk::sparse::pattern_generator>(pc);
  }
  kvtk::sparse::all_scorers::visit(s_.scorer, [&]<class S>() {
    sp->manager.template emplace<kvtk::sparse::offload_recall_manager<S>>(rc);
  });
  sp->with_manager([&](auto& m) { kvtk::sparse::grow_context(m, context); });  // the prefill wrote every prompt page to HBM
  return *sp;
}

sparse_decoder::step_result sparse_decoder::step(std::uint32_t r, std::uint64_t tokens,
                                                 std::uint64_t remaining, std::uint64_t index) {
  sparse_request& sp = state(r, tokens, remaining);
  const std::uint64_t k = index;
  const bool prefetch = s_.prefetch_next_step && remaining > 1;
  kvtk::sparse::step_selection sel;
  if (sp.recorded != nullptr) {
    sp.record = sp.record_at(k, sp.record);
    sel = sp.recorded->pattern.step(sp.record);
    // The context is at least the request's tokens so far, in pages.
    const auto context = static_cast<std::uint32_t>((tokens + s_.page_tokens - 1) / s_.page_tokens);
    sel.context_blocks = std::max(sel.context_blocks, context);
  } else if (sp.has_next) {
    std::swap(sp.cur_blocks, sp.next_blocks);
    std::swap(sp.cur_weights, sp.next_weights);
    sel = {sp.cur_blocks, sp.cur_weights, sp.gen->context_blocks()};
    sp.has_next = false;
  } else if (prefetch) {
    sel = sp.generate_into(sp.cur_blocks, sp.cur_weights);
  } else {
    sel = sp.gen->next();
  }
  // The next step's selection: the record step k+1 will use, or generated one step ahead.
  kvtk::sparse::next_selection next;
  if (prefetch && sp.recorded != nullptr) {
    next.selection = sp.recorded->pattern.step(sp.record_at(k + 1, sp.record));
  } else if (prefetch) {
    next.selection = sp.generate_into(sp.next_blocks, sp.next_weights);
    sp.has_next = true;
  }
  step_result out;
  sp.with_manager([&](auto& m) {
    const auto pages =
        kvtk::sparse::decode_step(m, sel, prefetch ? &next : nullptr, sp.rng, sp.predicted);
    out = {pages.selected, static_cast<std::uint32_t>(pages.recalls), pages.prefetched};
    const std::uint32_t resident = m.resident_blocks();
    resident_sum_ += resident;
    resident_max_ = std::max(resident_max_, resident);
  });
  return out;
}

void sparse_decoder::release(std::uint32_t r) {
  auto& sp = state_[r];
  if (!sp) return;
  sp->with_manager([&](auto& m) {
    totals_ += m.counters();  // every field (residency_counters::operator+=)
  });
  sp.reset();
}

double sparse_decoder::batch_step(kvtk::sparse::decode_clock& clock, std::uint64_t recalls,
                                  std::uint64_t prefetched, double compute_s,
                                  double kv_bytes) noexcept {
  decode_kv_read_bytes_ += kv_bytes;
  ++batch_steps_;
  const double stall = clock.step(link_, recalls, prefetched, compute_s).stall_s;
  if (stall > 0) {
    ++stalled_steps_;
    stall_s_ += stall;
  }
  return stall;
}

nlohmann::json sparse_decoder::summary() {
  for (std::uint32_t r = 0; r < state_.size(); ++r) release(r);
  const auto& k = totals_;
  return {
      {"steps", k.steps},
      {"batch_steps", batch_steps_},
      {"selections", k.selections},
      {"hits", k.hits},
      {"recalls", k.recalls},
      {"recall_bytes", static_cast<double>(k.recalls) * link_.page_bytes},
      {"prefetches_issued", k.prefetches_issued},
      {"prefetch_hits", k.prefetch_hits},
      {"wasted_prefetches", k.wasted_prefetches},
      {"prefetches_dropped", k.prefetches_dropped},
      {"prefetch_bytes", static_cast<double>(k.prefetches_issued) * link_.page_bytes},
      {"evictions", k.evictions},
      {"stalled_steps", stalled_steps_},
      {"stall_s", stall_s_},
      {"mean_stall_per_stalled_step_s",
       stalled_steps_ ? stall_s_ / static_cast<double>(stalled_steps_) : 0.0},
      {"resident_pages",
       {{"mean", k.steps ? static_cast<double>(resident_sum_) / static_cast<double>(k.steps) : 0.0},
        {"max", resident_max_}}},
      {"over_budget_steps", k.over_budget_steps},
      {"decode_kv_read_bytes", decode_kv_read_bytes_}};
}

}  // namespace kvtk::sim::des
