// MXFP4 blocks (the OCP Microscaling format's FP4, as ggml lays it out, ggml-common.h
// block_mxfp4): {u8 e; u8 qs[16]}, 32 elements, byte j of qs holding elements j (low nibble) and
// j + 16 (high nibble). A nibble is an E2M1 number: sign bit 3, and the magnitudes 0, 0.5, 1,
// 1.5, 2, 3, 4, 6 by its low three bits; e is an E8M0 scale 2^(e - 127). ggml keeps the E2M1
// values doubled as integers (kMxfp4Values below) and halves the scale: x = kMxfp4Values[q] *
// 2^(e - 128), exact in float for every e (2^(e - 128) is a normal or subnormal float).
// gpt-oss's experts are stored so.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_internal.h"

namespace specmoe::kernels::cpu::detail {

void dequant_mxfp4(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 17, y += QK) {
    const float d = mxfp4_scale(src[0]);
    const uint8_t* qs = src + 1;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kMxfp4Values[qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kMxfp4Values[qs[j] >> 4]);
    }
  }
}

void quant_mxfp4(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 17) {
    // The shared exponent puts the block's largest magnitude in the top binade of the doubled
    // values (its value / 2^(e - 128) in [8, 16), below the largest code 12 when it is at most
    // 12): e = floor(log2(amax)) - 3 + 128, clamped to the byte; each element then takes the
    // nearest code (ties to the smaller magnitude).
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(x[j]));
    int e = 0;
    if (amax > 0.0f && std::isfinite(amax)) e = std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 3 + 128, 1, 254);
    dst[0] = static_cast<uint8_t>(e);
    const float id = amax > 0.0f ? 1.0f / mxfp4_scale(static_cast<uint8_t>(e)) : 0.0f;
    uint8_t q[QK];
    for (int j = 0; j < QK; ++j) {
      const float t = x[j] * id;
      const float a = std::fabs(t);
      int best = 0;
      float err = std::fabs(a - static_cast<float>(kMxfp4Values[0]));
      for (int c = 1; c < 8; ++c) {
        const float ec = std::fabs(a - static_cast<float>(kMxfp4Values[c]));
        if (ec < err) best = c, err = ec;
      }
      q[j] = static_cast<uint8_t>(best | (t < 0.0f && best != 0 ? 8 : 0));
    }
    for (int j = 0; j < 16; ++j) dst[1 + j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  }
}

}  // namespace specmoe::kernels::cpu::detail
