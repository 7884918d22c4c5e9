// kvtk/move/timing_fit.hpp — the transfer-time model t = alpha + n * beta + bytes / B, fitted by
// least squares over measured transfers (header-only: the host and CUDA benches share it).
/// Thread safety: values and pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace kvtk::move {

/// The one transfer-time model of kvtk: the simulator's host link and pool, the tier
/// hierarchy's links, kvtk sparse's recalls and the executors' predictions all use it.
/// bytes_per_s <= 0 means no bandwidth term.
struct timing_model {
  double alpha_s = 0, beta_s = 0, bytes_per_s = 0;
  /// One transfer of n_blocks blocks, bytes in all.
  [[nodiscard]] double predict(double n_blocks, double bytes) const noexcept {
    return alpha_s + n_blocks * beta_s + (bytes_per_s > 0 ? bytes / bytes_per_s : 0.0);
  }
  /// `calls` transfers of one block each, bytes in all: calls x (alpha + beta) + bytes / B.
  [[nodiscard]] double predict_calls(double calls, double bytes) const noexcept {
    return calls * (alpha_s + beta_s) + (bytes_per_s > 0 ? bytes / bytes_per_s : 0.0);
  }
};

struct timing_sample {
  double n_blocks = 0, bytes = 0, seconds = 0;
};

/// Weighted least-squares fit minimising relative error (weights 1/t^2; normal equations on
/// n / 10^3 and bytes / 10^9 for conditioning, solved by Gaussian elimination with pivoting).  Requires: samples that vary in both n and bytes.
/// Throws: std::invalid_argument when they cannot determine the three parameters.
/// (`Range`: any range of timing_sample; a template so the header stays C++17 for nvcc.)
template <class Range>
timing_model fit_timing(const Range& samples) {
  double m[3][4] = {};
  for (const auto& s : samples) {
    // Relative error matters (a 2 us copy and a 20 ms copy count alike): weight by 1 / t^2.
    const double w = s.seconds > 0 ? 1.0 / (s.seconds * s.seconds) : 0.0;
    const double x[3] = {1.0, s.n_blocks / 1e3, s.bytes / 1e9};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) m[r][c] += w * x[r] * x[c];
      m[r][3] += w * x[r] * s.seconds;
    }
  }
  // A pivot is zero when it is zero against the matrix's own scale: the rounding left by
  // eliminating a rank-deficient system (one sample; n and bytes in proportion) is ~1e-16 of it,
  // never exactly 0, and an absolute threshold let such "fits" through.
  const double scale = std::max({std::abs(m[0][0]), std::abs(m[1][1]), std::abs(m[2][2])});
  for (int col = 0; col < 3; ++col) {
    int piv = col;
    for (int r = col + 1; r < 3; ++r) {
      if (std::abs(m[r][col]) > std::abs(m[piv][col])) piv = r;
    }
    if (!(std::abs(m[piv][col]) > 1e-12 * scale)) {
      throw std::invalid_argument("fit_timing: samples do not determine alpha, beta and bandwidth");
    }
    for (int c = 0; c < 4; ++c) std::swap(m[col][c], m[piv][c]);
    for (int r = 0; r < 3; ++r) {
      if (r == col) continue;
      const double f = m[r][col] / m[col][col];
      for (int c = col; c < 4; ++c) m[r][c] -= f * m[col][c];
    }
  }
  timing_model t;
  t.alpha_s = m[0][3] / m[0][0];
  t.beta_s = m[1][3] / m[1][1] / 1e3;
  const double inv_bw = m[2][3] / m[2][2] / 1e9;
  t.bytes_per_s = inv_bw > 0 ? 1.0 / inv_bw : 0.0;
  return t;
}

/// The worst relative error of `m` over `samples`.
template <class Range>
double worst_relative_error(const timing_model& m, const Range& samples) {
  double worst = 0;
  for (const auto& s : samples) {
    worst = std::max(worst, std::abs(m.predict(s.n_blocks, s.bytes) - s.seconds) / s.seconds);
  }
  return worst;
}

}  // namespace kvtk::move
