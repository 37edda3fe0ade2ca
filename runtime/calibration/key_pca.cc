#include "runtime/calibration/key_pca.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "runtime/calibration/symmetric_eigen.h"

namespace vqserve {

KeyPca FitKeyPca(const float* keys, int64_t n, int64_t stride, const std::vector<double>& q_moment,
                 int D) {
  const size_t DD = static_cast<size_t>(D) * D;
  std::vector<double> mean(D, 0.0), cov(DD, 0.0);
  for (int64_t t = 0; t < n; ++t) {
    for (int i = 0; i < D; ++i) mean[i] += keys[t * stride + i];
  }
  for (double& m : mean) m /= std::max<int64_t>(n, 1);
  std::vector<double> c(D);
  for (int64_t t = 0; t < n; ++t) {
    for (int i = 0; i < D; ++i) c[i] = keys[t * stride + i] - mean[i];
    for (int i = 0; i < D; ++i) {
      for (int j = 0; j <= i; ++j) cov[static_cast<size_t>(i) * D + j] += c[i] * c[j];
    }
  }
  for (int i = 0; i < D; ++i) {
    for (int j = 0; j <= i; ++j) {
      cov[static_cast<size_t>(i) * D + j] /= std::max<int64_t>(n, 1);
      cov[static_cast<size_t>(j) * D + i] = cov[static_cast<size_t>(i) * D + j];
    }
  }
  // R = Sq^(1/2), Ri = R^-1 through Sq's eigen-decomposition.
  SymmetricEigen qe = DecomposeSymmetric(q_moment, D);
  double trace = 0;
  for (double w : qe.values) trace += std::max(w, 0.0);
  const double eps = 1e-3 * trace / D + std::numeric_limits<double>::min();
  std::vector<double> r(DD, 0.0), ri(DD, 0.0);
  for (int e = 0; e < D; ++e) {
    const double w = std::max(qe.values[e], 0.0) + eps;
    const double sw = std::sqrt(w), isw = 1 / sw;
    for (int i = 0; i < D; ++i) {
      const double ui = qe.vectors[static_cast<size_t>(i) * D + e];
      for (int j = 0; j < D; ++j) {
        const double uu = ui * qe.vectors[static_cast<size_t>(j) * D + e];
        r[static_cast<size_t>(i) * D + j] += sw * uu;
        ri[static_cast<size_t>(i) * D + j] += isw * uu;
      }
    }
  }
  // whitened key covariance R cov R and its principal axes V: T = R V, T^-1 = V^T Ri.
  auto matmul = [D, DD](const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> out(DD, 0.0);
    for (int i = 0; i < D; ++i) {
      for (int k = 0; k < D; ++k) {
        const double aik = a[static_cast<size_t>(i) * D + k];
        for (int j = 0; j < D; ++j) out[static_cast<size_t>(i) * D + j] += aik * b[static_cast<size_t>(k) * D + j];
      }
    }
    return out;
  };
  std::vector<double> w = matmul(matmul(r, cov), r);
  for (int i = 0; i < D; ++i) {  // symmetric up to rounding; make it exactly so
    for (int j = 0; j < i; ++j) {
      const double s = 0.5 * (w[static_cast<size_t>(i) * D + j] + w[static_cast<size_t>(j) * D + i]);
      w[static_cast<size_t>(i) * D + j] = w[static_cast<size_t>(j) * D + i] = s;
    }
  }
  SymmetricEigen ke = DecomposeSymmetric(w, D);
  std::vector<double> t = matmul(r, ke.vectors);
  std::vector<double> vt(DD);
  for (int i = 0; i < D; ++i) {
    for (int j = 0; j < D; ++j) vt[static_cast<size_t>(i) * D + j] = ke.vectors[static_cast<size_t>(j) * D + i];
  }
  std::vector<double> inv = matmul(vt, ri);
  KeyPca p;
  p.mean.assign(mean.begin(), mean.end());
  p.transform.assign(t.begin(), t.end());
  p.inverse.assign(inv.begin(), inv.end());
  p.variances.resize(D);
  for (int i = 0; i < D; ++i) p.variances[i] = std::max(ke.values[i], 0.0);
  return p;
}

std::vector<double> ShiftAveragedMoment(const std::vector<double>& m, int D, const std::vector<float>& freqs,
                                        int context, int samples, uint64_t seed) {
  const int pairs = std::min<int>(freqs.size(), D / 2);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, std::max(context, 1));
  std::vector<double> out(m.size(), 0.0), r(m.size());
  std::vector<double> c(D, 1.0), s(D, 0.0);  // per dim: cos / sin of its pair (1 / 0 unrotated)
  for (int n = 0; n < samples; ++n) {
    const double shift = uniform(rng);
    for (int i = 0; i < pairs; ++i) {
      c[2 * i] = c[2 * i + 1] = std::cos(shift * freqs[i]);
      s[2 * i] = s[2 * i + 1] = std::sin(shift * freqs[i]);
    }
    // (R m)[a][b], then (R m R^T)[a][b]; R's row a mixes a with its pair partner a ^ 1.
    auto rot = [&](int a, auto get) {
      if (a / 2 >= pairs) return get(a);
      return (a % 2 == 0) ? c[a] * get(a) - s[a] * get(a + 1) : s[a] * get(a - 1) + c[a] * get(a);
    };
    for (int a = 0; a < D; ++a) {
      for (int b = 0; b < D; ++b) r[a * D + b] = rot(a, [&](int i) { return m[i * D + b]; });
    }
    for (int a = 0; a < D; ++a) {
      for (int b = 0; b < D; ++b) out[a * D + b] += rot(b, [&](int j) { return r[a * D + j]; });
    }
  }
  for (double& x : out) x /= std::max(samples, 1);
  return out;
}

std::vector<int32_t> SplitAxes(const std::vector<double>& variances, int num_subspaces, int code_bits,
                               int max_dim) {
  const int n = static_cast<int>(variances.size());
  const double floor = std::max(variances.empty() ? 0.0 : variances[0], 1.0) * 1e-12;
  std::vector<double> logsum(n + 1, 0.0);
  for (int i = 0; i < n; ++i) logsum[i + 1] = logsum[i] + std::log(std::max(variances[i], floor));
  auto cost = [&](int i, int j) {  // run of axes [i, j)
    const int d = j - i;
    return d * std::exp((logsum[j] - logsum[i]) / d) * std::exp2(-2.0 * code_bits / d);
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[m][j]: axes [0, j) in m runs; from[m][j]: where the last run starts.
  std::vector<std::vector<double>> best(num_subspaces + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> from(num_subspaces + 1, std::vector<int>(n + 1, -1));
  best[0][0] = 0;
  for (int m = 1; m <= num_subspaces; ++m) {
    for (int j = m; j <= n; ++j) {
      for (int i = std::max(m - 1, j - max_dim); i < j; ++i) {
        if (best[m - 1][i] == inf) continue;
        const double c = best[m - 1][i] + cost(i, j);
        if (c < best[m][j]) {
          best[m][j] = c;
          from[m][j] = i;
        }
      }
    }
  }
  std::vector<int32_t> dims;
  if (best[num_subspaces][n] == inf) return dims;  // not splittable (n < runs or > runs * max_dim)
  for (int m = num_subspaces, j = n; m > 0; --m) {
    const int i = from[m][j];
    dims.push_back(j - i);
    j = i;
  }
  std::reverse(dims.begin(), dims.end());
  return dims;
}

}  // namespace vqserve
