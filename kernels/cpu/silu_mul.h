#ifndef VQSERVE_KERNELS_CPU_SILU_MUL_H_
#define VQSERVE_KERNELS_CPU_SILU_MUL_H_

namespace vqserve::cpu {

// swiglu: out[r][i] = silu(gate_up[r][i]) · gate_up[r][f + i].
// gate_up is (n, 2f): gate in the first f columns, up in the last f; out is (n, f).
void SiluMul(const float* gate_up, float* out, int n, int f);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_SILU_MUL_H_
