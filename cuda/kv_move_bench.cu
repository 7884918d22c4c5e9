// cuda/kv_move_bench.cu — the CUDA backend's movement bench and GPU tests: host (pinned) <->
// device copies of KV blocks with three mechanisms, every block verified, and the timing model
// t = alpha + n*beta + bytes/B fitted per direction and mechanism.
//
// Builds from the CUDA toolkit and kvtk's header-only move headers alone (no Boost, no JSON
// library), so it runs on a GPU machine that has nothing else. Every CUDA status is checked.
//
//   kv_move_bench [--out DIR] [--quick]     bench + verification; writes DIR/results.json
//   kv_move_bench --self-test               GPU tests; exit 0 with "skipped" when no device
//
// Mechanisms: memcpy (one cudaMemcpyAsync per block), coalesced (runs of consecutive block ids
// as one cudaMemcpyAsync), kernel (a gather/scatter kernel reading or writing mapped pinned host
// memory directly, `ctas` thread blocks). Blocks are scattered (every other id) for memcpy and
// kernel, so coalescing is measured on the consecutive layout.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvtk/move/block_pattern.hpp"
#include "kvtk/move/timing_fit.hpp"

namespace {

void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
    std::exit(1);
  }
}
#define CK(x) check((x), #x, __FILE__, __LINE__)

__global__ void gather_copy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                            const unsigned long long* __restrict__ src_block,
                            const unsigned long long* __restrict__ dst_block,
                            unsigned long long words_per_block, unsigned n_blocks) {
  for (unsigned b = blockIdx.x; b < n_blocks; b += gridDim.x) {
    const uint4* s = src + src_block[b] * words_per_block;
    uint4* d = dst + dst_block[b] * words_per_block;
    for (unsigned long long w = threadIdx.x; w < words_per_block; w += blockDim.x) d[w] = s[w];
  }
}

enum class mech { memcpy, coalesced, kernel };
const char* name_of(mech m) {
  return m == mech::memcpy ? "memcpy" : m == mech::coalesced ? "coalesced" : "kernel";
}

struct sample {
  std::string dir, mechanism;
  std::size_t block_bytes, blocks;
  double seconds;
  bool verified;
};

struct context {
  cudaStream_t stream{};
  cudaEvent_t start{}, stop{};
  int ctas = 132;
};

// Copies n blocks of `bytes` between a pinned host arena and a device arena in direction `h2d`,
// block i of the source at src_ids[i] -> dst_ids[i]. Returns seconds (events).
double transfer(context& cx, mech m, bool h2d, unsigned char* host, unsigned char* host_dev_ptr,
                unsigned char* dev, std::size_t bytes, const std::vector<unsigned long long>& src_ids,
                const std::vector<unsigned long long>& dst_ids, unsigned long long* d_src,
                unsigned long long* d_dst) {
  const std::size_t n = src_ids.size();
  CK(cudaEventRecord(cx.start, cx.stream));
  if (m == mech::kernel) {
    const unsigned char* s = h2d ? host_dev_ptr : dev;
    unsigned char* d = h2d ? dev : host_dev_ptr;
    gather_copy<<<cx.ctas, 256, 0, cx.stream>>>(reinterpret_cast<const uint4*>(s),
                                                 reinterpret_cast<uint4*>(d), d_src, d_dst,
                                                 bytes / sizeof(uint4), static_cast<unsigned>(n));
    CK(cudaGetLastError());
  } else {
    const cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    for (std::size_t i = 0; i < n;) {
      std::size_t run = 1;
      if (m == mech::coalesced) {
        while (i + run < n && src_ids[i + run] == src_ids[i] + run &&
               dst_ids[i + run] == dst_ids[i] + run) {
          ++run;
        }
      }
      const unsigned char* s = (h2d ? host : dev) + src_ids[i] * bytes;
      unsigned char* d = (h2d ? dev : host) + dst_ids[i] * bytes;
      CK(cudaMemcpyAsync(d, s, bytes * run, kind, cx.stream));
      i += run;
    }
  }
  CK(cudaEventRecord(cx.stop, cx.stream));
  CK(cudaEventSynchronize(cx.stop));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, cx.start, cx.stop));
  return ms / 1e3;
}

struct fit {
  double alpha, beta, bw, worst;
};
fit fit_timing(const std::vector<sample>& rows) {
  std::vector<kvtk::move::timing_sample> s;
  for (const auto& r : rows) s.push_back({double(r.blocks), double(r.blocks) * r.block_bytes, r.seconds});
  try {
    const auto m = kvtk::move::fit_timing(s);
    return {m.alpha_s, m.beta_s, m.bytes_per_s, kvtk::move::worst_relative_error(m, s)};
  } catch (const std::invalid_argument&) {
    return {0, 0, 0, -1};  // too few distinct samples
  }
}

int run(const std::string& out_dir, bool quick, bool self_test) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("kv_move_bench: skipped: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  CK(cudaSetDevice(0));
  context cx;
  cx.ctas = prop.multiProcessorCount;
  CK(cudaStreamCreate(&cx.stream));
  CK(cudaEventCreate(&cx.start));
  CK(cudaEventCreate(&cx.stop));
  std::vector<std::size_t> sizes = {16384, 65536, 262144, 1048576, 4194304, 16777216};
  std::vector<std::size_t> counts = {1, 16, 256, 4096};
  if (quick || self_test) {
    sizes = {16384, 65536, 1048576};
    counts = {1, 16, 256};
  }
  const std::size_t cap = std::size_t{2} << 30;  // 2 GiB per arena
  std::vector<sample> rows;
  bool all_ok = true;
  std::uint64_t moves = 0;
  for (std::size_t bytes : sizes) {
    for (std::size_t n : counts) {
      const std::size_t slots = 2 * n;  // scattered ids use every other slot
      if (slots * bytes > cap) continue;
      unsigned char *host = nullptr, *host_dev = nullptr, *dev = nullptr, *check_buf = nullptr;
      CK(cudaHostAlloc(reinterpret_cast<void**>(&host), slots * bytes, cudaHostAllocMapped));
      CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_dev), host, 0));
      CK(cudaMalloc(reinterpret_cast<void**>(&dev), slots * bytes));
      CK(cudaHostAlloc(reinterpret_cast<void**>(&check_buf), slots * bytes, cudaHostAllocDefault));
      unsigned long long *d_src = nullptr, *d_dst = nullptr;
      CK(cudaMalloc(reinterpret_cast<void**>(&d_src), n * sizeof(unsigned long long)));
      CK(cudaMalloc(reinterpret_cast<void**>(&d_dst), n * sizeof(unsigned long long)));
      for (mech m : {mech::memcpy, mech::coalesced, mech::kernel}) {
        std::vector<unsigned long long> src(n), dst(n);
        for (std::size_t i = 0; i < n; ++i) {
          src[i] = m == mech::coalesced ? i : 2 * i;
          dst[i] = m == mech::coalesced ? i + n : 2 * i + 1;
        }
        CK(cudaMemcpy(d_src, src.data(), n * sizeof(unsigned long long), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_dst, dst.data(), n * sizeof(unsigned long long), cudaMemcpyHostToDevice));
        for (bool h2d : {true, false}) {
          // Source blocks carry their pattern; the destination starts zeroed.
          for (std::size_t i = 0; i < n; ++i) {
            unsigned char* s = h2d ? host + src[i] * bytes : check_buf + src[i] * bytes;
            kvtk::move::fill_pattern(s, src[i] * 1000003 + bytes, 0, bytes);
          }
          if (!h2d) CK(cudaMemcpy(dev, check_buf, slots * bytes, cudaMemcpyHostToDevice));
          if (h2d) CK(cudaMemset(dev, 0, slots * bytes));
          if (!h2d) std::memset(host, 0, slots * bytes);
          double best = 1e300;
          const int reps = self_test ? 1 : 3;
          for (int r = 0; r < reps; ++r) {
            best = std::min(best, transfer(cx, m, h2d, host, host_dev, dev, bytes, src, dst, d_src, d_dst));
          }
          // Verify every moved block.
          const unsigned char* got = host;
          if (h2d) {
            CK(cudaMemcpy(check_buf, dev, slots * bytes, cudaMemcpyDeviceToHost));
            got = check_buf;
          }
          bool ok = true;
          for (std::size_t i = 0; i < n; ++i) {
            ok = ok && kvtk::move::check_pattern(got + dst[i] * bytes, src[i] * 1000003 + bytes, 0, bytes);
          }
          moves += n * reps;
          all_ok = all_ok && ok;
          rows.push_back({h2d ? "h2d" : "d2h", name_of(m), bytes, n, best, ok});
        }
      }
      CK(cudaFree(d_src));
      CK(cudaFree(d_dst));
      CK(cudaFree(dev));
      CK(cudaFreeHost(host));
      CK(cudaFreeHost(check_buf));
    }
  }
  // The large-copy reference: one 1 GiB pinned copy each way.
  double ref_h2d = 0, ref_d2h = 0;
  if (!self_test) {
    const std::size_t big = std::size_t{1} << 30;
    unsigned char *h = nullptr, *d = nullptr;
    CK(cudaHostAlloc(reinterpret_cast<void**>(&h), big, cudaHostAllocDefault));
    CK(cudaMalloc(reinterpret_cast<void**>(&d), big));
    for (int dir = 0; dir < 2; ++dir) {
      double best = 1e300;
      for (int r = 0; r < 3; ++r) {
        CK(cudaEventRecord(cx.start, cx.stream));
        CK(cudaMemcpyAsync(dir == 0 ? d : h, dir == 0 ? h : d, big,
                           dir == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, cx.stream));
        CK(cudaEventRecord(cx.stop, cx.stream));
        CK(cudaEventSynchronize(cx.stop));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, cx.start, cx.stop));
        best = std::min(best, ms / 1e3);
      }
      (dir == 0 ? ref_h2d : ref_d2h) = big / best;
    }
    CK(cudaFree(d));
    CK(cudaFreeHost(h));
  }
  std::printf("%-4s %-10s %10s %6s %12s %9s %s\n", "dir", "mechanism", "block B", "blocks",
              "seconds", "GB/s", "verified");
  for (const auto& r : rows) {
    std::printf("%-4s %-10s %10zu %6zu %12.6f %9.2f %s\n", r.dir.c_str(), r.mechanism.c_str(),
                r.block_bytes, r.blocks, r.seconds, r.blocks * double(r.block_bytes) / r.seconds / 1e9,
                r.verified ? "yes" : "NO");
  }
  std::printf("device %s; large-copy reference H2D %.2f GB/s, D2H %.2f GB/s; %llu block moves, %s\n",
              prop.name, ref_h2d / 1e9, ref_d2h / 1e9, static_cast<unsigned long long>(moves),
              all_ok ? "all verified" : "INTEGRITY FAILURE");
  if (!out_dir.empty()) {
    const std::string path = out_dir + "/results.json";
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"date\": \"%s\",\n  \"block_moves\": %llu,\n"
                    "  \"verified\": %s,\n  \"reference_bytes_per_s\": {\"h2d\": %.6g, \"d2h\": %.6g},\n"
                    "  \"rows\": [\n",
                 prop.name, date, static_cast<unsigned long long>(moves), all_ok ? "true" : "false",
                 ref_h2d, ref_d2h);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::fprintf(f, "    {\"dir\": \"%s\", \"mechanism\": \"%s\", \"block_bytes\": %zu, \"blocks\": %zu, "
                      "\"seconds\": %.9g, \"verified\": %s}%s\n",
                   r.dir.c_str(), r.mechanism.c_str(), r.block_bytes, r.blocks, r.seconds,
                   r.verified ? "true" : "false", i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ],\n  \"calibration\": {\n");
    bool first = true;
    for (const char* dir : {"h2d", "d2h"}) {
      for (mech m : {mech::memcpy, mech::coalesced, mech::kernel}) {
        std::vector<sample> g;
        for (const auto& r : rows) {
          if (r.dir == dir && r.mechanism == name_of(m)) g.push_back(r);
        }
        const fit ft = fit_timing(g);
        std::fprintf(f, "%s    \"%s %s\": {\"alpha_s\": %.6g, \"beta_s\": %.6g, \"bytes_per_s\": %.6g, "
                        "\"max_relative_error\": %.4g}",
                     first ? "" : ",\n", dir, name_of(m), ft.alpha, ft.beta, ft.bw, ft.worst);
        first = false;
      }
    }
    std::fprintf(f, "\n  }\n}\n");
    std::fclose(f);
    std::printf("wrote %s\n", path.c_str());
  }
  CK(cudaEventDestroy(cx.start));
  CK(cudaEventDestroy(cx.stop));
  CK(cudaStreamDestroy(cx.stream));
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  bool quick = false, self_test = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--self-test") {
      self_test = true;
    } else {
      std::fprintf(stderr, "usage: kv_move_bench [--out DIR] [--quick] [--self-test]\n");
      return 2;
    }
  }
  return run(out, quick, self_test);
}
