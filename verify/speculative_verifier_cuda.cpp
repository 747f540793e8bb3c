// Lossless speculative sampling on a CUDA device: the rule of speculative_verifier.cpp run where
// the target's distributions live (kernels/cuda/ops.h speculative_verify), with the uniforms
// drawn on the host from the loop's Rng in the CPU implementation's order: the kernel reports
// how many it consumed and the host stream advances by exactly that many, so CPU and GPU draw the
// same random numbers for the same seed. Per step the host uploads g ids and g + 2 uniforms and
// copies back three ints.
#include "verify/speculative_verifier.h"

#include "base/error.h"

#ifdef SPECMOE_HAVE_CUDA
#include <cstring>

#include "core/backend_cuda.h"
#include "kernels/cuda/ops.h"

namespace specmoe::verify {
namespace {

class SpeculativeVerifierCuda final : public Verifier {
 public:
  std::string name() const override { return "speculative"; }

  VerifyResult verify(const draft::Draft& draft, const core::Rows& p, core::Rng& rng) const override {
    check_verify_inputs("speculative", draft, p);
    if (p.where().kind != Device::Kind::Cuda)
      throw_error(ErrorKind::InvalidArgument, "speculative verifier (cuda): the target's distributions live on {}; "
                  "make the verifier for that device (verify::make_verifier)", p.where().name());
    core::Backend& be = *p.backend;
    kernels::cuda::Context& ctx = core::cuda_context(be);
    const int g = draft.size();
    const int64_t n = p.cols;
    // q where p lives: a draft model on another device (or the host) has its rows copied here.
    const float* q = nullptr;
    if (!draft.one_hot && g > 0) {
      if (draft.q.where() == p.where()) {
        q = draft.q.data;
      } else {
        draft.q.slice(0, g).to_host(q_host_);
        if (q_dev_.backend() != &be) q_dev_ = core::RowBuffer(be);
        float* dst = q_dev_.reserve(g, n);
        be.upload(dst, q_host_.data(), q_host_.size() * sizeof(float));
        q = dst;
      }
    }
    // The g + 2 uniforms the rule may need, from a copy of the stream.
    core::Rng probe = rng;
    std::vector<double> u(static_cast<size_t>(g) + 2);
    for (double& v : u) v = probe.uniform();
    // Device inputs in one buffer: ids [g] int32 | uniforms [g + 2] double | result [3] int32.
    const size_t ids_bytes = (static_cast<size_t>(g) * sizeof(int32_t) + 7) / 8 * 8;
    const size_t u_bytes = u.size() * sizeof(double);
    if (io_.backend() != &be) io_ = core::RowBuffer(be);
    auto* io = reinterpret_cast<uint8_t*>(io_.reserve(1, static_cast<int64_t>((ids_bytes + u_bytes + 16) / 4)));
    host_.resize(ids_bytes + u_bytes);
    std::memcpy(host_.data(), draft.tokens.data(), static_cast<size_t>(g) * sizeof(int32_t));
    std::memcpy(host_.data() + ids_bytes, u.data(), u_bytes);
    be.upload(io, host_.data(), host_.size());
    auto* result = reinterpret_cast<int32_t*>(io + ids_bytes + u_bytes);
    kernels::cuda::speculative_verify(ctx, p.data, q, reinterpret_cast<const int32_t*>(io), g, n,
                                      reinterpret_cast<const double*>(io + ids_bytes), result);
    int32_t out[3];
    be.download(out, result, sizeof out);
    for (int i = 0; i < out[2]; ++i) rng.uniform();  // exactly the uniforms the rule consumed
    return VerifyResult{out[0], out[1]};
  }

 private:
  mutable std::vector<float> q_host_;
  mutable std::vector<uint8_t> host_;
  mutable core::RowBuffer q_dev_, io_;
};

}  // namespace

std::unique_ptr<Verifier> make_speculative_verifier_cuda() { return std::make_unique<SpeculativeVerifierCuda>(); }

}  // namespace specmoe::verify

#else

namespace specmoe::verify {

std::unique_ptr<Verifier> make_speculative_verifier_cuda() {
  throw_error(ErrorKind::Unsupported, "verifier 'speculative' on cuda: this build has no CUDA backend");
}

}  // namespace specmoe::verify

#endif
