#ifndef VQSERVE_RUNTIME_CALIBRATION_COMMVQ_EM_H_
#define VQSERVE_RUNTIME_CALIBRATION_COMMVQ_EM_H_

// em training of one round's rope-commutative key codebook for one group of g pairs.
//
// centres are zeta_A + i zeta_B (A, B < 64) per pair (runtime/kv/commvq_math.h). the e-step gives
// every target n the soft assignment w_nc = softmax_c(-d_nc / T) over the 4096 centres (d the
// squared l2 distance over the group); the m-step minimizes sum_nc w_nc d_nc over the 64 complex
// entries of each pair exactly: the normal equations
//   (diag(r + c) + i (S - S^T)) zeta = R1 - i R2,
// with S_AB = sum_n w_n,AB, r and c its row and column sums, R1_A = sum_n sum_B w_n,AB z_n and
// R2_B = sum_n sum_A w_n,AB z_n, solved as a 128 x 128 real spd system (cholesky, float64) with a
// tiny proximal term that keeps unused entries in place. at a fixed temperature the free energy
// F_T = -T sum_n log sum_c exp(-d_nc / T) therefore never increases.

#include <cstdint>
#include <random>
#include <vector>

namespace vqserve::commvq {

struct EmOptions {
  int steps = 100;
  // temperature relative to the mean squared norm of the targets, annealed exponentially.
  double temp_start = 1e-3, temp_end = 1e-5;
  uint64_t seed = 1;
};

// one em step; losses are means per target.
struct EmStep {
  double temperature = 0;      // absolute temperature of the e-step
  double free_energy = 0;      // F_T / n at the step's codebook (before its m-step)
  double expected_before = 0;  // sum w d / n with the step's weights, before the m-step
  double expected_after = 0;   // the same weights, after the m-step
  double hard_mse = 0;         // mean min_c d_nc at the step's codebook
};

struct EmResult {
  std::vector<float> book;     // (64 entries, g pairs, 2 = x, y): the best codebook seen
  std::vector<EmStep> steps;   // steps + 1 entries (the last has no m-step)
  double hard_mse = 0;         // of `book`
  double mean_norm2 = 0;       // mean |z|^2 of the targets
};

// trains a codebook for targets (n, 2g) of interleaved pairs; deterministic for options.seed.
EmResult TrainCommutativeBook(const float* targets, int n, int g, const EmOptions& options);

// the pieces of one em step, for tests. books here are (64, g, 2) float64.
struct EmStats {
  std::vector<double> s;   // (4096): total weight of centre A + 64 B
  std::vector<double> r1;  // (64, 2g): sum_n (sum_B w_n,AB) z_n for A
  std::vector<double> r2;  // (64, 2g): sum_n (sum_A w_n,AB) z_n for B
  double wz2 = 0;          // sum_n |z_n|^2
  double free_energy = 0;  // sum_n -T log sum_c exp(-d_nc / T)
  double expected = 0;     // sum_n sum_c w_nc d_nc
  double hard = 0;         // sum_n min_c d_nc
};
// soft assignment at absolute temperature `temp` (weights below exp(-30) of the best dropped).
void EStep(const float* targets, int n, int g, const std::vector<double>& book, double temp,
           EmStats* stats);
// book <- argmin of sum_nc w_nc d_nc + lambda |book - book_old|^2 (exact, float64).
void MStep(const EmStats& stats, int g, double lambda, std::vector<double>* book);
// sum_nc w_nc d_nc for the statistics' weights and `book`.
double ExpectedDistortion(const EmStats& stats, const std::vector<double>& book, int g);
// k-means++-seeded initial book: entry e = (1 - i)/2 u_e, so centre (e, e) is target u_e.
std::vector<double> InitialBook(const float* targets, int n, int g, std::mt19937_64& rng);
// the proximal weight the trainer uses for n targets.
double EmLambda(int n);

}  // namespace vqserve::commvq

#endif  // VQSERVE_RUNTIME_CALIBRATION_COMMVQ_EM_H_
