#ifndef VQSERVE_RUNTIME_CALIBRATION_KEY_PCA_H_
#define VQSERVE_RUNTIME_CALIBRATION_KEY_PCA_H_

#include <cstdint>
#include <vector>

namespace vqserve {

// the key code space of vecinfer's -pca option, for one kv head: y = (k - mean) T, where T's
// columns are the principal axes of the keys after whitening by the queries' second moment
// E[q q^T]. a squared error in y is then the expected squared error of the score q . k, and the
// axes come in descending variance, so consecutive axes grouped into sub-vectors of different
// sizes (one 2^code_bits codebook each) spend the bits where the scores need them.
struct KeyPca {
  std::vector<float> mean;       // (D)
  std::vector<float> transform;  // (D, D): y_j = sum_i (k_i - mean_i) transform[i * D + j]
  std::vector<float> inverse;    // (D, D): k_i = mean_i + sum_j y_j inverse[j * D + i]
  std::vector<double> variances; // (D) variance of each y_j, descending
};

// fits KeyPca on n keys of D dims (key t at keys + t * stride) for queries of second moment
// q_moment (D, D). directions the queries never take are regularised to 1e-3 of the mean
// query energy, which bounds `inverse`.
KeyPca FitKeyPca(const float* keys, int64_t n, int64_t stride, const std::vector<double>& q_moment,
                 int D);

// E[R(s) m R(s)^T] (R(s): cpu::ApplyRope's rotation by position s) over `samples` shifts s
// uniform in [0, context) (seeded): the second moment (D, D) of queries of moment m once spread
// over the context's positions.
std::vector<double> ShiftAveragedMoment(const std::vector<double>& m, int D, const std::vector<float>& freqs,
                                        int context, int samples, uint64_t seed);

// splits axes of the given descending variances into exactly num_subspaces runs of consecutive
// axes (sizes 1..max_dim, summing to the axis count) that minimise the high-rate distortion of
// a 2^code_bits codebook per run: sum over runs of d * geomean(variances) * 2^(-2 code_bits / d).
std::vector<int32_t> SplitAxes(const std::vector<double>& variances, int num_subspaces, int code_bits,
                               int max_dim);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CALIBRATION_KEY_PCA_H_
