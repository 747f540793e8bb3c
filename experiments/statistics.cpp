// Summary statistics and the speculative-decoding speedup model.
#include "experiments/statistics.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "verify/metrics.h"

namespace specmoe::exp {
namespace {

// Continued fraction for the incomplete beta function (modified Lentz's method; the expansion of
// Abramowitz & Stegun 26.5.8).
double beta_continued_fraction(double a, double b, double x) {
  const double tiny = 1e-300, eps = 1e-15;
  double qab = a + b, qap = a + 1.0, qam = a - 1.0;
  double c = 1.0, d = 1.0 - qab * x / qap;
  if (std::fabs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < eps) break;
  }
  return h;
}

// Regularized incomplete beta I_x(a, b).
double incomplete_beta(double a, double b, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  double ln_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                    b * std::log1p(-x);
  double front = std::exp(ln_front);
  // The continued fraction converges fast for x < (a+1)/(a+b+2); use the symmetry otherwise.
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_continued_fraction(a, b, x) / a;
  return 1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b;
}

}  // namespace

double student_t_cdf(double t, double df) {
  double x = df / (df + t * t);
  double tail = 0.5 * incomplete_beta(df / 2.0, 0.5, x);  // P(T > |t|)
  return t >= 0 ? 1.0 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0.0 && p < 1.0) || !(df >= 1.0)) return kNaN;
  if (p == 0.5) return 0.0;
  if (p < 0.5) return -student_t_quantile(1.0 - p, df);
  double lo = 0.0, hi = 1.0;
  while (student_t_cdf(hi, df) < p && hi < 1e12) hi *= 2.0;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Estimate estimate_mean(std::span<const double> values) {
  Estimate e;
  double sum = 0.0;
  for (double v : values) {
    if (std::isfinite(v)) {
      sum += v;
      ++e.n;
    }
  }
  if (e.n == 0) return e;
  e.mean = sum / e.n;
  if (e.n < 2) return e;
  double ss = 0.0;
  for (double v : values)
    if (std::isfinite(v)) ss += (v - e.mean) * (v - e.mean);
  e.sd = std::sqrt(ss / (e.n - 1));
  e.ci95 = student_t_quantile(0.975, e.n - 1) * e.sd / std::sqrt(static_cast<double>(e.n));
  return e;
}

// Both formulas are verify's (the decoding loop's Metrics use the same ones); these wrappers add
// the report's convention of NaN for unknown input.
double alpha_fit(double tau, double g) {
  if (!std::isfinite(tau) || !std::isfinite(g) || g < 1.0) return kNaN;
  return verify::fit_alpha(tau, static_cast<int>(g));
}

double predicted_speedup(double a, double g, double c) {
  if (!std::isfinite(a) || !std::isfinite(g) || !std::isfinite(c)) return kNaN;
  return verify::speedup_model(a, static_cast<int>(g), c);
}

double median(std::vector<double> values) {
  std::erase_if(values, [](double v) { return !std::isfinite(v); });
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace specmoe::exp
