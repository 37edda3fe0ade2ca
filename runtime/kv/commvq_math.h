#ifndef VQSERVE_RUNTIME_KV_COMMVQ_MATH_H_
#define VQSERVE_RUNTIME_KV_COMMVQ_MATH_H_

// shared arithmetic of the commvq codec and trainer: commutative centres, nearest-code search,
// value k-means search, 12-bit code packing and rope frequencies.
//
// a key pair (k_2j, k_2j+1) is the complex number z = k_2j + i k_2j+1. a commutative entry
// [[x, y], [-y, x]] is the complex number x + i y; code (A, B) reconstructs the pair as the row
// vector e1^T C_A + e2^T C_B = (x_A - y_B, y_A + x_B), i.e. the complex number
// zeta_A + i zeta_B. rope at position p multiplies z by exp(i p theta_j), which commutes with
// every entry.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vqserve::commvq {

// rope frequencies theta_j = theta^(-2j/head_dim), j < head_dim/2, as the model's rope uses
// them (adjacent pairs, llama.cpp "normal").
std::vector<double> RopeFrequencies(int head_dim, float rope_theta);

// |centre(A, B)|^2 over a group of g pairs, for all A + 64 B.
// book: (64 entries, pair_stride pairs, 2) pointing at the group's first pair. base: 4096.
void CentreNorms(const float* book, int pair_stride, int g, float* base);

// projections of targets on the entries: for each row n, u[n][A] = Re<z, zeta_A> and
// u[n][64 + B] = Re<z, i zeta_B> (sums over the g pairs).
// z: (n, 2g) rows of interleaved pairs; book as in CentreNorms; u: (n, 128).
void ProjectOnEntries(const float* z, int n, const float* book, int pair_stride, int g,
                      float* u);

// the code A + 64 B minimizing base[c] - 2 u[A] - 2 u[64 + B] (the squared distance less |z|^2);
// its value in *excess.
int NearestCode(const float* base, const float* u, float* excess);

// adds (or subtracts when sign = -1) centre(code) to z (2g floats).
void AddCentre(const float* book, int pair_stride, int g, int code, float sign, float* z);

// nearest of 256 centroids of 8 dims to x (squared l2). centroids: (256, 8).
int NearestValueCentroid(const float* centroids, const float* x);

// 12-bit codes, two in three bytes: byte0 = c0 & 0xff, byte1 = (c0 >> 8) | (c1 & 0xf) << 4,
// byte2 = c1 >> 4 (c0 | c1 << 12, little-endian). n even.
void PackCodes12(const uint16_t* codes, int n, uint8_t* dst);
void UnpackCodes12(const uint8_t* src, int n, uint16_t* codes);

}  // namespace vqserve::commvq

#endif  // VQSERVE_RUNTIME_KV_COMMVQ_MATH_H_
