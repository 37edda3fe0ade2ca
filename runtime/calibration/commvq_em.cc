#include "runtime/calibration/commvq_em.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "runtime/kv/commvq_codebooks.h"
#include "runtime/kv/commvq_math.h"

namespace vqserve::commvq {
namespace {

constexpr int kE = kCommVqKeyEntries;
constexpr int kC = kE * kE;
// weights below exp(-kCutoff) of the best centre are dropped (< 1e-13).
constexpr double kCutoff = 30.0;

// k-means++ seeding: 64 row indices spread over the targets.
std::vector<int> SeedRows(const float* z, int n, int dim, std::mt19937_64& rng) {
  std::vector<int> rows;
  std::vector<double> d2(n, std::numeric_limits<double>::infinity());
  rows.push_back(static_cast<int>(rng() % n));
  while (static_cast<int>(rows.size()) < kE) {
    const float* last = z + size_t{1} * rows.back() * dim;
    double total = 0;
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int k = 0; k < dim; ++k) {
        double d = double{z[size_t{1} * i * dim + k]} - last[k];
        s += d * d;
      }
      d2[i] = std::min(d2[i], s);
      total += d2[i];
    }
    int pick = static_cast<int>(rng() % n);
    if (total > 0) {
      double r = std::uniform_real_distribution<double>(0.0, total)(rng);
      for (int i = 0; i < n; ++i) {
        r -= d2[i];
        if (r <= 0) {
          pick = i;
          break;
        }
      }
    }
    rows.push_back(pick);
  }
  return rows;
}

// solves the spd system a x = b in place (a: m x m row-major, b: m x nrhs); false if not spd.
bool CholeskySolve(std::vector<double>* a_io, int m, std::vector<double>* b_io, int nrhs) {
  std::vector<double>& a = *a_io;
  std::vector<double>& b = *b_io;
  for (int j = 0; j < m; ++j) {
    double d = a[j * m + j];
    for (int k = 0; k < j; ++k) d -= a[j * m + k] * a[j * m + k];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    a[j * m + j] = d;
    for (int i = j + 1; i < m; ++i) {
      double s = a[i * m + j];
      for (int k = 0; k < j; ++k) s -= a[i * m + k] * a[j * m + k];
      a[i * m + j] = s / d;
    }
  }
  for (int i = 0; i < m; ++i) {  // l y = b, all right-hand sides at once
    double* bi = &b[size_t{1} * i * nrhs];
    for (int k = 0; k < i; ++k) {
      const double f = a[i * m + k];
      const double* bk = &b[size_t{1} * k * nrhs];
      for (int c = 0; c < nrhs; ++c) bi[c] -= f * bk[c];
    }
    for (int c = 0; c < nrhs; ++c) bi[c] /= a[i * m + i];
  }
  for (int i = m - 1; i >= 0; --i) {  // l^T x = y
    double* bi = &b[size_t{1} * i * nrhs];
    for (int k = i + 1; k < m; ++k) {
      const double f = a[k * m + i];
      const double* bk = &b[size_t{1} * k * nrhs];
      for (int c = 0; c < nrhs; ++c) bi[c] -= f * bk[c];
    }
    for (int c = 0; c < nrhs; ++c) bi[c] /= a[i * m + i];
  }
  return true;
}

// e[c] = base[c] - 2 u[A] - 2 u[64 + B] for all centres c = A + 64 B (the squared distance less
// |z|^2), with the minimum of each B row; returns the overall minimum.
float AllExcess(const float* base, const float* u, float* e, float* rowmin) {
  alignas(32) float two_u[kE];
  for (int a = 0; a < kE; ++a) two_u[a] = 2.0f * u[a];
  float best = std::numeric_limits<float>::infinity();
  for (int b = 0; b < kE; ++b) {
    const __m256 vb = _mm256_set1_ps(2.0f * u[kE + b]);
    __m256 m = _mm256_set1_ps(std::numeric_limits<float>::infinity());
    for (int a = 0; a < kE; a += 8) {
      __m256 x = _mm256_sub_ps(
          _mm256_sub_ps(_mm256_loadu_ps(base + kE * b + a), _mm256_load_ps(two_u + a)), vb);
      _mm256_storeu_ps(e + kE * b + a, x);
      m = _mm256_min_ps(m, x);
    }
    __m128 h = _mm_min_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_min_ps(h, _mm_movehl_ps(h, h));
    h = _mm_min_ss(h, _mm_shuffle_ps(h, h, 1));
    rowmin[b] = _mm_cvtss_f32(h);
    best = std::min(best, rowmin[b]);
  }
  return best;
}

// centres with e[c] <= limit.
void Candidates(const float* e, const float* rowmin, float limit, std::vector<int>* out) {
  out->clear();
  const __m256 vlim = _mm256_set1_ps(limit);
  for (int b = 0; b < kE; ++b) {
    if (rowmin[b] > limit) continue;
    for (int a = 0; a < kE; a += 8) {
      int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(e + kE * b + a), vlim, _CMP_LE_OQ));
      while (mask != 0) {
        out->push_back(a + __builtin_ctz(mask) + kE * b);
        mask &= mask - 1;
      }
    }
  }
}

}  // namespace

double ExpectedDistortion(const EmStats& st, const std::vector<double>& book, int g) {
  std::vector<double> rows(kE, 0.0), cols(kE, 0.0);
  for (int b = 0; b < kE; ++b) {
    for (int a = 0; a < kE; ++a) {
      rows[a] += st.s[a + kE * b];
      cols[b] += st.s[a + kE * b];
    }
  }
  double e = st.wz2;
  for (int l = 0; l < kE; ++l) {
    for (int j = 0; j < g; ++j) {
      double x = book[(l * g + j) * 2], y = book[(l * g + j) * 2 + 1];
      double r1re = st.r1[l * 2 * g + 2 * j], r1im = st.r1[l * 2 * g + 2 * j + 1];
      double r2re = st.r2[l * 2 * g + 2 * j], r2im = st.r2[l * 2 * g + 2 * j + 1];
      e -= 2 * (r1re * x + r1im * y - r2re * y + r2im * x);
      e += (rows[l] + cols[l]) * (x * x + y * y);
    }
  }
  for (int b = 0; b < kE; ++b) {
    for (int a = 0; a < kE; ++a) {
      double w = st.s[a + kE * b];
      if (w == 0) continue;
      double cross = 0;
      for (int j = 0; j < g; ++j) {
        cross += book[(a * g + j) * 2 + 1] * book[(b * g + j) * 2] -
                 book[(a * g + j) * 2] * book[(b * g + j) * 2 + 1];
      }
      e += 2 * w * cross;
    }
  }
  return e;
}

void MStep(const EmStats& st, int g, double lambda, std::vector<double>* book) {
  const int m = 2 * kE;
  std::vector<double> a(m * m, 0.0), rhs(size_t{1} * m * g);
  for (int l = 0; l < kE; ++l) {
    double diag = lambda;
    for (int o = 0; o < kE; ++o) diag += st.s[l + kE * o] + st.s[o + kE * l];
    a[l * m + l] = diag;
    a[(kE + l) * m + kE + l] = diag;
    for (int o = 0; o < kE; ++o) {
      double k = st.s[l + kE * o] - st.s[o + kE * l];  // (S - S^T)_lo
      a[l * m + kE + o] = -k;
      a[(kE + l) * m + o] = k;
    }
    for (int j = 0; j < g; ++j) {
      double r1re = st.r1[l * 2 * g + 2 * j], r1im = st.r1[l * 2 * g + 2 * j + 1];
      double r2re = st.r2[l * 2 * g + 2 * j], r2im = st.r2[l * 2 * g + 2 * j + 1];
      rhs[l * g + j] = r1re + r2im + lambda * (*book)[(l * g + j) * 2];
      rhs[(kE + l) * g + j] = r1im - r2re + lambda * (*book)[(l * g + j) * 2 + 1];
    }
  }
  if (!CholeskySolve(&a, m, &rhs, g)) return;  // keep the old book (cannot happen: spd)
  for (int l = 0; l < kE; ++l) {
    for (int j = 0; j < g; ++j) {
      (*book)[(l * g + j) * 2] = rhs[l * g + j];
      (*book)[(l * g + j) * 2 + 1] = rhs[(kE + l) * g + j];
    }
  }
}

void EStep(const float* targets, int n, int g, const std::vector<double>& book, double temp,
           EmStats* st) {
  const int dim = 2 * g;
  std::vector<float> bookf(book.size()), base(kC), u(size_t{1} * n * 2 * kE);
  for (size_t i = 0; i < book.size(); ++i) bookf[i] = static_cast<float>(book[i]);
  CentreNorms(bookf.data(), g, g, base.data());
  ProjectOnEntries(targets, n, bookf.data(), g, g, u.data());
  double scale = 0;
  for (size_t i = 0; i < size_t{1} * n * dim; ++i) scale += double{targets[i]} * targets[i];
  scale = n > 0 ? scale / n : 0;
  st->s.assign(kC, 0.0);
  st->r1.assign(size_t{1} * kE * dim, 0.0);
  st->r2.assign(size_t{1} * kE * dim, 0.0);
  st->wz2 = st->free_energy = st->expected = st->hard = 0;
  std::vector<int> cand;
  std::vector<double> dist, weight, wa(kE), wb(kE);
  alignas(32) float excess[kC];
  float rowmin[kE];
  for (int i = 0; i < n; ++i) {
    const float* z = targets + size_t{1} * i * dim;
    double z2 = 0;
    for (int k = 0; k < dim; ++k) z2 += double{z[k]} * z[k];
    float emin = AllExcess(base.data(), &u[size_t{1} * i * 2 * kE], excess, rowmin);
    // float prefilter with a margin far above float rounding, then exact float64 distances.
    float margin = static_cast<float>(kCutoff * temp + 1e-5 * (z2 + scale));
    Candidates(excess, rowmin, emin + margin, &cand);
    dist.resize(cand.size());
    double dmin = std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < cand.size(); ++c) {
      const double* ea = &book[(cand[c] % kE) * dim];
      const double* eb = &book[(cand[c] / kE) * dim];
      double d = 0;
      for (int j = 0; j < g; ++j) {
        double re = z[2 * j] - (ea[2 * j] - eb[2 * j + 1]);
        double im = z[2 * j + 1] - (ea[2 * j + 1] + eb[2 * j]);
        d += re * re + im * im;
      }
      dist[c] = d;
      dmin = std::min(dmin, d);
    }
    double zsum = 0, wd = 0;
    weight.resize(cand.size());
    for (size_t c = 0; c < cand.size(); ++c) {
      double t = (dist[c] - dmin) / temp;
      weight[c] = t < kCutoff ? std::exp(-t) : 0.0;
      zsum += weight[c];
    }
    std::fill(wa.begin(), wa.end(), 0.0);
    std::fill(wb.begin(), wb.end(), 0.0);
    for (size_t c = 0; c < cand.size(); ++c) {
      if (weight[c] == 0) continue;
      double w = weight[c] / zsum;
      wd += w * dist[c];
      st->s[cand[c]] += w;
      wa[cand[c] % kE] += w;
      wb[cand[c] / kE] += w;
    }
    for (int l = 0; l < kE; ++l) {
      if (wa[l] != 0) {
        for (int k = 0; k < dim; ++k) st->r1[l * dim + k] += wa[l] * z[k];
      }
      if (wb[l] != 0) {
        for (int k = 0; k < dim; ++k) st->r2[l * dim + k] += wb[l] * z[k];
      }
    }
    st->wz2 += z2;
    st->free_energy += dmin - temp * std::log(zsum);
    st->expected += wd;
    st->hard += dmin;
  }
}

EmResult TrainCommutativeBook(const float* targets, int n, int g, const EmOptions& options) {
  const int dim = 2 * g;
  EmResult result;
  std::mt19937_64 rng(options.seed);
  double norm2 = 0;
  for (size_t i = 0; i < size_t{1} * n * dim; ++i) norm2 += double{targets[i]} * targets[i];
  result.mean_norm2 = n > 0 ? norm2 / n : 0;
  std::vector<double> book = InitialBook(targets, n, g, rng);
  double best_mse = std::numeric_limits<double>::infinity();
  const double scale = std::max(result.mean_norm2, 1e-30);
  const double lambda = EmLambda(n);
  EmStats st;
  for (int step = 0; step <= options.steps; ++step) {
    double frac = options.steps > 1 ? std::min(1.0, step / double(options.steps - 1)) : 0.0;
    double temp = scale * options.temp_start *
                  std::pow(options.temp_end / options.temp_start, frac);
    EStep(targets, n, g, book, temp, &st);
    EmStep rec;
    rec.temperature = temp;
    if (n > 0) {
      rec.free_energy = st.free_energy / n;
      rec.expected_before = st.expected / n;
      rec.hard_mse = st.hard / n;
    }
    if (rec.hard_mse < best_mse || result.book.empty()) {
      best_mse = rec.hard_mse;
      result.book.assign(book.begin(), book.end());
    }
    if (step < options.steps && n > 0) {
      MStep(st, g, lambda, &book);
      rec.expected_after = ExpectedDistortion(st, book, g) / n;
    } else {
      rec.expected_after = rec.expected_before;
    }
    result.steps.push_back(rec);
  }
  result.hard_mse = best_mse;
  return result;
}

std::vector<double> InitialBook(const float* targets, int n, int g, std::mt19937_64& rng) {
  // entry e = (1 - i)/2 u_e for 64 seeded targets u_e, so centre (e, e) is u_e itself.
  std::vector<double> book(size_t{1} * kE * 2 * g, 0.0);
  if (n == 0) return book;
  std::vector<int> seeds = SeedRows(targets, n, 2 * g, rng);
  for (int e = 0; e < kE; ++e) {
    const float* u = targets + size_t{1} * seeds[e] * 2 * g;
    for (int j = 0; j < g; ++j) {
      book[(e * g + j) * 2] = 0.5 * (double{u[2 * j]} + u[2 * j + 1]);
      book[(e * g + j) * 2 + 1] = 0.5 * (double{u[2 * j + 1]} - u[2 * j]);
    }
  }
  return book;
}

double EmLambda(int n) { return 1e-9 * std::max(1.0, n / 32.0); }

}  // namespace vqserve::commvq
