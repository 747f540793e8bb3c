// Summary statistics for reports: mean, sample standard deviation and the 95% confidence
// interval of the mean with Student's t distribution (n-1 degrees of freedom), plus the
// speculative-decoding formulas of Leviathan et al. 2023 (alpha fit, Thm 3.8 speedup).
#pragma once
#include <span>
#include <vector>

#include "experiments/run_result.h"

namespace specmoe::exp {

// Mean, sd and 95% CI half-width over the finite values (NaNs are skipped; n counts the rest).
Estimate estimate_mean(std::span<const double> values);

// The p-quantile of Student's t distribution with df degrees of freedom (df >= 1, 0 < p < 1),
// by bisection on the CDF (regularized incomplete beta, continued fraction).
double student_t_quantile(double p, double df);
double student_t_cdf(double t, double df);

// The i.i.d. acceptance probability a with (1 - a^(g+1)) / (1 - a) = tau (Leviathan et al. 2023,
// eq. 1); clamped to [0, 1] when tau is outside [1, g+1]. NaN for non-finite input or g < 1.
double alpha_fit(double tau, double g);

// Leviathan et al. 2023, Thm 3.8: expected walltime improvement
// (1 - a^(g+1)) / ((1 - a)(g c + 1)); the a -> 1 limit is (g+1) / (g c + 1).
double predicted_speedup(double a, double g, double c);

// The median of the finite values (NaN when there are none).
double median(std::vector<double> values);

}  // namespace specmoe::exp
