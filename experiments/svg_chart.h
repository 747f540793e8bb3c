// Minimal inline SVG charts for the HTML report (no scripts, no external assets): bars with
// error bars, lines over draft positions, a scatter with the y = x diagonal, and a heat map.
#pragma once
#include <string>
#include <vector>

namespace specmoe::exp {

std::string xml_escape(const std::string& s);

struct BarDatum {
  std::string label;
  double value = 0.0;
  double err = 0.0;  // half-width of the error bar (NaN/0: none)
};
// reference: a dashed horizontal line (e.g. speedup 1.0); NaN for none.
std::string svg_bar_chart(const std::string& title, const std::vector<BarDatum>& bars, const std::string& y_label,
                          double reference);

struct LineSeries {
  std::string name;
  std::vector<double> y;  // x = 1, 2, ... ; NaN points are skipped
};
std::string svg_line_chart(const std::string& title, const std::vector<LineSeries>& series, const std::string& x_label,
                           const std::string& y_label, double y_max);

struct ScatterPoint {
  std::string label;
  double x = 0.0, y = 0.0;
};
std::string svg_scatter(const std::string& title, const std::vector<ScatterPoint>& points, const std::string& x_label,
                        const std::string& y_label);

// values[row][col] >= 0; colour scales from white (0) to dark red (max).
std::string svg_heatmap(const std::string& title, const std::vector<std::vector<double>>& values,
                        const std::string& row_label, const std::string& col_label);

}  // namespace specmoe::exp
