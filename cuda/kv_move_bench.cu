// cuda/kv_move_bench.cu — the CUDA backend's movement bench and GPU tests: host (pinned) <->
// device copies of KV blocks with four mechanisms, one direction at a time and both at once,
// every block verified, and the timing model t = alpha + n*beta + bytes/B fitted per path and
// mechanism.
//
// Builds from the CUDA toolkit and kvtk's header-only move headers alone (no Boost, no JSON
// library), so it runs on a GPU machine that has nothing else. Every CUDA status is checked; the
// one status tolerated is cudaMemcpyBatchAsync refusing the first (probe) batch, which marks
// `batched` unavailable instead of failing the run.
//
//   kv_move_bench [--out DIR] [--quick]     bench + verification; writes DIR/results.json
//     [--ctas N]       the kernel's thread blocks (default: two per SM)
//     [--plain-batch]  cudaMemcpyBatchAsync with stream order only (no location hints, no
//                      prefer-overlap-with-compute flag), to see what those attributes cost
//   kv_move_bench --self-test               GPU tests; exit 0 with "skipped" when no device
//
// Mechanisms: memcpy (one cudaMemcpyAsync per block), coalesced (runs of consecutive block ids
// as one cudaMemcpyAsync), batched (every block of the transfer as one entry of a single
// cudaMemcpyBatchAsync; CUDA >= 12.8 runtime and driver), kernel (a gather/scatter kernel
// reading or writing mapped pinned host memory directly, `ctas` thread blocks). Blocks are
// scattered (every other id) for memcpy, batched and kernel, so coalescing is measured on the
// consecutive layout.
//
// Paths: h2d, d2h, and bidir — H2D and D2H of the same block count and size at once on two
// streams (the H2D sources and the D2H destinations are disjoint host slots, the D2H sources and
// the H2D destinations disjoint device slots), timed from one start event to the later of the two
// end events. Per-block and coalesced copies are submitted alternately (one H2D piece, one D2H
// piece) from the one host thread; batched and kernel submit one call per direction. A bidir
// row's `blocks` is per direction (2*blocks*block_bytes move in all); its calibration is fitted
// over both directions' blocks and bytes, so its bytes_per_s is the aggregate.
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

// cudaMemcpyBatchAsync exists from CUDA 12.8; CUDA 13.0 dropped its failIdx parameter.
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12080
#define KVTK_HAVE_MEMCPY_BATCH 1
#else
#define KVTK_HAVE_MEMCPY_BATCH 0
#endif

namespace {

void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
    std::exit(1);
  }
}
#define CK(x) check((x), #x, __FILE__, __LINE__)

// Work is cut into units of at most `chunk_words` 16-byte words of one block, and the CTAs take
// units in turn, so every SM has work whatever the block count (the first GPU run, 2026-11-30,
// gave each CTA a whole block: one 16 MiB block then moved at 3.4 GB/s H2D, one SM's worth of
// zero-copy reads). Each thread keeps four loads in flight before storing, because mapped host
// reads wait a PCIe round trip.
__global__ void gather_copy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                            const unsigned long long* __restrict__ src_block,
                            const unsigned long long* __restrict__ dst_block,
                            unsigned long long words_per_block, unsigned n_blocks,
                            unsigned long long chunk_words) {
  const unsigned long long chunks = (words_per_block + chunk_words - 1) / chunk_words;
  const unsigned long long units = chunks * n_blocks;
  const unsigned step = blockDim.x;
  for (unsigned long long u = blockIdx.x; u < units; u += gridDim.x) {
    const unsigned long long b = u / chunks, begin = (u % chunks) * chunk_words;
    const unsigned long long end = begin + chunk_words < words_per_block ? begin + chunk_words
                                                                          : words_per_block;
    const uint4* s = src + src_block[b] * words_per_block;
    uint4* d = dst + dst_block[b] * words_per_block;
    unsigned long long w = begin + threadIdx.x;
    for (; w + 3ull * step < end; w += 4ull * step) {
      const uint4 v0 = s[w], v1 = s[w + step], v2 = s[w + 2ull * step], v3 = s[w + 3ull * step];
      d[w] = v0;
      d[w + step] = v1;
      d[w + 2ull * step] = v2;
      d[w + 3ull * step] = v3;
    }
    for (; w < end; w += step) d[w] = s[w];
  }
}
constexpr unsigned long long kernel_chunk_words = 4096;  // 64 KiB per unit

enum class mech { memcpy, coalesced, batched, kernel };
const mech all_mechs[] = {mech::memcpy, mech::coalesced, mech::batched, mech::kernel};
const char* name_of(mech m) {
  switch (m) {
    case mech::memcpy: return "memcpy";
    case mech::coalesced: return "coalesced";
    case mech::batched: return "batched";
    case mech::kernel: return "kernel";
  }
  return "?";
}

struct sample {
  std::string dir, mechanism;
  std::size_t block_bytes, blocks;  // blocks: per direction (bidir moves 2*blocks)
  double seconds;
  bool verified;
};

// Whether cudaMemcpyBatchAsync may be used, and with which attributes.
struct batch_support {
  bool available = false;
  bool hints = false;  // location hints + cudaMemcpyFlagPreferOverlapWithCompute accepted
  int runtime = 0, driver = 0;
  std::string detail;
};

struct context {
  cudaStream_t stream{}, stream2{};  // stream2: the D2H half of a bidir transfer
  cudaEvent_t start{}, stop{}, stop2{};
  int device = 0;
  int ctas = 132;
  bool plain_batch = false;  // --plain-batch: skip the hinted attributes (stream order only)
  batch_support batch;
};

// The arenas of one (block size, count) configuration: 2n slots each, pinned mapped host and
// device, plus the device copies of the id lists the kernel reads.
struct arenas {
  unsigned char *host = nullptr, *host_dev = nullptr, *dev = nullptr;
  unsigned long long *d_src = nullptr, *d_dst = nullptr;
  std::size_t bytes = 0, n = 0;
};

// One direction of one transfer, prepared before the clock starts: the copy pieces (one per
// block, or one per run of consecutive ids for coalesced) for the copy mechanisms, or the arena
// bases for the kernel.
struct plan {
  bool h2d = true;
  std::vector<void*> dst, src;  // non-const: CUDA 12.8-12.9 take void** for both
  std::vector<std::size_t> size;
  const unsigned char* kernel_src = nullptr;
  unsigned char* kernel_dst = nullptr;
};

plan make_plan(mech m, bool h2d, const arenas& a, const std::vector<unsigned long long>& src_ids,
               const std::vector<unsigned long long>& dst_ids) {
  plan p;
  p.h2d = h2d;
  p.kernel_src = h2d ? a.host_dev : a.dev;
  p.kernel_dst = h2d ? a.dev : a.host_dev;
  if (m == mech::kernel) return p;
  unsigned char* src_base = h2d ? a.host : a.dev;
  unsigned char* dst_base = h2d ? a.dev : a.host;
  const std::size_t n = src_ids.size();
  for (std::size_t i = 0; i < n;) {
    std::size_t run = 1;
    if (m == mech::coalesced) {
      while (i + run < n && src_ids[i + run] == src_ids[i] + run &&
             dst_ids[i + run] == dst_ids[i] + run) {
        ++run;
      }
    }
    p.src.push_back(src_base + src_ids[i] * a.bytes);
    p.dst.push_back(dst_base + dst_ids[i] * a.bytes);
    p.size.push_back(run * a.bytes);
    i += run;
  }
  return p;
}

void issue_piece(const plan& p, std::size_t i, cudaStream_t s) {
  CK(cudaMemcpyAsync(p.dst[i], p.src[i], p.size[i],
                     p.h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s));
}

// Submits all pieces of `p` as one cudaMemcpyBatchAsync on `s` and returns its status (the
// caller checks it). `hints`: host/device location hints and the prefer-overlap-with-compute
// flag; without, stream-ordered source access only. *fail_idx: the failing entry (12.8-12.9
// report it; SIZE_MAX when none or not reported).
cudaError_t submit_batch(plan& p, int device, bool hints, cudaStream_t s, std::size_t* fail_idx) {
  *fail_idx = SIZE_MAX;
#if KVTK_HAVE_MEMCPY_BATCH
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // sources were written in stream order
  if (hints) {
    cudaMemLocation host_loc{}, dev_loc{};
    host_loc.type = cudaMemLocationTypeHost;
    host_loc.id = 0;  // ignored for the host
    dev_loc.type = cudaMemLocationTypeDevice;
    dev_loc.id = device;
    attr.srcLocHint = p.h2d ? host_loc : dev_loc;
    attr.dstLocHint = p.h2d ? dev_loc : host_loc;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  }
  std::size_t attr_idx = 0;  // the one attribute set applies to every entry
#if CUDART_VERSION >= 13000
  return cudaMemcpyBatchAsync(p.dst.data(), p.src.data(), p.size.data(), p.size.size(), &attr,
                              &attr_idx, 1, s);
#else
  return cudaMemcpyBatchAsync(p.dst.data(), p.src.data(), p.size.data(), p.size.size(), &attr,
                              &attr_idx, 1, fail_idx, s);
#endif
#else
  (void)p;
  (void)device;
  (void)hints;
  (void)s;
  return cudaErrorNotSupported;
#endif
}

void issue_batch(context& cx, plan& p, cudaStream_t s) {
  std::size_t fail_idx = SIZE_MAX;
  const cudaError_t e = submit_batch(p, cx.device, cx.batch.hints, s, &fail_idx);
  if (e != cudaSuccess && fail_idx != SIZE_MAX) {
    std::fprintf(stderr, "cudaMemcpyBatchAsync: entry %zu of %zu failed\n", fail_idx, p.size.size());
  }
  CK(e);
}

// Enqueues the whole of direction `p` with mechanism `m` on stream `s`.
void issue_all(context& cx, mech m, plan& p, const arenas& a, cudaStream_t s) {
  if (m == mech::kernel) {
    gather_copy<<<cx.ctas, 256, 0, s>>>(reinterpret_cast<const uint4*>(p.kernel_src),
                                        reinterpret_cast<uint4*>(p.kernel_dst), a.d_src, a.d_dst,
                                        a.bytes / sizeof(uint4), static_cast<unsigned>(a.n),
                                        kernel_chunk_words);
    CK(cudaGetLastError());
  } else if (m == mech::batched) {
    issue_batch(cx, p, s);
  } else {
    for (std::size_t i = 0; i < p.size.size(); ++i) issue_piece(p, i, s);
  }
}

double elapsed_s(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, from, to));
  return ms / 1e3;
}

// One direction: seconds between events around the submission on cx.stream.
double transfer(context& cx, mech m, plan& p, const arenas& a) {
  CK(cudaEventRecord(cx.start, cx.stream));
  issue_all(cx, m, p, a, cx.stream);
  CK(cudaEventRecord(cx.stop, cx.stream));
  CK(cudaEventSynchronize(cx.stop));
  return elapsed_s(cx.start, cx.stop);
}

// Both directions at once: `up` (H2D) on cx.stream, `down` (D2H) on cx.stream2, which waits for
// the common start event. Seconds from the start to the later end.
double transfer_bidir(context& cx, mech m, plan& up, plan& down, const arenas& a) {
  CK(cudaEventRecord(cx.start, cx.stream));
  CK(cudaStreamWaitEvent(cx.stream2, cx.start, 0));
  if (m == mech::kernel || m == mech::batched) {
    issue_all(cx, m, up, a, cx.stream);
    issue_all(cx, m, down, a, cx.stream2);
  } else {
    const std::size_t pieces = std::max(up.size.size(), down.size.size());
    for (std::size_t i = 0; i < pieces; ++i) {
      if (i < up.size.size()) issue_piece(up, i, cx.stream);
      if (i < down.size.size()) issue_piece(down, i, cx.stream2);
    }
  }
  CK(cudaEventRecord(cx.stop, cx.stream));
  CK(cudaEventRecord(cx.stop2, cx.stream2));
  CK(cudaEventSynchronize(cx.stop));
  CK(cudaEventSynchronize(cx.stop2));
  return std::max(elapsed_s(cx.start, cx.stop), elapsed_s(cx.start, cx.stop2));
}

// Decides whether `batched` runs: compiled in, runtime and driver >= 12.8, and a first small
// batch each way accepted (first with location hints + prefer-overlap, then with stream order
// only). cudaErrorNotSupported / cudaErrorInvalidValue (or cudaErrorCallRequiresNewerDriver) from
// that first call marks the mechanism unavailable; any other failure is fatal as usual. The probe
// round trip is verified too (a mismatch clears *ok).
batch_support probe_batch(context& cx, bool* ok) {
  batch_support b;
  CK(cudaRuntimeGetVersion(&b.runtime));
  CK(cudaDriverGetVersion(&b.driver));
  if (!KVTK_HAVE_MEMCPY_BATCH) {
    b.detail = "not compiled: CUDA headers older than 12.8 (no cudaMemcpyBatchAsync)";
    return b;
  }
  if (b.runtime < 12080 || b.driver < 12080) {
    b.detail = "CUDA runtime " + std::to_string(b.runtime) + " / driver " + std::to_string(b.driver) +
               " older than 12.8";
    return b;
  }
  const std::size_t bytes = 4096, slots = 4;
  arenas a;
  a.bytes = bytes;
  a.n = 2;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&a.host), slots * bytes, cudaHostAllocMapped));
  CK(cudaMalloc(reinterpret_cast<void**>(&a.dev), slots * bytes));
  CK(cudaMemset(a.dev, 0, slots * bytes));
  std::memset(a.host, 0, slots * bytes);
  for (unsigned long long id : {0ull, 2ull}) kvtk::move::fill_pattern(a.host + id * bytes, id, 7, bytes);
  // H2D host {0, 2} -> device {1, 3}; D2H device {1, 3} -> host {1, 3}.
  plan up = make_plan(mech::batched, true, a, {0, 2}, {1, 3});
  plan down = make_plan(mech::batched, false, a, {1, 3}, {1, 3});
  std::string refused;
  for (bool hints : {true, false}) {
    if (hints && cx.plain_batch) continue;
    // Submits one probe batch; false when refused with a status that means "not here".
    auto accepted = [&](plan& p) {
      std::size_t fail_idx = SIZE_MAX;
      const cudaError_t e = submit_batch(p, cx.device, hints, cx.stream, &fail_idx);
      if (e == cudaErrorNotSupported || e == cudaErrorInvalidValue ||
          e == cudaErrorCallRequiresNewerDriver) {
        // A refused call leaves its status as the runtime's last error: clear it so that a
        // later cudaGetLastError (after a kernel launch) does not report it.
        const cudaError_t last = cudaGetLastError();
        if (last != cudaSuccess && last != e) CK(last);
        refused += std::string(refused.empty() ? "" : "; ") + (hints ? "hinted " : "plain ") +
                   (p.h2d ? "H2D: " : "D2H: ") + cudaGetErrorName(e);
        return false;
      }
      CK(e);
      CK(cudaStreamSynchronize(cx.stream));
      return true;
    };
    if (accepted(up) && accepted(down)) {
      b.available = true;
      b.hints = hints;
      break;
    }
  }
  if (b.available) {
    bool good = true;
    for (unsigned long long id : {0ull, 2ull}) {
      good = good && kvtk::move::check_pattern(a.host + (id + 1) * bytes, id, 7, bytes);
    }
    if (!good) *ok = false;
    b.detail = std::string("cudaMemcpyBatchAsync (") + (CUDART_VERSION >= 13000 ? "CUDA 13" : "CUDA 12.8-12.9") +
               " form), one entry per block; attributes: stream-ordered source" +
               (b.hints ? ", host/device location hints, prefer overlap with compute"
                        : cx.plain_batch ? " only (--plain-batch)"
                                         : " only (hinted attributes refused: " + refused + ")") +
               (good ? "" : "; PROBE ROUND TRIP CORRUPT");
  } else {
    b.detail = "cudaMemcpyBatchAsync refused the first batch (" + refused + ")";
  }
  CK(cudaFree(a.dev));
  CK(cudaFreeHost(a.host));
  return b;
}

struct fit {
  double alpha, beta, bw, worst;  // worst < 0: no fit (written as null, as the host bench does)
};
// `directions`: 2 for bidir rows (both directions' blocks and bytes count).
fit fit_timing(const std::vector<sample>& rows, double directions) {
  std::vector<kvtk::move::timing_sample> s;
  for (const auto& r : rows) {
    const double blocks = directions * double(r.blocks);
    s.push_back({blocks, blocks * r.block_bytes, r.seconds});
  }
  try {
    const auto m = kvtk::move::fit_timing(s);
    return {m.alpha_s, m.beta_s, m.bytes_per_s, kvtk::move::worst_relative_error(m, s)};
  } catch (const std::invalid_argument&) {
    return {0, 0, 0, -1};  // too few distinct samples
  }
}

std::uint64_t key_of(unsigned long long src_id, std::size_t bytes) { return src_id * 1000003 + bytes; }
// The pattern's piece number marks the direction, so that a block landing from the wrong
// direction of a bidir transfer fails verification.
constexpr std::uint64_t h2d_piece = 0, d2h_piece = 1;

// Sets up a transfer's sources and zeroed destinations for the directions that run.
void prepare(arenas& a, unsigned char* check_buf, const std::vector<unsigned long long>& src,
             bool h2d, bool d2h) {
  const std::size_t arena_bytes = 2 * a.n * a.bytes;
  if (d2h) {
    // Device arena: the D2H sources; in bidir the H2D destinations must start zeroed too.
    if (h2d) std::memset(check_buf, 0, arena_bytes);
    for (std::size_t i = 0; i < a.n; ++i) {
      kvtk::move::fill_pattern(check_buf + src[i] * a.bytes, key_of(src[i], a.bytes), d2h_piece, a.bytes);
    }
    CK(cudaMemcpy(a.dev, check_buf, arena_bytes, cudaMemcpyHostToDevice));
    std::memset(a.host, 0, arena_bytes);  // the D2H destinations
  } else {
    CK(cudaMemset(a.dev, 0, arena_bytes));
  }
  if (h2d) {
    for (std::size_t i = 0; i < a.n; ++i) {
      kvtk::move::fill_pattern(a.host + src[i] * a.bytes, key_of(src[i], a.bytes), h2d_piece, a.bytes);
    }
  }
}

// Verifies every moved block of the directions that ran.
bool verify(arenas& a, unsigned char* check_buf, const std::vector<unsigned long long>& src,
            const std::vector<unsigned long long>& dst, bool h2d, bool d2h) {
  bool ok = true;
  if (h2d) {
    CK(cudaMemcpy(check_buf, a.dev, 2 * a.n * a.bytes, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < a.n; ++i) {
      ok = ok && kvtk::move::check_pattern(check_buf + dst[i] * a.bytes, key_of(src[i], a.bytes),
                                           h2d_piece, a.bytes);
    }
  }
  if (d2h) {
    for (std::size_t i = 0; i < a.n; ++i) {
      ok = ok && kvtk::move::check_pattern(a.host + dst[i] * a.bytes, key_of(src[i], a.bytes),
                                           d2h_piece, a.bytes);
    }
  }
  return ok;
}

int run(const std::string& out_dir, bool quick, bool self_test, int ctas, bool plain_batch) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("kv_move_bench: skipped: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  CK(cudaSetDevice(0));
  context cx;
  cx.device = 0;
  cx.ctas = ctas > 0 ? ctas : 2 * prop.multiProcessorCount;  // --ctas; default two per SM
  cx.plain_batch = plain_batch;
  CK(cudaStreamCreate(&cx.stream));
  CK(cudaStreamCreate(&cx.stream2));
  CK(cudaEventCreate(&cx.start));
  CK(cudaEventCreate(&cx.stop));
  CK(cudaEventCreate(&cx.stop2));
  bool all_ok = true;
  cx.batch = probe_batch(cx, &all_ok);
  std::printf("batched: %s: %s\n", cx.batch.available ? "available" : "unavailable (skipped)",
              cx.batch.detail.c_str());
  std::vector<mech> mechs;
  for (mech m : all_mechs) {
    if (m != mech::batched || cx.batch.available) mechs.push_back(m);
  }
  std::vector<std::size_t> sizes = {16384, 65536, 262144, 1048576, 4194304, 16777216};
  std::vector<std::size_t> counts = {1, 16, 256, 4096};
  if (quick || self_test) {
    sizes = {16384, 65536, 1048576};
    counts = {1, 16, 256};
  }
  const std::size_t cap = std::size_t{2} << 30;  // 2 GiB per arena
  std::vector<sample> rows;
  std::uint64_t moves = 0;
  for (std::size_t bytes : sizes) {
    for (std::size_t n : counts) {
      const std::size_t slots = 2 * n;  // scattered ids use every other slot
      if (slots * bytes > cap) continue;
      arenas a;
      a.bytes = bytes;
      a.n = n;
      unsigned char* check_buf = nullptr;
      CK(cudaHostAlloc(reinterpret_cast<void**>(&a.host), slots * bytes, cudaHostAllocMapped));
      CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&a.host_dev), a.host, 0));
      CK(cudaMalloc(reinterpret_cast<void**>(&a.dev), slots * bytes));
      CK(cudaHostAlloc(reinterpret_cast<void**>(&check_buf), slots * bytes, cudaHostAllocDefault));
      CK(cudaMalloc(reinterpret_cast<void**>(&a.d_src), n * sizeof(unsigned long long)));
      CK(cudaMalloc(reinterpret_cast<void**>(&a.d_dst), n * sizeof(unsigned long long)));
      for (mech m : mechs) {
        // The same ids serve both directions: in bidir, H2D reads host[src] and writes dev[dst]
        // while D2H reads dev[src] and writes host[dst], and src and dst slots are disjoint.
        std::vector<unsigned long long> src(n), dst(n);
        for (std::size_t i = 0; i < n; ++i) {
          src[i] = m == mech::coalesced ? i : 2 * i;
          dst[i] = m == mech::coalesced ? i + n : 2 * i + 1;
        }
        CK(cudaMemcpy(a.d_src, src.data(), n * sizeof(unsigned long long), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(a.d_dst, dst.data(), n * sizeof(unsigned long long), cudaMemcpyHostToDevice));
        plan up = make_plan(m, true, a, src, dst);
        plan down = make_plan(m, false, a, src, dst);
        const int reps = self_test ? 1 : 3;
        for (const char* path : {"h2d", "d2h", "bidir"}) {
          const bool h2d = std::strcmp(path, "d2h") != 0, d2h = std::strcmp(path, "h2d") != 0;
          prepare(a, check_buf, src, h2d, d2h);
          double best = 1e300;
          for (int r = 0; r < reps; ++r) {
            const double t = h2d && d2h ? transfer_bidir(cx, m, up, down, a)
                                        : transfer(cx, m, h2d ? up : down, a);
            best = std::min(best, t);
          }
          const bool ok = verify(a, check_buf, src, dst, h2d, d2h);
          moves += n * reps * (h2d && d2h ? 2 : 1);
          all_ok = all_ok && ok;
          rows.push_back({path, name_of(m), bytes, n, best, ok});
        }
      }
      CK(cudaFree(a.d_src));
      CK(cudaFree(a.d_dst));
      CK(cudaFree(a.dev));
      CK(cudaFreeHost(a.host));
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
        best = std::min(best, elapsed_s(cx.start, cx.stop));
      }
      (dir == 0 ? ref_h2d : ref_d2h) = big / best;
    }
    CK(cudaFree(d));
    CK(cudaFreeHost(h));
  }
  std::printf("%-5s %-10s %10s %6s %12s %9s %s\n", "dir", "mechanism", "block B", "blocks",
              "seconds", "GB/s", "verified");
  for (const auto& r : rows) {
    const double moved = (r.dir == "bidir" ? 2.0 : 1.0) * r.blocks * double(r.block_bytes);
    std::printf("%-5s %-10s %10zu %6zu %12.6f %9.2f %s\n", r.dir.c_str(), r.mechanism.c_str(),
                r.block_bytes, r.blocks, r.seconds, moved / r.seconds / 1e9, r.verified ? "yes" : "NO");
  }
  std::printf("bidir: blocks per direction, GB/s aggregate over both directions\n");
  if (!cx.batch.available) std::printf("batched: skipped: %s\n", cx.batch.detail.c_str());
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
                    "  \"cuda_runtime\": %d,\n  \"cuda_driver\": %d,\n"
                    "  \"batched\": {\"available\": %s, \"detail\": \"%s\"},\n"
                    "  \"bidir\": \"H2D and D2H at once on two streams; blocks per direction, seconds "
                    "from a common start to the later end; calibration over both directions' blocks "
                    "and bytes (aggregate bytes_per_s)\",\n"
                    "  \"rows\": [\n",
                 prop.name, date, static_cast<unsigned long long>(moves), all_ok ? "true" : "false",
                 ref_h2d, ref_d2h, cx.batch.runtime, cx.batch.driver,
                 cx.batch.available ? "true" : "false", cx.batch.detail.c_str());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::fprintf(f, "    {\"dir\": \"%s\", \"mechanism\": \"%s\", \"block_bytes\": %zu, \"blocks\": %zu, "
                      "\"seconds\": %.9g, \"verified\": %s}%s\n",
                   r.dir.c_str(), r.mechanism.c_str(), r.block_bytes, r.blocks, r.seconds,
                   r.verified ? "true" : "false", i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ],\n  \"calibration\": {\n");
    bool first = true;
    for (const char* dir_name : {"h2d", "d2h", "bidir"}) {
      const std::string dir = dir_name;
      for (mech m : mechs) {
        std::vector<sample> g;
        for (const auto& r : rows) {
          if (r.dir == dir && r.mechanism == name_of(m)) g.push_back(r);
        }
        const fit ft = fit_timing(g, dir == "bidir" ? 2.0 : 1.0);
        std::fprintf(f, "%s    \"%s %s\": ", first ? "" : ",\n", dir.c_str(), name_of(m));
        if (ft.worst < 0) {
          std::fprintf(f, "null");  // too few distinct samples to fit
        } else {
          std::fprintf(f, "{\"alpha_s\": %.6g, \"beta_s\": %.6g, \"bytes_per_s\": %.6g, "
                          "\"max_relative_error\": %.4g}",
                       ft.alpha, ft.beta, ft.bw, ft.worst);
        }
        first = false;
      }
    }
    std::fprintf(f, "\n  }\n}\n");
    std::fclose(f);
    std::printf("wrote %s\n", path.c_str());
  }
  CK(cudaEventDestroy(cx.start));
  CK(cudaEventDestroy(cx.stop));
  CK(cudaEventDestroy(cx.stop2));
  CK(cudaStreamDestroy(cx.stream));
  CK(cudaStreamDestroy(cx.stream2));
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  bool quick = false, self_test = false, plain_batch = false;
  int ctas = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--ctas" && i + 1 < argc) {
      ctas = std::atoi(argv[++i]);
      if (ctas <= 0 || ctas > 65535) {
        std::fprintf(stderr, "kv_move_bench: --ctas must be in [1, 65535]\n");
        return 2;
      }
    } else if (a == "--plain-batch") {
      plain_batch = true;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--self-test") {
      self_test = true;
    } else {
      std::fprintf(stderr, "usage: kv_move_bench [--out DIR] [--quick] [--self-test] [--ctas N] [--plain-batch]\n");
      return 2;
    }
  }
  return run(out, quick, self_test, ctas, plain_batch);
}
