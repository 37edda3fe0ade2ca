#include "runtime/calibration/symmetric_eigen.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vqserve {

SymmetricEigen DecomposeSymmetric(const std::vector<double>& a_in, int n) {
  std::vector<double> a = a_in;
  std::vector<double> v(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i) * n + i] = 1.0;
  auto at = [n](std::vector<double>& m, int r, int c) -> double& { return m[static_cast<size_t>(r) * n + c]; };
  double norm = 0;
  for (double x : a) norm += x * x;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) off += at(a, p, q) * at(a, p, q);
    }
    if (off <= 1e-30 * norm || off == 0) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        const double apq = at(a, p, q);
        if (apq == 0) continue;
        // the rotation (c, s) that zeroes a[p][q] (numerical recipes' stable form).
        const double theta = (at(a, q, q) - at(a, p, p)) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // columns p, q
          const double akp = at(a, k, p), akq = at(a, k, q);
          at(a, k, p) = c * akp - s * akq;
          at(a, k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {  // rows p, q
          const double apk = at(a, p, k), aqk = at(a, q, k);
          at(a, p, k) = c * apk - s * aqk;
          at(a, q, k) = s * apk + c * aqk;
        }
        for (int k = 0; k < n; ++k) {
          const double vkp = at(v, k, p), vkq = at(v, k, q);
          at(v, k, p) = c * vkp - s * vkq;
          at(v, k, q) = s * vkp + c * vkq;
        }
      }
    }
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return at(a, x, x) > at(a, y, y); });
  SymmetricEigen r;
  r.values.resize(n);
  r.vectors.resize(static_cast<size_t>(n) * n);
  for (int j = 0; j < n; ++j) {
    r.values[j] = at(a, order[j], order[j]);
    for (int k = 0; k < n; ++k) r.vectors[static_cast<size_t>(k) * n + j] = at(v, k, order[j]);
  }
  return r;
}

}  // namespace vqserve
