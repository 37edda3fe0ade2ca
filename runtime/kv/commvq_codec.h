#ifndef VQSERVE_RUNTIME_KV_COMMVQ_CODEC_H_
#define VQSERVE_RUNTIME_KV_COMMVQ_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/kv/commvq_codebooks.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/kv_codec.h"

namespace vqserve {

// how to train commvq codebooks (runtime/calibration/commvq_trainer.h).
struct CommVqOptions {
  int key_rounds = 11;    // residual rounds of 12-bit commutative key codes
  int value_rounds = 2;   // residual rounds of 8-bit codes per 8 value dims (1 bit/element each)
  int em_steps = 100;     // em steps per key round (the named configs use 16)
  uint64_t seed = 1234;
  // em temperature, relative to the mean squared norm of the round's residual; annealed
  // exponentially from temp_start to temp_end over em_steps.
  double temp_start = 1e-3, temp_end = 1e-5;
  int max_vectors = 4096;        // key vectors per (layer, kv head) seen by em
  int max_value_vectors = 8192;  // value vectors per (layer, kv head) seen by k-means
  int kmeans_iters = 16;         // lloyd iterations per value round
  int num_threads = 2;           // (layer, head) jobs trained at once
};

// the options of a named configuration for `shape`: "commvq-2" (about 2 bits per element)
// or "commvq-1" (about 1 bit); key rounds R = round(bits * head_dim / (12 * groups per head)),
// value rounds = bits; em_steps 16 and max_vectors 4096 (tuned: more data beats more steps).
absl::StatusOr<CommVqOptions> CommVqOptionsForName(const std::string& codec_name,
                                                   const KvShape& shape);

// why `books` cannot code `shape` with these rounds; ok when it can.
absl::Status CheckCommVqCodec(const KvShape& shape, const CommVqCodebooks& books,
                              int key_rounds, int value_rounds);

// the commvq codec over the first key_rounds / value_rounds rounds of `books` (rounds are
// trained in sequence, so fewer rounds is a valid coarser codec). null when
// CheckCommVqCodec fails.
std::unique_ptr<KvCodec> MakeCommVqCodec(const KvShape& shape,
                                         std::shared_ptr<const CommVqCodebooks> books,
                                         int key_rounds, int value_rounds);

// bytes of one layer's page slice, and bits per element (k and v averaged, scales included).
size_t CommVqLayerPageBytes(const KvShape& shape, int page_tokens, int key_rounds,
                            int value_rounds);
double CommVqBitsPerElement(const KvShape& shape, int key_rounds, int value_rounds);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_COMMVQ_CODEC_H_
