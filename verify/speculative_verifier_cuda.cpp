// Lossless speculative sampling on a CUDA device: the rule of speculative_verifier.cpp run where
// the target's distributions live (kernels/cuda/ops.h speculative_verify), with the uniforms
// drawn on the host from the loop's Rng in the CPU implementation's order: the kernel reports
// how many it consumed and the host stream advances by exactly that many, so CPU and GPU draw the
// same random numbers for the same seed. Per step the host uploads g ids and g + 2 uniforms and
// copies back three ints; a tree also uploads its children lists and q row indices and copies
// back its accepted path.
#include "verify/speculative_verifier.h"

#include "base/error.h"

#ifdef SPECMOE_HAVE_CUDA
#include <algorithm>
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
    if (!draft.is_chain()) return verify_tree(draft, p, rng);
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
    return VerifyResult{out[0], out[1], {}};
  }

 private:
  // A draft's q rows where p lives (copied there from another device or the host).
  const float* q_where_p(const draft::Draft& draft, const core::Rows& p, int rows) const {
    if (draft.one_hot || rows == 0) return nullptr;
    if (draft.q.where() == p.where()) return draft.q.data;
    core::Backend& be = *p.backend;
    draft.q.slice(0, rows).to_host(q_host_);
    if (q_dev_.backend() != &be) q_dev_ = core::RowBuffer(be);
    float* dst = q_dev_.reserve(rows, p.cols);
    be.upload(dst, q_host_.data(), q_host_.size() * sizeof(float));
    return dst;
  }

  VerifyResult verify_tree(const draft::Draft& draft, const core::Rows& p, core::Rng& rng) const {
    core::Backend& be = *p.backend;
    kernels::cuda::Context& ctx = core::cuda_context(be);
    const int g = draft.size();
    const int64_t n = p.cols;
    const TreeChildren kids(draft);
    if (draft.without_replacement)
      for (int v = -1; v < g; ++v)
        if (kids.of(v).size() > 64)
          throw_error(ErrorKind::InvalidArgument, "speculative verifier (cuda): node {} has {} children drawn without "
                      "replacement, at most 64", v, kids.of(v).size());
    int rows = 0;
    std::vector<int32_t> q_rows(static_cast<size_t>(g));
    for (int i = 0; i < g; ++i) {
      q_rows[static_cast<size_t>(i)] = draft.q_row_of(i);
      rows = std::max(rows, draft.q_row_of(i) + 1);
    }
    const float* q = q_where_p(draft, p, draft.one_hot ? 0 : rows);
    // The g + 2 uniforms the rule may need, from a copy of the stream.
    core::Rng probe = rng;
    std::vector<double> u(static_cast<size_t>(g) + 2);
    for (double& v : u) v = probe.uniform();
    // Device inputs in one buffer: uniforms [g + 2] double | tokens [g] | q_rows [g] |
    // child_start [g + 2] | child_list [g] | result [3 + g] int32; then the residual [n] double.
    std::vector<int32_t> ints;
    ints.insert(ints.end(), draft.tokens.begin(), draft.tokens.end());
    ints.insert(ints.end(), q_rows.begin(), q_rows.end());
    ints.insert(ints.end(), kids.start.begin(), kids.start.end());
    ints.insert(ints.end(), kids.list.begin(), kids.list.end());
    const size_t u_bytes = u.size() * sizeof(double);
    const size_t ints_bytes = ints.size() * sizeof(int32_t);
    const size_t result_bytes = (3 + static_cast<size_t>(g)) * sizeof(int32_t);
    const size_t residual_at = (u_bytes + ints_bytes + result_bytes + 7) / 8 * 8;
    const size_t total = residual_at + static_cast<size_t>(n) * sizeof(double);
    if (io_.backend() != &be) io_ = core::RowBuffer(be);
    auto* io = reinterpret_cast<uint8_t*>(io_.reserve(1, static_cast<int64_t>((total + 3) / 4)));
    host_.resize(u_bytes + ints_bytes);
    std::memcpy(host_.data(), u.data(), u_bytes);
    std::memcpy(host_.data() + u_bytes, ints.data(), ints_bytes);
    be.upload(io, host_.data(), host_.size());
    const auto* dev_ints = reinterpret_cast<const int32_t*>(io + u_bytes);
    auto* result = reinterpret_cast<int32_t*>(io + u_bytes + ints_bytes);
    kernels::cuda::speculative_tree_verify(ctx, p.data, q, dev_ints + g, dev_ints, dev_ints + 2 * g,
                                           dev_ints + 3 * g + 2, g, draft.without_replacement, n,
                                           reinterpret_cast<const double*>(io), reinterpret_cast<double*>(io + residual_at),
                                           result);
    std::vector<int32_t> out(3 + static_cast<size_t>(g));
    be.download(out.data(), result, result_bytes);
    for (int i = 0; i < out[2]; ++i) rng.uniform();  // exactly the uniforms the rule consumed
    VerifyResult r;
    r.n_accepted = out[0];
    r.next_token = out[1];
    r.path.assign(out.begin() + 3, out.begin() + 3 + out[0]);
    return r;
  }

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
