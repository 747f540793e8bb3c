// report.html is checked against report.json, chart by chart (issue 16, item 6): the page is
// parsed as XML (every element closed, attributes quoted, entities known), and each chart's data
// points are read back from the drawing itself, through its own axis ticks, as well as from the
// point's tooltip, and compared with report.json: bars (speedup and its 95% CI), acceptance by
// draft position, measured decode speedup against the Thm 3.8 prediction, and per-layer expert
// load heat maps. A fake executor gives the runs known, varied metrics.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "experiments/executor.h"
#include "experiments/experiment.h"
#include "test_data.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace specmoe::exp {
namespace {

// ---------------------------------------------------------------------------------------------
// A small strict XML reader for the generated page (HTML's void <meta> is the only leniency).

struct Node {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<Node>> children;
  std::string text;  // character data directly inside, entities decoded

  const Node* child(const std::string& n) const {
    for (const auto& c : children)
      if (c->name == n) return c.get();
    return nullptr;
  }
  void find_all(const std::string& n, std::vector<const Node*>& out) const {
    for (const auto& c : children) {
      if (c->name == n) out.push_back(c.get());
      c->find_all(n, out);
    }
  }
  double num(const std::string& a) const {
    auto it = attrs.find(a);
    if (it == attrs.end()) throw std::runtime_error("<" + name + "> has no attribute " + a);
    return std::stod(it->second);
  }
};

class XmlReader {
 public:
  explicit XmlReader(const std::string& s) : s_(s) {}

  std::unique_ptr<Node> document() {
    auto root = std::make_unique<Node>();
    root->name = "#document";
    skip_space();
    if (s_.compare(i_, 9, "<!DOCTYPE") == 0) i_ = s_.find('>', i_) + 1;
    content(*root, "");
    if (i_ != s_.size()) fail("trailing content");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error(fmt::format("XML error at byte {}: {} near '{}'", i_, why, s_.substr(i_, 40)));
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  std::string decode(const std::string& raw) const {
    std::string out;
    for (size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] != '&') {
        out += raw[k];
        continue;
      }
      const size_t semi = raw.find(';', k);
      if (semi == std::string::npos) fail("unterminated entity");
      const std::string e = raw.substr(k + 1, semi - k - 1);
      if (e == "amp") out += '&';
      else if (e == "lt") out += '<';
      else if (e == "gt") out += '>';
      else if (e == "quot") out += '"';
      else if (!e.empty() && e[0] == '#') {
        const long cp = std::stol(e.substr(1));
        if (cp < 0x80) out += static_cast<char>(cp);
        else if (cp < 0x800) out += static_cast<char>(0xC0 | cp >> 6), out += static_cast<char>(0x80 | (cp & 63));
        else fail("entity out of range");
      } else fail("unknown entity &" + e + ";");
      k = semi;
    }
    return out;
  }
  void content(Node& parent, const std::string& closing) {
    while (i_ < s_.size()) {
      if (s_[i_] != '<') {
        const size_t lt = s_.find('<', i_);
        const std::string raw = s_.substr(i_, lt == std::string::npos ? std::string::npos : lt - i_);
        if (raw.find('>') != std::string::npos) fail("unescaped '>' in text");
        parent.text += decode(raw);
        i_ = lt == std::string::npos ? s_.size() : lt;
        continue;
      }
      if (s_.compare(i_, 2, "</") == 0) {
        const size_t gt = s_.find('>', i_);
        const std::string name = s_.substr(i_ + 2, gt - i_ - 2);
        if (name != closing) fail("</" + name + "> closes <" + closing + ">");
        i_ = gt + 1;
        return;
      }
      ++i_;
      auto node = std::make_unique<Node>();
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-')) node->name += s_[i_++];
      if (node->name.empty()) fail("element without a name");
      while (true) {
        skip_space();
        if (s_.compare(i_, 2, "/>") == 0) {
          i_ += 2;
          break;
        }
        if (s_[i_] == '>') {
          ++i_;
          if (node->name != "meta") content(*node, node->name);  // HTML's void element
          break;
        }
        std::string key;
        while (i_ < s_.size() && s_[i_] != '=' && !std::isspace(static_cast<unsigned char>(s_[i_]))) key += s_[i_++];
        if (s_[i_] != '=' || s_[i_ + 1] != '"') fail("attribute " + key + " is not key=\"value\"");
        const size_t end = s_.find('"', i_ + 2);
        node->attrs[key] = decode(s_.substr(i_ + 2, end - i_ - 2));
        i_ = end + 1;
      }
      parent.children.push_back(std::move(node));
    }
    if (!closing.empty()) fail("<" + closing + "> is never closed");
  }
  const std::string& s_;
  size_t i_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Fake runs with known, varied metrics.

class ChartExecutor : public RunExecutor {
 public:
  std::vector<std::string> drafter_names() const override { return {"ngram"}; }
  std::vector<std::string> verifier_names() const override { return {"speculative"}; }
  void prepare(const ExperimentSpec&, const std::vector<RunSpec>&) override {}
  PromptRecord execute(const ExecutionRequest& req) override {
    PromptRecord r;
    const int n = 12, p = req.prompt_index, rep = std::max(req.repeat, 0);
    r.tokens.assign(n, 5 + p);
    r.n_generated = n;
    r.n_prompt_tokens = 4;
    r.text = "x";
    const double jitter = 1.0 + 0.07 * p - 0.03 * rep;
    r.prefill_s = 0.004;
    r.ttft_ms = 4.5;
    if (req.run->strategy.kind == StrategyKind::Autoregressive) {
      r.wall_s = 0.012 * n * jitter;
      r.n_steps = n - 1;
      r.n_decoded = n - 1;
      return r;
    }
    const int g = req.run->strategy.draft_max;
    const double accept = 0.9 - 0.12 * g + 0.05 * p;  // per position, falling with g
    r.n_steps = 5;
    r.n_decoded = n;
    r.position_drafted.assign(g, r.n_steps);
    r.position_accepted.resize(g);
    for (int i = 0; i < g; ++i)
      r.position_accepted[i] = static_cast<int64_t>(std::lround(r.n_steps * std::pow(std::max(accept, 0.05), i + 1)));
    r.n_drafted = static_cast<int64_t>(g) * r.n_steps;
    for (int64_t a : r.position_accepted) r.n_accepted += a;
    r.wall_s = 0.012 * n * jitter / (1.1 + 0.25 * g - 0.05 * rep * g);
    r.draft_step_ms = 0.8 + 0.1 * g;
    r.target_step_ms = 10.0;
    if (g == 3) {  // an MoE target: 2 layers x 4 experts, loads varying with the prompt
      MoeRecord m;
      m.n_expert = 4;
      m.n_expert_used = 2;
      m.n_moe_layers = 2;
      m.expert_tokens = {{10 + 3 * p, 4, 2 + p, 0}, {6, 6, 5 + rep, 7}};
      m.dropped_tokens = {0, 1};
      r.moe = m;
    }
    return r;
  }
};

std::string write_config(const fs::path& dir) {
  const fs::path toml = dir / "charts.toml";
  std::ofstream(toml) << R"([experiment]
name = "charts"
repeats = 2
warmup = 0
[models.m]
synth = "tiny"
[prompts]
list = ["a", "b", "c"]
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "m"
[[strategy]]
name = "spec"
kind = "speculative"
target = "m"
drafter = "ngram"
[sweep]
draft_max = [1, 2, 3, 4]
)";
  return toml.string();
}

// The y (or x) axis of a chart as a linear map pixel <-> value, from its tick labels.
struct Axis {
  double pixel0 = 0, pixel_max = 0, value_max = 0;
  double value(double pixel) const { return (pixel - pixel0) / (pixel_max - pixel0) * value_max; }
  double pixels_per_unit() const { return std::fabs(pixel_max - pixel0) / value_max; }
};

// Tick labels: <text text-anchor="end"> at (x0 - 4, y + 4) for the y axis, and for the scatter's
// x axis <text text-anchor="middle"> on the line y1 + 14 with numeric content.
Axis y_axis(const Node& svg) {
  std::vector<std::pair<double, double>> ticks;  // (value, pixel)
  for (const auto& c : svg.children)
    if (c->name == "text" && c->attrs.count("text-anchor") && c->attrs.at("text-anchor") == "end")
      ticks.push_back({std::stod(c->text), c->num("y") - 4});
  EXPECT_EQ(ticks.size(), 6u);
  if (ticks.size() < 2) return {};
  EXPECT_EQ(ticks.front().first, 0.0);
  return {ticks.front().second, ticks.back().second, ticks.back().first};
}

Axis x_axis(const Node& svg, double tick_line_y) {
  std::vector<std::pair<double, double>> ticks;
  for (const auto& c : svg.children)
    if (c->name == "text" && c->attrs.count("text-anchor") && c->attrs.at("text-anchor") == "middle" &&
        c->attrs.count("y") && std::fabs(c->num("y") - tick_line_y) < 0.01)
      ticks.push_back({std::stod(c->text), c->num("x")});
  EXPECT_EQ(ticks.size(), 6u);
  if (ticks.size() < 2) return {};
  return {ticks.front().second, ticks.back().second, ticks.back().first};
}

// Coordinates are printed with one decimal (error <= 0.05 px each); a value read back from two
// coordinates is good to 0.1 px over the axis' pixels per unit, plus rounding of the tick labels
// ({:.3g} of a "nice" maximum: exact).
double pixel_tolerance(const Axis& a) { return 0.11 / a.pixels_per_unit(); }

double estimate_mean(const json& e) { return e.at("mean").is_number() ? e.at("mean").get<double>() : NAN; }

class ReportHtml : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = specmoe::testing::scratch_dir() / fmt::format("report_html_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ChartExecutor ex;
    RunOptions o;
    o.progress = false;
    o.output_override = (dir_ / "out").string();
    ASSERT_EQ(run_experiment(write_config(dir_), o, ex), kRunOk);
    std::ifstream jin(dir_ / "out" / "report.json");
    report_ = json::parse(jin);
    std::ifstream hin(dir_ / "out" / "report.html");
    html_.assign((std::istreambuf_iterator<char>(hin)), std::istreambuf_iterator<char>());
    page_ = XmlReader(html_).document();
    std::vector<const Node*> figures;
    page_->find_all("figure", figures);
    for (const Node* f : figures) {
      const Node* svg = f->child("svg");
      ASSERT_NE(svg, nullptr);
      ASSERT_NE(svg->child("title"), nullptr);
      charts_[svg->child("title")->text] = svg;
    }
    for (const auto& r : report_.at("runs")) runs_.push_back(&r);
    ASSERT_EQ(runs_.size(), 5u);  // ar + spec-g1..g4
  }
  void TearDown() override { fs::remove_all(dir_); }

  const Node& chart(const std::string& title) {
    auto it = charts_.find(title);
    if (it == charts_.end()) throw std::runtime_error("no chart titled " + title);
    return *it->second;
  }

  fs::path dir_;
  json report_;
  std::string html_;
  std::unique_ptr<Node> page_;
  std::map<std::string, const Node*> charts_;
  std::vector<const json*> runs_;
};

TEST_F(ReportHtml, ThePageIsWellFormedAndHasEveryChart) {
  EXPECT_EQ(page_->children.size(), 1u);
  EXPECT_EQ(page_->children[0]->name, "html");
  std::vector<std::string> titles;
  for (const auto& [t, svg] : charts_) titles.push_back(t);
  EXPECT_EQ(titles, (std::vector<std::string>{"Acceptance by draft position", "Expert load, spec-g3 (tokens / uniform share)",
                                              "Measured decode speedup vs predicted", "Speedup vs baseline (95% CI)"}));
}

TEST_F(ReportHtml, SpeedupBarsAndErrorBarsMatchReportJson) {
  const Node& svg = chart("Speedup vs baseline (95% CI)");
  const Axis y = y_axis(svg);
  const double tol = pixel_tolerance(y);
  // Bars in report order, one per run with a speedup; each followed by its three CI lines.
  std::vector<const json*> expected;
  for (const json* r : runs_)
    if (std::isfinite(estimate_mean(r->at("speedup")))) expected.push_back(r);
  std::vector<const Node*> bars;
  for (const auto& c : svg.children)
    if (c->name == "rect" && c->child("title")) bars.push_back(c.get());
  ASSERT_EQ(bars.size(), expected.size());
  for (size_t i = 0; i < bars.size(); ++i) {
    const json& run = *expected[i];
    const std::string name = run.at("name");
    SCOPED_TRACE(name);
    const double mean = run.at("speedup").at("mean"), ci = run.at("speedup").value("ci95", 0.0);
    // The tooltip: "name: value" at 4 significant digits.
    std::smatch m;
    const std::string tip = bars[i]->child("title")->text;
    ASSERT_TRUE(std::regex_match(tip, m, std::regex("(.*): ([0-9.e+-]+)"))) << tip;
    EXPECT_EQ(m[1].str(), name);
    EXPECT_NEAR(std::stod(m[2].str()), mean, 5e-4 * mean);
    // The drawing: the bar's top and bottom through the axis.
    const double top = bars[i]->num("y"), height = bars[i]->num("height");
    EXPECT_NEAR(y.value(top + height), 0.0, tol);
    EXPECT_NEAR(y.value(top), mean, tol);
    // Error bar: the vertical line from mean + ci95 down to mean - ci95 (clamped at 0).
    if (ci > 0) {
      const Node* line = nullptr;
      for (size_t k = 0; k + 1 < svg.children.size(); ++k)
        if (svg.children[k].get() == bars[i]) line = svg.children[k + 1].get();
      ASSERT_NE(line, nullptr);
      ASSERT_EQ(line->name, "line");
      EXPECT_NEAR(y.value(line->num("y1")), std::min(mean + ci, y.value_max), tol);
      EXPECT_NEAR(y.value(line->num("y2")), std::max(mean - ci, 0.0), tol);
    }
  }
  // Real values, not all equal: the baseline is 1 and the speculative runs differ from it.
  EXPECT_DOUBLE_EQ(runs_[0]->at("speedup").at("mean").get<double>(), 1.0);
  EXPECT_GT(estimate_mean(runs_[2]->at("speedup")), 1.2);
}

TEST_F(ReportHtml, AcceptanceByPositionMatchesReportJson) {
  const Node& svg = chart("Acceptance by draft position");
  const Axis y = y_axis(svg);
  EXPECT_EQ(y.value_max, 1.0);
  const double tol = pixel_tolerance(y);
  std::vector<const Node*> points;
  for (const auto& c : svg.children)
    if (c->name == "circle") points.push_back(c.get());
  size_t k = 0, expected_points = 0;
  for (const json* run : runs_) {
    if (run->at("kind") != "speculative") continue;
    const std::string name = run->at("name");
    const json& per_position = run->at("per_position_acceptance");
    for (size_t i = 0; i < per_position.size(); ++i) {
      if (per_position[i].is_null()) continue;
      ++expected_points;
      ASSERT_LT(k, points.size());
      const Node& p = *points[k++];
      const double want = per_position[i];
      EXPECT_EQ(p.child("title")->text, fmt::format("{} position {}: {:.3f}", name, i + 1, want));
      EXPECT_NEAR(y.value(p.num("cy")), want, tol) << name << " position " << i + 1;
      // The same run's metrics object says the same.
      EXPECT_NEAR(run->at("metrics").at("per_position_acceptance")[i].get<double>(), want, 1e-12);
    }
  }
  EXPECT_EQ(points.size(), expected_points);
  EXPECT_EQ(expected_points, 1u + 2 + 3 + 4);
}

TEST_F(ReportHtml, DecodeSpeedupAgainstPredictionMatchesReportJson) {
  const Node& svg = chart("Measured decode speedup vs predicted");
  const Axis y = y_axis(svg);
  // The x tick labels sit 14 px below the plot's bottom edge, which the y axis' zero marks.
  const Axis x = x_axis(svg, y.pixel0 + 14);
  EXPECT_EQ(x.value_max, y.value_max);  // one scale for both: the y = x diagonal is meaningful
  std::vector<const Node*> points;
  for (const auto& c : svg.children)
    if (c->name == "circle") points.push_back(c.get());
  size_t k = 0;
  for (const json* run : runs_) {
    if (!run->at("predicted_speedup").is_number() || !std::isfinite(estimate_mean(run->at("decode_speedup")))) continue;
    ASSERT_LT(k, points.size());
    const Node& p = *points[k++];
    const std::string name = run->at("name");
    const double predicted = run->at("predicted_speedup"), measured = estimate_mean(run->at("decode_speedup"));
    EXPECT_EQ(p.child("title")->text, fmt::format("{}: predicted {:.3f}, measured {:.3f}", name, predicted, measured));
    EXPECT_NEAR(x.value(p.num("cx")), predicted, pixel_tolerance(x)) << name;
    EXPECT_NEAR(y.value(p.num("cy")), measured, pixel_tolerance(y)) << name;
  }
  EXPECT_EQ(points.size(), k);
  EXPECT_EQ(k, 4u);  // every speculative run
}

TEST_F(ReportHtml, ExpertLoadHeatMapMatchesReportJson) {
  const Node& svg = chart("Expert load, spec-g3 (tokens / uniform share)");
  const json* run = nullptr;
  for (const json* r : runs_)
    if (r->at("name") == "spec-g3") run = r;
  ASSERT_NE(run, nullptr);
  const json& layers = run->at("moe").at("layers");
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(run->at("moe").at("layers")[0].at("routing_entropy_unit"), "bits");
  // Relative load tokens * E / sum per layer; colour from white (0) to the largest value's red.
  std::vector<std::vector<double>> rel;
  double vmax = 0;
  for (const auto& layer : layers) {
    const auto tokens = layer.at("expert_tokens").get<std::vector<int64_t>>();
    double sum = 0;
    for (int64_t t : tokens) sum += static_cast<double>(t);
    std::vector<double> row;
    for (int64_t t : tokens) row.push_back(static_cast<double>(t) * static_cast<double>(tokens.size()) / sum);
    for (double v : row) vmax = std::max(vmax, v);
    rel.push_back(row);
  }
  std::vector<const Node*> cells;
  for (const auto& c : svg.children)
    if (c->name == "rect") cells.push_back(c.get());
  ASSERT_EQ(cells.size(), 8u);
  for (size_t l = 0; l < 2; ++l) {
    for (size_t e = 0; e < 4; ++e) {
      const Node& cell = *cells[l * 4 + e];
      const std::string tip = cell.child("title")->text;
      std::smatch m;
      ASSERT_TRUE(std::regex_match(tip, m, std::regex("layer (\\d+), expert (\\d+): ([0-9.e+-]+)"))) << tip;
      EXPECT_EQ(std::stoul(m[1].str()), l);
      EXPECT_EQ(std::stoul(m[2].str()), e);
      EXPECT_NEAR(std::stod(m[3].str()), rel[l][e], 5e-4 * std::max(rel[l][e], 1e-3));
      std::smatch rgb;
      const std::string fill = cell.attrs.at("fill");
      ASSERT_TRUE(std::regex_match(fill, rgb, std::regex("rgb\\(255,(\\d+),(\\d+)\\)"))) << fill;
      EXPECT_EQ(std::stoi(rgb[1].str()), static_cast<int>(255 - 200 * rel[l][e] / vmax));
    }
  }
  // Layer 0 is unbalanced (an idle expert), layer 1 nearly balanced: the chart has contrast.
  EXPECT_EQ(rel[0][3], 0.0);
  EXPECT_GT(rel[0][0], 1.5);
}

}  // namespace
}  // namespace specmoe::exp
