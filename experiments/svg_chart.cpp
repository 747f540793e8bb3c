// Inline SVG charts. Coordinates in SVG user units (pixels); the plot area is inset by fixed
// margins for the axes and labels.
#include "experiments/svg_chart.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace specmoe::exp {
namespace {

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kPaletteSize = 10;

// A "nice" axis maximum: 1, 2, 2.5 or 5 times a power of ten, at least v.
double nice_ceiling(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1.0;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

std::string svg_open(int w, int h, const std::string& title) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                     "font-family=\"sans-serif\" font-size=\"11\" role=\"img\"><title>{2}</title>"
                     "<text x=\"{3}\" y=\"16\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">{2}</text>",
                     w, h, xml_escape(title), w / 2);
}

// Y axis with 5 ticks from 0 to y_max; plot area (x0, y0) top-left, (x1, y1) bottom-right.
std::string y_axis(double x0, double y0, double x1, double y1, double y_max, const std::string& label) {
  std::string s;
  for (int i = 0; i <= 5; ++i) {
    double v = y_max * i / 5.0;
    double y = y1 - (y1 - y0) * i / 5.0;
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>", x0, y, x1, y);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>", x0 - 4, y + 4, v);
  }
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>", x0, y0, y1);
  s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333\"/>", x0, y1, x1, y1);
  s += fmt::format("<text transform=\"translate(14,{:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
                   (y0 + y1) / 2, xml_escape(label));
  return s;
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg_bar_chart(const std::string& title, const std::vector<BarDatum>& bars, const std::string& y_label,
                          double reference) {
  const double bar_w = 28, gap = 14, x0 = 60, y0 = 30, plot_h = 220;
  const int w = static_cast<int>(x0 + 20 + std::max<size_t>(bars.size(), 1) * (bar_w + gap));
  const int h = static_cast<int>(y0 + plot_h + 110);
  double vmax = std::isfinite(reference) ? reference : 0.0;
  for (const auto& b : bars)
    if (std::isfinite(b.value)) vmax = std::max(vmax, b.value + (std::isfinite(b.err) ? b.err : 0.0));
  vmax = nice_ceiling(vmax * 1.05);
  double y1 = y0 + plot_h, x1 = w - 10;
  auto Y = [&](double v) { return y1 - plot_h * std::clamp(v / vmax, 0.0, 1.0); };
  std::string s = svg_open(w, h, title) + y_axis(x0, y0, x1, y1, vmax, y_label);
  for (size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    double x = x0 + gap / 2 + i * (bar_w + gap);
    if (std::isfinite(b.value)) {
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{}: {:.4g}</title></rect>",
                       x, Y(b.value), bar_w, y1 - Y(b.value), kPalette[i % kPaletteSize], xml_escape(b.label), b.value);
      if (std::isfinite(b.err) && b.err > 0) {
        double cx = x + bar_w / 2, top = Y(b.value + b.err), bot = Y(b.value - b.err);
        s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#000\"/>"
                         "<line x1=\"{3:.1f}\" y1=\"{1:.1f}\" x2=\"{4:.1f}\" y2=\"{1:.1f}\" stroke=\"#000\"/>"
                         "<line x1=\"{3:.1f}\" y1=\"{2:.1f}\" x2=\"{4:.1f}\" y2=\"{2:.1f}\" stroke=\"#000\"/>",
                         cx, top, bot, cx - 5, cx + 5);
      }
    }
    s += fmt::format("<text transform=\"translate({:.1f},{:.1f}) rotate(45)\">{}</text>", x + bar_w / 2, y1 + 12,
                     xml_escape(b.label));
  }
  if (std::isfinite(reference))
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>",
                     x0, Y(reference), x1, Y(reference));
  return s + "</svg>";
}

std::string svg_line_chart(const std::string& title, const std::vector<LineSeries>& series, const std::string& x_label,
                           const std::string& y_label, double y_max) {
  size_t n = 0;
  for (const auto& s : series) n = std::max(n, s.y.size());
  const double x0 = 60, y0 = 30, plot_w = 420, plot_h = 220;
  const int w = static_cast<int>(x0 + plot_w + 180), h = static_cast<int>(y0 + plot_h + 50);
  double x1 = x0 + plot_w, y1 = y0 + plot_h;
  auto X = [&](size_t i) { return n <= 1 ? (x0 + x1) / 2 : x0 + 10 + (plot_w - 20) * i / (n - 1.0); };
  auto Y = [&](double v) { return y1 - plot_h * std::clamp(v / y_max, 0.0, 1.0); };
  std::string s = svg_open(w, h, title) + y_axis(x0, y0, x1, y1, y_max, y_label);
  for (size_t i = 0; i < n; ++i)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", X(i), y1 + 14, i + 1);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", (x0 + x1) / 2, y1 + 32,
                   xml_escape(x_label));
  for (size_t k = 0; k < series.size(); ++k) {
    const char* color = kPalette[k % kPaletteSize];
    std::string pts;
    for (size_t i = 0; i < series[k].y.size(); ++i) {
      double v = series[k].y[i];
      if (!std::isfinite(v)) continue;
      pts += fmt::format("{:.1f},{:.1f} ", X(i), Y(v));
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{} position {}: {:.3f}</title></circle>",
                       X(i), Y(v), color, xml_escape(series[k].name), i + 1, v);
    }
    if (!pts.empty()) s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>", pts, color);
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>",
                     x1 + 12, y0 + 14.0 * k, color, x1 + 26, y0 + 14.0 * k + 9, xml_escape(series[k].name));
  }
  return s + "</svg>";
}

std::string svg_scatter(const std::string& title, const std::vector<ScatterPoint>& points, const std::string& x_label,
                        const std::string& y_label) {
  const double x0 = 60, y0 = 30, plot = 260;
  const int w = static_cast<int>(x0 + plot + 180), h = static_cast<int>(y0 + plot + 50);
  double vmax = 1.0;
  for (const auto& p : points) {
    if (std::isfinite(p.x)) vmax = std::max(vmax, p.x);
    if (std::isfinite(p.y)) vmax = std::max(vmax, p.y);
  }
  vmax = nice_ceiling(vmax * 1.05);
  double x1 = x0 + plot, y1 = y0 + plot;
  auto X = [&](double v) { return x0 + plot * std::clamp(v / vmax, 0.0, 1.0); };
  auto Y = [&](double v) { return y1 - plot * std::clamp(v / vmax, 0.0, 1.0); };
  std::string s = svg_open(w, h, title) + y_axis(x0, y0, x1, y1, vmax, y_label);
  for (int i = 0; i <= 5; ++i)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.3g}</text>", X(vmax * i / 5), y1 + 14,
                     vmax * i / 5);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", (x0 + x1) / 2, y1 + 32,
                   xml_escape(x_label));
  s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>",
                   X(0), Y(0), X(vmax), Y(vmax));
  size_t k = 0;
  for (const auto& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    const char* color = kPalette[k % kPaletteSize];
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{}: predicted {:.3f}, measured {:.3f}</title></circle>"
                     "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>",
                     X(p.x), Y(p.y), color, xml_escape(p.label), p.x, p.y, x1 + 12, y0 + 14.0 * k, color, x1 + 26,
                     y0 + 14.0 * k + 9, xml_escape(p.label));
    ++k;
  }
  return s + "</svg>";
}

std::string svg_heatmap(const std::string& title, const std::vector<std::vector<double>>& values,
                        const std::string& row_label, const std::string& col_label) {
  size_t rows = values.size(), cols = 0;
  double vmax = 0.0;
  for (const auto& r : values) {
    cols = std::max(cols, r.size());
    for (double v : r)
      if (std::isfinite(v)) vmax = std::max(vmax, v);
  }
  const double cell = std::clamp(480.0 / std::max<size_t>(cols, 1), 6.0, 28.0);
  const double x0 = 60, y0 = 30;
  const int w = static_cast<int>(x0 + cols * cell + 20), h = static_cast<int>(y0 + rows * cell + 40);
  std::string s = svg_open(w, h, title);
  for (size_t r = 0; r < rows; ++r) {
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", x0 - 4, y0 + r * cell + cell * 0.7, r);
    for (size_t c = 0; c < values[r].size(); ++c) {
      double v = values[r][c];
      double t = vmax > 0 && std::isfinite(v) ? v / vmax : 0.0;
      int g = static_cast<int>(255 - 200 * t), b = static_cast<int>(255 - 220 * t);
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"rgb(255,{},{})\" stroke=\"#fff\">"
                       "<title>{} {}, {} {}: {:.4g}</title></rect>",
                       x0 + c * cell, y0 + r * cell, cell, cell, g, b, xml_escape(row_label), r, xml_escape(col_label), c, v);
    }
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{} (rows: {})</text>", x0 + cols * cell / 2,
                   y0 + rows * cell + 20, xml_escape(col_label), xml_escape(row_label));
  return s + "</svg>";
}

}  // namespace specmoe::exp
