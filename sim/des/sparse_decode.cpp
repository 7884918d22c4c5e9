#include "des/sparse_decode.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <variant>

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

// One decoding request's sparse-attention state: its residency manager, its selection pattern,
// and (prefetch next-step) the next step's selection, generated one step ahead.
struct sparse_request {
  any_manager manager;
  std::unique_ptr<kvtk::sparse::pattern_generator> gen;  // null when replaying records
  const recorded_selection* recorded = nullptr;
  std::size_t record = 0;  // the record in use (recorded)
  std::uint64_t decode_steps = 0;
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

sparse_decoder::sparse_decoder(const sparse_config& s, std::size_t requests)
    : s_(s), state_(requests) {}

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
  sp->grow_to(context);  // the prefill wrote every prompt page to HBM
  return *sp;
}

sparse_decoder::step_result sparse_decoder::step(std::uint32_t r, std::uint64_t tokens,
                                                 std::uint64_t remaining) {
  sparse_request& sp = state(r, tokens, remaining);
  step_result out;
  std::span<const std::uint32_t> blocks;
  std::span<const float> weights;
  const std::uint64_t k = sp.decode_steps++;
  if (sp.recorded != nullptr) {
    // The last record at or before step k (the first one before it).
    const auto& steps = sp.recorded->step;
    while (sp.record + 1 < steps.size() && steps[sp.record + 1] <= k) ++sp.record;
    const auto sel = sp.recorded->pattern.step(sp.record);
    blocks = sel.blocks;
    weights = sel.weights;
    const auto context = static_cast<std::uint32_t>((tokens + s_.page_tokens - 1) / s_.page_tokens);
    sp.grow_to(std::max(sel.context_blocks, context));
  } else if (sp.has_next) {
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
    const auto& c = m.counters();
    out.recalls = c.last_step_recalls;
    resident_sum_ += c.resident_blocks;
    resident_max_ = std::max(resident_max_, c.resident_blocks);
  });
  out.pages = blocks.size();
  if (!s_.prefetch_next_step || remaining <= 1) return out;
  // The next step's selection: the record step k+1 will use, or generated one step ahead.
  std::span<const std::uint32_t> next;
  if (sp.recorded != nullptr) {
    const auto& steps = sp.recorded->step;
    std::size_t i = sp.record;
    while (i + 1 < steps.size() && steps[i + 1] <= k + 1) ++i;
    const auto nsel = sp.recorded->pattern.step(i);
    sp.grow_to(nsel.context_blocks);
    next = nsel.blocks;
  } else {
    const auto sel = sp.gen->next();
    sp.next_blocks.assign(sel.blocks.begin(), sel.blocks.end());
    sp.next_weights.assign(sel.weights.begin(), sel.weights.end());
    sp.grow_to(sel.context_blocks);
    sp.has_next = true;
    next = sp.next_blocks;
  }
  sp.with_manager([&](auto& m) { out.prefetched = m.prefetch(next); });
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

}  // namespace kvtk::sim::des
