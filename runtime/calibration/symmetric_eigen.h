#ifndef VQSERVE_RUNTIME_CALIBRATION_SYMMETRIC_EIGEN_H_
#define VQSERVE_RUNTIME_CALIBRATION_SYMMETRIC_EIGEN_H_

#include <vector>

namespace vqserve {

// eigen-decomposition of a symmetric n x n matrix (row-major, float64) by cyclic jacobi
// rotations: a = V diag(values) V^T. values in descending order; vectors (n, n) row-major with
// eigenvector j in column j. for the small matrices of calibration (n <= 256).
struct SymmetricEigen {
  std::vector<double> values;
  std::vector<double> vectors;
};
SymmetricEigen DecomposeSymmetric(const std::vector<double>& a, int n);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CALIBRATION_SYMMETRIC_EIGEN_H_
