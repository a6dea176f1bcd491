// y[M, N] = x[M, K] @ w for decoding on CPU (f32, small M), w pre-packed.
//
// A decode step multiplies a few rows (the batch) by every weight once, so
// it streams the weights from memory. XLA:CPU's GEMM packs them into panels
// on every call (a second pass over them). Here they are packed once per
// set of weights (cpu_decode.pack), into tiles of kTile output columns that
// are each one contiguous stream, read in register blocks that use every
// weight kRows times. Tiles are split over XLA's intra-op thread pool.
// Built by cpu_decode.py with the host compiler and -march=native, so the
// vector type below becomes AVX-512, AVX2 or SSE registers.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));

inline v16 Load(const float* p) { return *reinterpret_cast<const v16u*>(p); }
inline void Store(float* p, v16 v) { *reinterpret_cast<v16u*>(p) = v; }

constexpr int kRows = 8;  // rows of x in one register block
constexpr int kVecs = 3;  // 16-float vectors of w in one register block
constexpr int64_t kTile = 16 * kVecs;  // = cpu_decode.TILE
// Software prefetch distance in w rows (~6 KB): the hardware prefetcher
// alone left the first row group waiting on memory (40 -> 32 ms a pass).
constexpr int64_t kAhead = 32;

// wp is [N / T, K, T] (T = kTile): each tile of T output columns is one
// contiguous stream over K. xt is x transposed to [K, mp], zero-padded to mp
// rows; ys is [mp, N]. Tiles [t0, t1); a tile's weights are read from
// memory for the first 8 rows and from cache for the rest.
void Tiles(const float* xt, const float* wp, float* ys, int64_t K, int64_t N,
           int64_t mp, int64_t t0, int64_t t1) {
  constexpr int64_t T = kTile;
  for (int64_t t = t0; t < t1; ++t) {
    const float* wt = wp + t * K * T;
    for (int64_t g = 0; g < mp; g += kRows) {
      v16 acc[kRows][kVecs] = {};
      for (int64_t k = 0; k < K; ++k) {
        if (g == 0)  // later row groups find this tile in cache
          for (int j = 0; j < kVecs; ++j)
            __builtin_prefetch(wt + (k + kAhead) * T + 16 * j);
        v16 wv[kVecs];
        for (int j = 0; j < kVecs; ++j) wv[j] = Load(wt + k * T + 16 * j);
        const float* xk = xt + k * mp + g;
        for (int r = 0; r < kRows; ++r) {
          v16 b = v16{} + xk[r];  // a splat (-fno-signed-zeros drops the add)
          for (int j = 0; j < kVecs; ++j) acc[r][j] += b * wv[j];
        }
      }
      for (int r = 0; r < kRows; ++r)
        for (int j = 0; j < kVecs; ++j)
          Store(ys + (g + r) * N + t * T + 16 * j, acc[r][j]);
    }
  }
}

// Runs part(i) for i in [0, parts) on the caller and the pool. Parts are
// claimed from a shared counter, so the caller finishes the job alone if
// the pool is busy (no deadlock), and a task that starts late finds
// nothing left and returns.
template <typename Part>
void ParallelFor(ffi::ThreadPool& pool, int64_t parts, const Part& part) {
  struct Shared {
    std::atomic<int64_t> next{0}, done{0};
  };
  auto shared = std::make_shared<Shared>();
  const Part* body = &part;
  auto work = [shared, body, parts] {
    for (int64_t i; (i = shared->next.fetch_add(1)) < parts;) {
      (*body)(i);
      shared->done.fetch_add(1, std::memory_order_release);
    }
  };
  const int64_t helpers = std::min<int64_t>(pool.num_threads(), parts - 1);
  for (int64_t t = 0; t < helpers; ++t) pool.Schedule([work] { work(); });
  work();
  while (shared->done.load(std::memory_order_acquire) < parts) {
  }
}

int64_t Parts(ffi::ThreadPool& pool, int64_t units) {
  return std::max<int64_t>(1, std::min<int64_t>(units, pool.num_threads()));
}

ffi::Error MatmulPacked(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x,
                        ffi::Buffer<ffi::F32> wp,
                        ffi::ResultBuffer<ffi::F32> y) {
  const auto xd = x.dimensions(), wd = wp.dimensions();
  if (xd.size() != 2 || wd.size() != 3 || xd[1] != wd[1] || wd[2] != kTile)
    return ffi::Error::InvalidArgument(
        "cpu_decode_packed: want x[M,K], wp[N/T,K,T]");
  const int64_t M = xd[0], K = xd[1], tiles = wd[0], N = tiles * wd[2];
  const int64_t mp = (M + kRows - 1) / kRows * kRows;
  thread_local std::vector<float> xt, scratch;
  xt.assign(K * mp, 0.f);
  const float* xs = x.typed_data();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) xt[k * mp + m] = xs[m * K + k];
  float* out = y->typed_data();
  float* ys = out;
  if (mp != M) {
    scratch.resize(mp * N);
    ys = scratch.data();
  }
  const int64_t parts = Parts(pool, tiles);
  const float* xtp = xt.data();
  ParallelFor(pool, parts, [&](int64_t i) {
    Tiles(xtp, wp.typed_data(), ys, K, N, mp, tiles * i / parts,
          tiles * (i + 1) / parts);
  });
  if (ys != out) std::copy(ys, ys + M * N, out);
  return ffi::Error::Success();
}

// Decode attention, one token per row: X = B * G rows (prompt-major), K kv
// heads of R query heads each, head size H. Each query attends to its
// prompt's P cached positions (shared by the G rows of a prompt; pbias is 0
// or -1e30 per position) and to its own row's generated positions 0..step.
// Queries come in blocks of kQ within one (prompt, kv head), so a block
// reads the prompt's keys once.
constexpr int kQ = 8;

struct Attn {
  const float *q, *pk, *pv, *pbias, *gk, *gv;
  float* out;
  int64_t B, G, K, R, H, P, S, step;
};

// Scores of kQ queries against the prompt: s[i][p] = q_i . pk[:, p].
void PromptScores(const Attn& a, const float* const* qs, int n,
                  const float* pk, const float* pbias, float* s, int64_t ld) {
  int64_t p = 0;
  for (; p + 16 <= a.P; p += 16) {
    v16 acc[kQ] = {};
    for (int64_t h = 0; h < a.H; ++h) {
      const v16 kv = Load(pk + h * a.P + p);
      for (int i = 0; i < kQ; ++i) acc[i] += (v16{} + qs[i][h]) * kv;
    }
    const v16 bias = Load(pbias + p);
    for (int i = 0; i < n; ++i) Store(s + i * ld + p, acc[i] + bias);
  }
  for (; p < a.P; ++p)
    for (int i = 0; i < n; ++i) {
      float t = pbias[p];
      for (int64_t h = 0; h < a.H; ++h) t += qs[i][h] * pk[h * a.P + p];
      s[i * ld + p] = t;
    }
}

// One query's scores against its row's generated keys 0..step (gk [H, S]).
void GenScores(const Attn& a, const float* q, const float* gk, float* s) {
  const int64_t n = a.step + 1;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    v16 acc = {};
    for (int64_t h = 0; h < a.H; ++h) acc += (v16{} + q[h]) * Load(gk + h * a.S + j);
    Store(s + j, acc);
  }
  for (; j < n; ++j) {
    float t = 0;
    for (int64_t h = 0; h < a.H; ++h) t += q[h] * gk[h * a.S + j];
    s[j] = t;
  }
}

// out += sum_j e[j] * v[j, :] for j < n (v rows of H floats).
void Mix(const float* e, const float* v, int64_t n, int64_t H, float* out) {
  int64_t h = 0;
  for (; h + 64 <= H; h += 64) {
    v16 acc[4] = {Load(out + h), Load(out + h + 16), Load(out + h + 32),
                  Load(out + h + 48)};
    for (int64_t j = 0; j < n; ++j) {
      const v16 w = v16{} + e[j];
      for (int c = 0; c < 4; ++c) acc[c] += w * Load(v + j * H + h + 16 * c);
    }
    for (int c = 0; c < 4; ++c) Store(out + h + 16 * c, acc[c]);
  }
  for (; h < H; ++h) {
    float t = out[h];
    for (int64_t j = 0; j < n; ++j) t += e[j] * v[j * H + h];
    out[h] = t;
  }
}

// exp(x) for x <= 0 (scores minus their max): 2^n * e^r, |r| <= ln2 / 2,
// e^r by a degree-6 Taylor polynomial (relative error < 3e-7); 0 below -87.
inline v16 ExpNonPositive(v16 x) {
  typedef int32_t i16 __attribute__((vector_size(64)));
  const v16 t = x * 1.44269504f - 0.5f;  // round-to-nearest for t <= 0
  const i16 n = __builtin_convertvector(t, i16);
  const v16 nf = __builtin_convertvector(n, v16);
  const v16 r = x - nf * 0.693359375f + nf * 2.12194440e-4f;
  v16 p = v16{} + 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const i16 scale = (n + 127) << 23;
  v16 y = p * reinterpret_cast<const v16&>(scale);
  return x >= -87.f ? y : v16{};
}

// s[j] <- exp(s[j] - max s) for j < n; returns their sum.
float SoftmaxUnnormalised(float* s, int64_t n) {
  float mx = s[0];
  for (int64_t j = 1; j < n; ++j) mx = std::max(mx, s[j]);
  v16 acc = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const v16 e = ExpNonPositive(Load(s + j) - mx);
    Store(s + j, e);
    acc += e;
  }
  if (j < n) {
    float tail[16];
    for (int i = 0; i < 16; ++i) tail[i] = j + i < n ? s[j + i] - mx : -1e30f;
    const v16 e = ExpNonPositive(Load(tail));
    for (int i = 0; j + i < n; ++i) s[j + i] = e[i];
    acc += e;
  }
  float sum = 0;
  for (int i = 0; i < 16; ++i) sum += acc[i];
  return sum;
}

// Queries [m0, m0 + kQ) of prompt b, kv head k (query m is row b*G + m/R,
// head m%R). scratch holds kQ rows of P + S scores.
void AttendBlock(const Attn& a, int64_t b, int64_t k, int64_t m0,
                 float* scratch) {
  const int64_t M = a.G * a.R, n = std::min<int64_t>(kQ, M - m0);
  const int64_t ld = a.P + a.S;
  const float* qs[kQ];
  int64_t rows[kQ];
  for (int i = 0; i < kQ; ++i) {
    const int64_t m = m0 + std::min<int64_t>(i, n - 1);
    rows[i] = b * a.G + m / a.R;
    qs[i] = a.q + ((rows[i] * a.K + k) * a.R + m % a.R) * a.H;
  }
  const float* pk = a.pk + (b * a.K + k) * a.H * a.P;
  const float* pv = a.pv + (b * a.K + k) * a.P * a.H;
  PromptScores(a, qs, n, pk, a.pbias + b * a.P, scratch, ld);
  for (int i = 0; i < n; ++i) {
    float* s = scratch + i * ld;
    const int64_t row = (rows[i] * a.K + k);
    GenScores(a, qs[i], a.gk + row * a.H * a.S, s + a.P);
    // The prompt part then the generated part, as one softmax.
    const float sum = SoftmaxUnnormalised(s, a.P + a.step + 1);
    float* o = a.out + (row * a.R + (m0 + i) % a.R) * a.H;
    std::fill(o, o + a.H, 0.f);
    Mix(s, pv, a.P, a.H, o);
    Mix(s + a.P, a.gv + row * a.S * a.H, a.step + 1, a.H, o);
    const float inv = 1.f / sum;
    for (int64_t h = 0; h < a.H; ++h) o[h] *= inv;
  }
}

ffi::Error DecodeAttention(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> q,
                           ffi::Buffer<ffi::F32> pk, ffi::Buffer<ffi::F32> pv,
                           ffi::Buffer<ffi::F32> pbias,
                           ffi::Buffer<ffi::F32> gk, ffi::Buffer<ffi::F32> gv,
                           ffi::Buffer<ffi::S32> step,
                           ffi::ResultBuffer<ffi::F32> out) {
  const auto qd = q.dimensions(), pd = pk.dimensions(), gd = gk.dimensions();
  if (qd.size() != 4 || pd.size() != 4 || gd.size() != 4)
    return ffi::Error::InvalidArgument("cpu_attention: want 4-D q, pk, gk");
  Attn a{q.typed_data(), pk.typed_data(), pv.typed_data(), pbias.typed_data(),
         gk.typed_data(), gv.typed_data(), out->typed_data(),
         pd[0], qd[0] / pd[0], qd[1], qd[2], qd[3], pd[3], gd[3],
         step.typed_data()[0]};
  if (a.step < 0 || a.step >= a.S)
    return ffi::Error::InvalidArgument("cpu_attention: step out of range");
  const int64_t blocks = (a.G * a.R + kQ - 1) / kQ;
  const int64_t units = a.B * a.K * blocks;
  const int64_t ld = a.P + a.S;
  ParallelFor(pool, Parts(pool, units), [&, units](int64_t part) {
    thread_local std::vector<float> scratch;
    scratch.resize(kQ * ld);
    const int64_t parts = Parts(pool, units);
    for (int64_t u = units * part / parts; u < units * (part + 1) / parts;
         ++u)
      AttendBlock(a, u / (a.K * blocks), u / blocks % a.K,
                  u % blocks * kQ, scratch.data());
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(LeapCpuDecodeAttention, DecodeAttention,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(LeapCpuMatmulPacked, MatmulPacked,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
