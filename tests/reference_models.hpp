// tests/reference_models.hpp — simple, obviously-correct models of each policy, written from the
// papers with standard containers and linear scans. Unit sizes, accesses only.
// Each model: access(key, hint) -> {hit, victims evicted by this access, in order}.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <kvtk/kvtk.hpp>
#include <list>
#include <map>
#include <set>
#include <vector>

namespace kvtk::test {

using model_key = kvtk::block_key;

struct model_step {
  bool hit = false;
  std::vector<model_key> victims;
};

template <class T>
bool contains(const std::list<T>& l, const T& v) {
  return std::find(l.begin(), l.end(), v) != l.end();
}
template <class T>
bool contains(const std::deque<T>& l, const T& v) {
  return std::find(l.begin(), l.end(), v) != l.end();
}

struct lru_model {
  explicit lru_model(std::size_t cap) : c(cap) {}
  std::size_t c;
  std::list<model_key> l;  // front = LRU
  model_step access(model_key k, const access_hint&) {
    model_step s;
    if (contains(l, k)) {
      l.remove(k);
      l.push_back(k);
      s.hit = true;
      return s;
    }
    if (l.size() == c) {
      s.victims.push_back(l.front());
      l.pop_front();
    }
    l.push_back(k);
    return s;
  }
};

struct fifo_model {
  explicit fifo_model(std::size_t cap) : c(cap) {}
  std::size_t c;
  std::deque<model_key> q;
  model_step access(model_key k, const access_hint&) {
    model_step s;
    if (contains(q, k)) {
      s.hit = true;
      return s;
    }
    if (q.size() == c) {
      s.victims.push_back(q.front());
      q.pop_front();
    }
    q.push_back(k);
    return s;
  }
};

// Circular buffer of frames with a hand (the textbook picture, not a list with reinsertion).
struct clock_model {
  explicit clock_model(std::size_t cap) : c(cap) {}
  std::size_t c;
  unsigned max_count = 1;
  std::vector<model_key> frame;
  std::vector<unsigned> ref;
  std::size_t hand = 0;
  model_step access(model_key k, const access_hint&) {
    model_step s;
    for (std::size_t i = 0; i < frame.size(); ++i) {
      if (frame[i] == k) {
        ref[i] = std::min(ref[i] + 1, max_count);
        s.hit = true;
        return s;
      }
    }
    if (frame.size() < c) {
      frame.push_back(k);
      ref.push_back(0);
      return s;
    }
    while (ref[hand] > 0) {
      --ref[hand];
      hand = (hand + 1) % c;
    }
    s.victims.push_back(frame[hand]);
    frame[hand] = k;
    ref[hand] = 0;
    hand = (hand + 1) % c;
    return s;
  }
};

struct sieve_model {
  explicit sieve_model(std::size_t cap) : c(cap) {}
  std::size_t c;
  std::vector<model_key> q;  // index 0 = oldest
  std::vector<bool> visited;
  std::ptrdiff_t hand = -1;  // index of the next node to examine; -1 = oldest
  model_step access(model_key k, const access_hint&) {
    model_step s;
    for (std::size_t i = 0; i < q.size(); ++i) {
      if (q[i] == k) {
        visited[i] = true;
        s.hit = true;
        return s;
      }
    }
    if (q.size() == c) {
      std::size_t i = hand < 0 ? 0 : static_cast<std::size_t>(hand);
      while (visited[i]) {
        visited[i] = false;
        i = (i + 1) % q.size();
      }
      s.victims.push_back(q[i]);
      q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
      visited.erase(visited.begin() + static_cast<std::ptrdiff_t>(i));
      hand = i < q.size() ? static_cast<std::ptrdiff_t>(i) : -1;
    }
    q.push_back(k);
    visited.push_back(false);
    return s;
  }
};

// Victim = min (frequency, last access time).
struct lfu_model {
  explicit lfu_model(std::size_t cap) : c(cap) {}
  std::size_t c;
  struct e {
    model_key k;
    std::uint64_t freq, last;
  };
  std::vector<e> v;
  std::uint64_t clock = 0;
  model_step access(model_key k, const access_hint&) {
    model_step s;
    ++clock;
    for (auto& x : v) {
      if (x.k == k) {
        ++x.freq;
        x.last = clock;
        s.hit = true;
        return s;
      }
    }
    if (v.size() == c) {
      auto it = std::min_element(v.begin(), v.end(), [](const e& a, const e& b) {
        return a.freq != b.freq ? a.freq < b.freq : a.last < b.last;
      });
      s.victims.push_back(it->k);
      v.erase(it);
    }
    v.push_back({k, 1, clock});
    return s;
  }
};

// 2Q, the paper's "full version" pseudo-code.
struct two_q_model {
  explicit two_q_model(std::size_t cap) : c(cap), kin(cap * 25 / 100), kout(cap * 50 / 100) {}
  std::size_t c, kin, kout;
  std::deque<model_key> a1in, a1out;
  std::list<model_key> am;
  model_step access(model_key k, const access_hint&) {
    model_step s;
    if (contains(am, k)) {
      am.remove(k);
      am.push_back(k);
      s.hit = true;
      return s;
    }
    if (contains(a1in, k)) {
      s.hit = true;
      return s;
    }
    // kvtk's reading: a readmitted key leaves A1out before space is reclaimed for it.
    const bool ghost = contains(a1out, k);
    if (ghost) a1out.erase(std::find(a1out.begin(), a1out.end(), k));
    if (a1in.size() + am.size() == c) {  // reclaimfor(k)
      if (a1in.size() > kin || am.empty()) {
        model_key y = a1in.front();
        a1in.pop_front();
        a1out.push_back(y);
        if (a1out.size() > kout) a1out.pop_front();
        s.victims.push_back(y);
      } else {
        s.victims.push_back(am.front());
        am.pop_front();
      }
    }
    if (ghost) {
      am.push_back(k);
    } else {
      a1in.push_back(k);
    }
    return s;
  }
};

// ARC, Megiddo & Modha FAST'03 Fig. 4, line by line.
struct arc_model {
  explicit arc_model(std::size_t cap) : c(cap) {}
  std::size_t c;
  double p = 0;
  std::list<model_key> t1, t2, b1, b2;  // front = LRU
  model_step step;
  void replace(bool x_in_b2) {
    if (!t1.empty() &&
        ((x_in_b2 && static_cast<double>(t1.size()) == p) || static_cast<double>(t1.size()) > p)) {
      step.victims.push_back(t1.front());
      b1.push_back(t1.front());
      t1.pop_front();
    } else {
      step.victims.push_back(t2.front());
      b2.push_back(t2.front());
      t2.pop_front();
    }
  }
  model_step access(model_key x, const access_hint&) {
    step = {};
    if (contains(t1, x) || contains(t2, x)) {
      t1.remove(x);
      t2.remove(x);
      t2.push_back(x);
      step.hit = true;
      return step;
    }
    const double n1 = static_cast<double>(b1.size()), n2 = static_cast<double>(b2.size());
    if (contains(b1, x)) {
      p = std::min(static_cast<double>(c), p + std::max(n2 / n1, 1.0));
      replace(false);
      b1.remove(x);
      t2.push_back(x);
    } else if (contains(b2, x)) {
      p = std::max(0.0, p - std::max(n1 / n2, 1.0));
      replace(true);
      b2.remove(x);
      t2.push_back(x);
    } else {
      if (t1.size() + b1.size() == c) {
        if (t1.size() < c) {
          b1.pop_front();
          replace(false);
        } else {
          step.victims.push_back(t1.front());
          t1.pop_front();
        }
      } else {
        const std::size_t total = t1.size() + t2.size() + b1.size() + b2.size();
        if (total >= c) {
          if (total == 2 * c) b2.pop_front();
          replace(false);
        }
      }
      t1.push_back(x);
    }
    return step;
  }
};

// S3-FIFO, the paper's Algorithm 1 with kvtk's documented defaults.
struct s3fifo_model {
  explicit s3fifo_model(std::size_t cap)
      : c(cap),
        small_target(std::max<std::size_t>(cap / 10, 1)),
        ghost_cap(std::max<std::size_t>(cap * 90 / 100, 1)) {}
  std::size_t c, small_target, ghost_cap;
  unsigned threshold = 1;
  std::deque<model_key> S, M, G;
  std::map<model_key, unsigned> freq;
  model_step step;
  void evict_m() {
    for (;;) {
      model_key t = M.front();
      M.pop_front();
      if (freq[t] > 0) {
        --freq[t];
        M.push_back(t);
      } else {
        step.victims.push_back(t);
        freq.erase(t);
        return;
      }
    }
  }
  void evict() {
    for (;;) {
      if (!S.empty() && (S.size() >= small_target || M.empty())) {
        model_key t = S.front();
        S.pop_front();
        if (freq[t] >= threshold) {
          freq[t] = 0;
          M.push_back(t);
          continue;
        }
        step.victims.push_back(t);
        freq.erase(t);
        G.push_back(t);
        if (G.size() > ghost_cap) G.pop_front();
        return;
      }
      evict_m();
      return;
    }
  }
  model_step access(model_key k, const access_hint&) {
    step = {};
    if (contains(S, k) || contains(M, k)) {
      freq[k] = std::min(freq[k] + 1, 3u);
      step.hit = true;
      return step;
    }
    const bool ghost = contains(G, k);
    if (ghost) G.erase(std::find(G.begin(), G.end(), k));
    if (S.size() + M.size() == c) evict();
    freq[k] = 0;
    (ghost ? M : S).push_back(k);
    return step;
  }
};

// W-TinyLFU (Caffeine's structure) with the same frequency sketch as the policy.
// GreedyDual-Size-Frequency over depth-priced blocks (cost_aware with its default config):
// victim = min (H, last access), H = L + freq * value(depth at insertion), L = H(victim).
struct cost_aware_model {
  explicit cost_aware_model(std::size_t cap) : c(cap) {}
  std::size_t c;
  struct e {
    model_key k;
    double h, value;
    std::uint64_t freq, last;
  };
  std::vector<e> v;
  double inflation = 0;
  std::uint64_t clock = 0;
  static double value_at(std::uint32_t depth) {
    const kvtk::cost_aware::config cfg{};
    const double b = cfg.block_tokens;
    const double first = static_cast<double>(depth) * b;
    const double positions = b * first + b * (b - 1) / 2;
    const double recompute = b * cfg.linear_s_per_token + cfg.attention_s_per_token_pair * positions;
    const double saved = recompute - cfg.fetch_s;
    return saved > 0 ? saved / cfg.block_bytes : 0.0;
  }
  model_step access(model_key k, const access_hint& hint) {
    model_step s;
    ++clock;
    for (auto& x : v) {
      if (x.k == k) {
        ++x.freq;
        x.h = inflation + static_cast<double>(x.freq) * x.value;
        x.last = clock;
        s.hit = true;
        return s;
      }
    }
    if (v.size() == c) {
      auto it = std::min_element(v.begin(), v.end(), [](const e& a, const e& b) {
        return a.h != b.h ? a.h < b.h : a.last < b.last;
      });
      s.victims.push_back(it->k);
      inflation = std::max(inflation, it->h);
      v.erase(it);
    }
    const double value = value_at(hint.depth);
    v.push_back({k, inflation + value, value, 1, clock});
    return s;
  }
};

struct w_tinylfu_model {
  std::size_t c, window_cap, protected_cap;
  kvtk::detail::frequency_sketch sketch;
  std::list<model_key> window, probation, prot;  // front = LRU
  explicit w_tinylfu_model(std::size_t cap)
      : c(cap),
        window_cap(std::max<std::size_t>(cap / 100, 1)),
        protected_cap((cap > window_cap ? cap - window_cap : 0) * 80 / 100),
        sketch(static_cast<std::uint32_t>(cap), 10 * cap, true) {}
  model_step access(model_key k, const access_hint&) {
    model_step s;
    sketch.increment(k);
    if (contains(window, k)) {
      window.remove(k);
      window.push_back(k);
      s.hit = true;
      return s;
    }
    if (contains(prot, k)) {
      prot.remove(k);
      prot.push_back(k);
      s.hit = true;
      return s;
    }
    if (contains(probation, k)) {
      probation.remove(k);
      prot.push_back(k);
      while (prot.size() > protected_cap && prot.size() > 1) {
        probation.push_back(prot.front());
        prot.pop_front();
      }
      s.hit = true;
      return s;
    }
    if (window.size() + probation.size() + prot.size() == c) {
      std::list<model_key>& main = probation.empty() ? prot : probation;
      if (window.size() >= window_cap && !window.empty() && !main.empty()) {
        model_key cand = window.front();
        model_key victim = main.front();
        if (sketch.estimate(cand) > sketch.estimate(victim)) {
          window.pop_front();
          probation.push_back(cand);
          main.remove(victim);
          s.victims.push_back(victim);
        } else {
          window.pop_front();
          s.victims.push_back(cand);
        }
      } else if (!main.empty()) {
        s.victims.push_back(main.front());
        main.pop_front();
      } else {
        s.victims.push_back(window.front());
        window.pop_front();
      }
    }
    window.push_back(k);
    while (window.size() > window_cap) {
      probation.push_back(window.front());
      window.pop_front();
    }
    return s;
  }
};

// Victim = min (priority, last access time); priority = that of the latest access.
struct priority_lru_model {
  explicit priority_lru_model(std::size_t cap) : c(cap) {}
  std::size_t c;
  struct e {
    model_key k;
    std::uint32_t prio;
    std::uint64_t last;
  };
  std::vector<e> v;
  std::uint64_t clock = 0;
  model_step access(model_key k, const access_hint& h) {
    model_step s;
    ++clock;
    const std::uint32_t prio = std::min<std::uint32_t>(h.priority, 100);
    for (auto& x : v) {
      if (x.k == k) {
        x.prio = prio;
        x.last = clock;
        s.hit = true;
        return s;
      }
    }
    if (v.size() == c) {
      auto it = std::min_element(v.begin(), v.end(), [](const e& a, const e& b) {
        return a.prio != b.prio ? a.prio < b.prio : a.last < b.last;
      });
      s.victims.push_back(it->k);
      v.erase(it);
    }
    v.push_back({k, prio, clock});
    return s;
  }
};

// Victim = furthest next use; among equals the least recently accessed.
struct belady_model {
  explicit belady_model(std::size_t cap) : c(cap) {}
  std::size_t c;
  struct e {
    model_key k;
    std::uint64_t next, last;
  };
  std::vector<e> v;
  std::uint64_t clock = 0;
  model_step access(model_key k, const access_hint& h) {
    model_step s;
    ++clock;
    for (auto& x : v) {
      if (x.k == k) {
        x.next = h.next_use;
        x.last = clock;
        s.hit = true;
        return s;
      }
    }
    if (v.size() == c) {
      auto best = v.begin();
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (it->next > best->next || (it->next == best->next && it->last < best->last)) best = it;
      }
      s.victims.push_back(best->k);
      v.erase(best);
    }
    v.push_back({k, h.next_use, clock});
    return s;
  }
};

}  // namespace kvtk::test
