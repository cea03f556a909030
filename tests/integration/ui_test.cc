// The web UI in a real browser: Debian's headless Chromium, driven by chromedriver,
// against a real coordinator over HTTPS with real agents. Screenshots go to the build directory
// (ui-screenshots/) for a person to look at.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <tuple>

#include "common/parse_number.h"
#include "sim/workload_model.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/integration/browser.h"
#include "tests/integration/live_cluster_fixture.h"
#include "tests/sanitizers.h"
#include "tests/test_paths.h"

namespace podscope::testing {
namespace {

namespace json = boost::json;

// Arrow keys for WebDriver's key input.
constexpr char kArrowRight[] = "\xEE\x80\x94";  // U+E014

class UiTest : public LiveClusterTest {
 protected:
  void OpenBrowser(int width = 1280, int height = 800) {
    absl::StatusOr<std::string> spki = SpkiHash(TestSecurity::Get().CoordinatorFlags()[1]);
    ASSERT_TRUE(spki.ok()) << spki.status();
    absl::StatusOr<std::unique_ptr<Browser>> browser =
        Browser::Start({.width = width, .height = height, .trusted_spki = {*spki}});
    // Loudly: scripts/test.sh installs chromium and chromium-driver, so a missing one is a broken
    // setup.
    ASSERT_TRUE(browser.ok()) << browser.status();
    browser_ = std::move(*browser);
  }

  // The UI at `route` ("#/workers"), signed in with `token` through the address's fragment, in a
  // new document: a route of the page already open would only change its fragment, and the
  // previous page could answer the checks that follow.
  void Open(const std::string& route, const std::string& token) {
    ASSERT_TRUE(browser_->Navigate("about:blank").ok());
    ASSERT_TRUE(browser_
                    ->Navigate("https://127.0.0.1:" + std::to_string(http_port_) + "/" + route +
                               "&token=" + token)
                    .ok());
  }

  json::value Js(const std::string& script) {
    absl::StatusOr<json::value> v = browser_->Run(script);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : json::value(nullptr);
  }

  std::string Text(const std::string& css) {
    json::value v = Js("const e = document.querySelector(" + json::serialize(json::value(css)) +
                       "); return e ? e.textContent : '';");
    return v.is_string() ? std::string(v.as_string()) : "";
  }

  void Shot(const std::string& name) {
    std::filesystem::create_directories(UiScreenshotDir());
    const absl::Status s = browser_->Screenshot(UiScreenshotDir() + "/" + name + ".png");
    EXPECT_TRUE(s.ok()) << s;
  }

  // A tall viewport for a whole-page screenshot, then back.
  void FullPageShot(const std::string& name, int width = 1280) {
    json::value height = Js("return document.documentElement.scrollHeight;");
    const int h =
        height.is_int64() ? static_cast<int>(std::min<int64_t>(height.as_int64(), 6000)) : 2000;
    ASSERT_TRUE(browser_->SetWindowSize(width, h + 120).ok());
    Shot(name);
    ASSERT_TRUE(browser_->SetWindowSize(width, 800).ok());
  }

  void ExpectNoConsoleErrors(const std::string& where) {
    for (const std::string& e : browser_->ConsoleErrors())
      ADD_FAILURE() << where << ": console error: " << e;
  }

  // Reads a column chart's pixels: the number of columns drawn (runs of the chart's colours along
  // its bottom row, split by the gaps and by the straggler's red outline) and the columns that
  // hold straggler red (its marker and outline); `filled`, the pixels drawn along that row.
  json::value ColumnPixels(const std::string& canvas_css) {
    return Js(R"(
      const c = document.querySelector()" +
              json::serialize(json::value(canvas_css)) + R"();
      if (!c || !c.dataset.columns) return null;
      const r = c.width / parseFloat(c.style.width);
      const left = +c.dataset.left, col = +c.dataset.column, n = +c.dataset.columns, bottom = +c.dataset.plotBottom;
      const ctx = c.getContext('2d');
      const isRed = (d, i) => d[i] > 180 && d[i + 1] < 40 && d[i + 2] < 40;
      const isWhite = (d, i) => d[i] > 245 && d[i + 1] > 245 && d[i + 2] > 245;
      const x0 = Math.round(left * r), x1 = Math.round((left + n * col) * r);
      const line = ctx.getImageData(x0, Math.round((bottom - 2) * r), x1 - x0, 1).data;
      let runs = 0, inside = false, filled = 0;
      for (let x = 0; x < x1 - x0; ++x) {
        const coloured = !isWhite(line, 4 * x) && !isRed(line, 4 * x);
        if (coloured && !inside) ++runs;
        inside = coloured;
        if (!isWhite(line, 4 * x)) ++filled;
      }
      const red = [];
      for (let i = 0; i < n; ++i) {
        const a = Math.round((left + i * col + col / 2) * r);
        const strip = ctx.getImageData(a, 0, 1, Math.round(bottom * r)).data;
        let count = 0;
        for (let y = 0; y < strip.length; y += 4) if (isRed(strip, y)) ++count;
        if (count > 2) red.push(i);
      }
      return {runs, red, n, filled, column: col};)");
  }

  std::unique_ptr<Browser> browser_;
};

// The capture page: a column per worker with the straggler marked (by its pixels, not only its
// label), the heat map, the other per-worker charts marking it too, keyboard navigation, and a
// narrow screen; no console error anywhere.
TEST_F(UiTest, TheCapturePageShowsAColumnPerWorkerAndMarksTheStragglerInEveryChart) {
  StartCoordinator();
  StartAgent("a",
             "ranks=0-3,world=8,job=ui,seed=7,straggler=5:1.3,clock-offset-ms=20,drift-ppm=30");
  StartAgent("b", "ranks=4-7,world=8,job=ui,seed=7,straggler=5:1.3,clock-offset-ms=-15");
  WaitForAgents(2);
  const std::string id = StartCapture(R"({"job": "ui", "duration_ms": 1500})");
  ASSERT_EQ(WaitForState(id, {"complete", "partial", "failed"}, 120'000), "complete");
  ASSERT_NO_FATAL_FAILURE(OpenBrowser());
  Open("#/capture/" + id, TestSecurity::Get().read_token);
  const std::string pod = R"(canvas[aria-label^="Step "])";
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('" + std::string(pod) +
                                    "') && document.querySelector('" + pod + "').dataset.columns",
                                60'000))
      << Js("return document.body.innerText;");
  // The token left the address as soon as the page read it.
  EXPECT_EQ(Js("return location.hash;"), json::value("#/capture/" + id));

  json::value pixels = ColumnPixels(pod);
  ASSERT_TRUE(pixels.is_object()) << pixels;
  EXPECT_EQ(pixels.at("n"), json::value(8));
  EXPECT_EQ(pixels.at("runs"), json::value(8)) << pixels;   // eight columns drawn
  EXPECT_EQ(pixels.at("red"), (json::array{5})) << pixels;  // rank 5's, and only its
  EXPECT_NE(Js("return document.querySelector('" + pod + "').getAttribute('aria-label');")
                .as_string()
                .find("8 workers"),
            json::string::npos);
  EXPECT_NE(Text(".panel .readout").find("rank 5 (straggler)"), std::string::npos)
      << Text(".panel .readout");

  // Every per-worker chart marks rank 5: overlap, wait vs transfer, clock bounds.
  ASSERT_TRUE(browser_->WaitFor("document.querySelectorAll('canvas[data-highlighted]').length >= 4",
                                60'000));
  json::value marked =
      Js("return [...document.querySelectorAll('canvas[data-highlighted]')].map(c => "
         "c.dataset.highlighted);");
  for (const json::value& m : marked.as_array()) EXPECT_EQ(m, json::value("rank 5")) << marked;
  for (const char* chart : {R"(canvas[aria-label^="Per worker, over the window"])",
                            R"(canvas[aria-label^="Collective time per worker"])"}) {
    json::value p = ColumnPixels(chart);
    ASSERT_TRUE(p.is_object()) << chart;
    EXPECT_EQ(p.at("red"), (json::array{5})) << chart << " " << p;
  }
  EXPECT_NE(Text("tr.straggler").find("rank 5"), std::string::npos) << Text("tr.straggler");

  // GPU efficiency: a column per worker, rank 5 marked, the pod's medians known (the simulated
  // ranks describe their H100); the kernel table says which kernels use Tensor Cores.
  ASSERT_TRUE(browser_->WaitFor(
      R"(document.querySelector('canvas[aria-label^="Step time by GPU use"]'))", 30'000));
  json::value gpu = ColumnPixels(R"(canvas[aria-label^="Step time by GPU use"])");
  ASSERT_TRUE(gpu.is_object());
  EXPECT_EQ(gpu.at("runs"), json::value(8)) << gpu;
  EXPECT_EQ(gpu.at("red"), (json::array{5})) << gpu;
  EXPECT_TRUE(browser_->WaitFor(
      "/Pod medians: GPU utilization \\d+\\.\\d%, Est. SM Efficiency \\d+\\.\\d%, Est. Achieved "
      "Occupancy \\d+\\.\\d%/.test(document.body.textContent)",
      10'000))
      << Js("return document.body.innerText;");
  EXPECT_TRUE(browser_->WaitFor(
      "/Compute-kernel time on Tensor Cores: \\d+\\.\\d%/.test(document.body.textContent) && "
      "[...document.querySelectorAll('td')].some(td => td.textContent === 'Tensor Cores')",
      10'000));

  // The overview comes first and ends in recommendations with their numbers; the straggler is one.
  EXPECT_TRUE(
      browser_->WaitFor("[...document.querySelectorAll('ol.recommendations li')].some(li => "
                        "li.textContent.includes('Rank 5') && li.textContent.includes('Evidence: "
                        "step_time_loss_ns = '))",
                        30'000))
      << Text("ol.recommendations");
  EXPECT_EQ(Js("return document.querySelector('main section.panel h2').textContent;"),
            json::value("Overview"));
  // What its collectives are for: the simulated job reduces gradients in the backward pass.
  EXPECT_TRUE(browser_->WaitFor(
      "/Communicator \\S+ \\(8 ranks\\): data parallel, [\\d.]+ calls per step; reductions only "
      "in the backward pass\\./.test(document.body.textContent)",
      10'000))
      << Js("return document.body.innerText;");

  // The heat map renders: 8 rows by the capture's steps, in more than one colour, rank 5 marked.
  ASSERT_TRUE(browser_->WaitFor(
      R"(document.querySelector('canvas[aria-label^="Step time, worker"]'))", 30'000));
  json::value heat = Js(R"(
    const c = document.querySelector('canvas[aria-label^="Step time, worker"]');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const colours = new Set();
    let red = 0;
    for (let i = 0; i < d.length; i += 4) {
      colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      if (d[i] > 180 && d[i + 1] < 40 && d[i + 2] < 40) ++red;
    }
    return {label: c.getAttribute('aria-label'), rows: +c.dataset.rows, colours: colours.size, red};)");
  EXPECT_NE(heat.at("label").as_string().find("8 workers by"), json::string::npos) << heat;
  EXPECT_EQ(heat.at("rows"), json::value(8));
  EXPECT_GT(heat.at("colours").as_int64(), 8) << heat;
  EXPECT_GT(heat.at("red").as_int64(), 0) << heat;

  // One bandwidth, one unit: the AllReduce panel, REST and the CLI give the same median bus
  // bandwidth and efficiency against a 50 GB/s link, each in GB/s.
  absl::StatusOr<std::string> link_field = browser_->Find("#link-gbytes-per-s");
  ASSERT_TRUE(link_field.ok()) << link_field.status();
  ASSERT_TRUE(browser_->Type(*link_field, "50").ok());
  absl::StatusOr<std::string> draw = browser_->Find("#link-gbytes-per-s + button");
  ASSERT_TRUE(draw.ok()) << draw.status();
  ASSERT_TRUE(browser_->Click(*draw).ok());
  ASSERT_TRUE(browser_->WaitFor(
      "(document.querySelector('#allreduce-readout') || {textContent: ''}).textContent"
      ".includes('of the 50 GB/s link')",
      30'000))
      << Text("#allreduce-readout");
  const std::string readout = Text("#allreduce-readout");
  const HttpResult allreduce =
      HttpCall(http_port_, "GET", "/v1/captures/" + id + "/allreduce?link_gbytes_per_s=50");
  ASSERT_EQ(allreduce.status, 200) << allreduce.body;
  const json::object rest = json::parse(allreduce.body).as_object();
  const double busbw = rest.at("median_busbw_gbytes_per_s").to_number<double>();
  const double efficiency = rest.at("median_efficiency").to_number<double>();
  ASSERT_GT(busbw, 0) << allreduce.body;
  ASSERT_GT(efficiency, 0) << allreduce.body;
  // Each view rounds the same figure (REST to 3 decimals, the page and the table to 1).
  const std::regex said(R"(median bus bandwidth ([0-9.]+) GB/s, ([0-9]+)% of the 50 GB/s link)");
  const auto [cli, cli_code] = Cli("report " + id + " --report summary --link-gbytes-per-s 50");
  ASSERT_EQ(cli_code, 0) << cli;
  EXPECT_EQ(cli.find("Gbit"), std::string::npos) << cli;
  for (const std::string& view : {readout, cli}) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(view, m, said)) << view;
    EXPECT_NEAR(common::ParseDouble(m[1].str()).value_or(-1), busbw, 0.0505)
        << view << " vs " << allreduce.body;
    EXPECT_NEAR(common::ParseDouble(m[2].str()).value_or(-1), 100 * efficiency, 0.505) << view;
  }

  // The heat map's scale runs from the median up, with a floor: under 1% of noise stays pale, a
  // 30% straggler is darkest; the legend says what the colours mean, in time.
  EXPECT_EQ(Js("return import('/ui/charts.js').then(m => { const n = m.heatScale([[116.61e6, "
               "117.62e6], [117.0e6, 116.9e6]]); const s = m.heatScale([[116.61e6, 117.0e6], "
               "[117.62e6, 152.1e6]]); return [n.t(117.62e6) < 0.1, s.t(117.62e6) < 0.1, "
               "s.t(152.1e6), s.t(116.61e6)]; });"),
            (json::array{true, true, 1, 0}));
  EXPECT_TRUE(browser_->WaitFor(
      "/step time: median [0-9.]+ ms or less/.test(document.querySelector('.scale').textContent)",
      10'000))
      << Text(".scale");
  // One median of step time on the page: the legend's is the overview's (docs/analyses.md).
  const json::value medians =
      Js("const said = (re) => (document.body.textContent.match(re) || [])[1]; return "
         "[said(/step time median ([0-9.]+ [a-zµ]+)/), said(/step time: median ([0-9.]+ [a-zµ]+) "
         "or less/)];");
  ASSERT_TRUE(medians.is_array()) << medians;
  EXPECT_TRUE(medians.as_array()[0].is_string()) << medians;
  EXPECT_EQ(medians.as_array()[0], medians.as_array()[1]);

  // Keyboard: the pod chart's cursor starts on the straggler; the right arrow moves to rank 6.
  absl::StatusOr<std::string> canvas = browser_->Find(pod);
  ASSERT_TRUE(canvas.ok()) << canvas.status();
  ASSERT_TRUE(browser_->Type(*canvas, kArrowRight).ok());
  EXPECT_TRUE(browser_->WaitFor(
      "document.querySelector('.panel .readout').textContent.startsWith('rank 6:')", 5'000))
      << Text(".panel .readout");
  ExpectNoConsoleErrors("capture page");
  Shot("capture-page-1280x800");
  FullPageShot("capture-page-full");

  // The workers page says each agent's clock as it is: a is 20 ms ahead and 30 ppm fast (plus
  // what 30 ppm adds since it started), b 15 ms behind; the correction is the opposite.
  Open("#/workers", TestSecurity::Get().read_token);
  auto agent_row = [](const std::string& agent) {
    return "[...document.querySelectorAll('tr')].map(r => [...r.cells].map(c => c.textContent))"
           ".filter(c => c[0] === '" +
           agent + "')[0]";
  };
  ASSERT_TRUE(browser_->WaitFor(agent_row("a") + " && " + agent_row("b"), 30'000))
      << Js("return document.body.innerText;");
  const std::regex clock_cell(R"(^([0-9.]+) ms (ahead|behind)$)");
  const std::regex drift_cell(R"(^([0-9.]+) ppm( fast| slow)?$)");
  for (const auto& [agent, ms, side] : {std::tuple{"a", 20.0, "ahead"}, {"b", 15.0, "behind"}}) {
    const json::value cells = Js("return " + agent_row(agent) + ";");
    ASSERT_TRUE(cells.is_array()) << cells;
    const std::string row = json::serialize(cells);
    std::smatch m;
    std::string offset(cells.as_array()[4].as_string());
    ASSERT_TRUE(std::regex_match(offset, m, clock_cell)) << row;
    EXPECT_EQ(m[2].str(), side) << row;
    EXPECT_NEAR(common::ParseDouble(m[1].str()).value_or(-1), ms, 3.0) << row;
    // A drift fitted over seconds is too rough for its figure to be checked here; its form is,
    // and its sign exactly, below.
    std::string drift(cells.as_array()[5].as_string());
    EXPECT_TRUE(std::regex_match(drift, m, drift_cell)) << row;
    const std::string correction(cells.as_array()[6].as_string());
    EXPECT_EQ(correction.rfind("\u2212", 0) == 0, std::string(side) == "ahead")
        << "the correction is the opposite of the clock: " << row;
  }
  Shot("workers-page-1280x800");
  // The page's own reading of a model: 20 ms ahead and 30 ppm fast is a correction of -20 ms and
  // -30 ppm.
  EXPECT_EQ(Js("return import('/ui/format.js').then(m => m.agentClock({offset_ns: -20e6, "
               "drift_ppb: -30000}));"),
            (json::object{{"offset", "20.00 ms ahead"}, {"drift", "30.00 ppm fast"}}));
  EXPECT_EQ(Js("return import('/ui/format.js').then(m => m.agentClock({offset_ns: 15e6, "
               "drift_ppb: 2500}));"),
            (json::object{{"offset", "15.00 ms behind"}, {"drift", "2.50 ppm slow"}}));

  // A narrow screen: nothing wider than the screen but the charts, which scroll in their panels.
  ASSERT_TRUE(browser_->SetWindowSize(390, 844).ok());
  Open("#/capture/" + id, TestSecurity::Get().read_token);
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('" + pod +
                                    "') && document.querySelector('" + pod + "').dataset.columns",
                                60'000));
  EXPECT_EQ(Js("return document.documentElement.scrollWidth <= window.innerWidth + 1;"),
            json::value(true))
      << Js("return [document.documentElement.scrollWidth, window.innerWidth];");
  // Tables wrap sensibly: words whole (a table wider than the screen scrolls in its frame),
  // kernel names at a readable width, no row a column of single characters.
  ASSERT_TRUE(browser_->WaitFor(
      "document.querySelectorAll('td.name').length > 0 && document.querySelector('tr.straggler')",
      60'000));
  const json::value rows =
      Js("return {tallest: Math.max(...[...document.querySelectorAll('tr')].map(r => "
         "r.getBoundingClientRect().height)), narrowest_name: Math.min(...[...document."
         "querySelectorAll('td.name')].map(c => c.getBoundingClientRect().width)), straggler: "
         "document.querySelector('tr.straggler').getBoundingClientRect().height, cells: "
         "[...document.querySelector('tr.straggler').cells].map(c => [c.textContent.slice(0, 30), "
         "Math.round(c.getBoundingClientRect().width)])};");
  EXPECT_LE(rows.at("tallest").to_number<double>(), 200) << rows;
  EXPECT_LE(rows.at("straggler").to_number<double>(), 120) << rows;
  EXPECT_GE(rows.at("narrowest_name").to_number<double>(), 100) << rows;
  Shot("capture-page-390x844");
  FullPageShot("capture-page-narrow-full", 390);
  ExpectNoConsoleErrors("capture page, narrow");
}

// A watched job with a straggler: the watch view and the alerts page show the alert, naming the
// rank, with its evidence and a link to its evidence capture, which opens.
TEST_F(UiTest, TheWatchViewAndTheAlertsPageShowTheStragglerAlertWithItsEvidenceCapture) {
  StartCoordinator();
  StartAgent("a", "ranks=0-3,world=8,job=watched,seed=3,straggler=6:1.3,profile=light");
  StartAgent("b", "ranks=4-7,world=8,job=watched,seed=3,straggler=6:1.3,profile=light");
  WaitForAgents(2);
  // Until the agents' first summaries arrive the job has no window, a 404 the page shows as
  // "no watch data yet" and Chromium logs as a console error: open the page once it has one.
  ASSERT_TRUE(WaitUntil(
      [&] { return HttpCall(http_port_, "GET", "/v1/watch/jobs/watched").status == 200; }, 60'000));
  ASSERT_NO_FATAL_FAILURE(OpenBrowser());
  Open("#/watch/watched", TestSecurity::Get().read_token);
  ASSERT_TRUE(
      browser_->WaitFor("[...document.querySelectorAll('.alert-card')].some(c => "
                        "c.textContent.includes('straggler: rank 6'))",
                        120'000))
      << Js("return document.body.innerText;");
  EXPECT_NE(Text(".alert-card").find("firing"), std::string::npos);
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('.alert-card a[href^=\"#/capture/cap-\"]')",
                                60'000))
      << Text(".alert-card");
  EXPECT_TRUE(browser_->WaitFor("document.body.textContent.includes('rank 6 (alert)')",
                                10'000));  // its line in the charts
  EXPECT_NE(Text("tr.straggler").find("6"), std::string::npos) << Text("tr.straggler");
  ExpectNoConsoleErrors("watch view");
  FullPageShot("watch-view");

  Open("#/alerts", TestSecurity::Get().read_token);
  ASSERT_TRUE(
      browser_->WaitFor("[...document.querySelectorAll('.alert-card')].some(c => "
                        "c.textContent.includes('straggler: rank 6'))",
                        30'000))
      << Js("return document.body.innerText;");
  Shot("alerts");
  // The evidence link opens the capture the alert started.
  absl::StatusOr<std::string> link = browser_->Find(".alert-card a[href^=\"#/capture/cap-\"]");
  ASSERT_TRUE(link.ok());
  ASSERT_TRUE(browser_->Click(*link).ok());
  EXPECT_TRUE(
      browser_->WaitFor("location.hash.startsWith('#/capture/cap-') && "
                        "document.querySelector('h1').textContent.startsWith('Capture cap-')",
                        10'000));
  ExpectNoConsoleErrors("alerts page");
}

// The capture form: a read token is refused with what to do; a capture token's capture runs to
// complete and its page shows it. The workers page lists the agents.
TEST_F(UiTest, ACaptureTriggeredFromTheFormReachesCompleteAndAReadTokenIsToldWhy) {
  StartCoordinator();
  StartAgent("a", "ranks=0-1,world=4,job=form,profile=light");
  StartAgent("b", "ranks=2-3,world=4,job=form,profile=light");
  WaitForAgents(2);
  ASSERT_NO_FATAL_FAILURE(OpenBrowser());
  Open("#/workers", TestSecurity::Get().read_token);
  ASSERT_TRUE(browser_->WaitFor(
      "document.body.textContent.includes('2 connected agents, 4 workers')", 30'000))
      << Js("return document.body.innerText;");
  EXPECT_NE(Text("main").find("host-a"), std::string::npos);
  Shot("workers");

  auto submit = [&](const std::string& duration) {
    absl::StatusOr<std::string> field = browser_->Find("#capture-duration");
    ASSERT_TRUE(field.ok()) << field.status();
    ASSERT_TRUE(browser_->Clear(*field).ok());
    ASSERT_TRUE(browser_->Type(*field, duration).ok());
    absl::StatusOr<std::string> button = browser_->Find("#capture-form button[type=submit]");
    ASSERT_TRUE(button.ok());
    ASSERT_TRUE(browser_->Click(*button).ok());
  };
  Open("#/capture-new/form", TestSecurity::Get().read_token);
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('#capture-duration')", 10'000));
  submit("1000");
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('#capture-form .error')", 10'000));
  const std::string refused = Text("#capture-form .error");
  EXPECT_NE(refused.find("needs role capture"), std::string::npos) << refused;
  EXPECT_NE(refused.find("Ask an admin for a token"), std::string::npos) << refused;
  // Chromium logs the refused call itself (a 403 is a failed load to it), and nothing else.
  for (const std::string& e : browser_->ConsoleErrors()) {
    EXPECT_NE(
        e.find("/v1/captures - Failed to load resource: the server responded with a status of 403"),
        std::string::npos)
        << e;
  }
  // Refused means nothing started.
  EXPECT_EQ(Json(HttpCall(http_port_, "GET", "/v1/captures").body)["captures"].get_array().size(),
            0u);

  Open("#/capture-new/form", TestSecurity::Get().capture_token);
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('#capture-duration')", 10'000));
  submit("1000");
  ASSERT_TRUE(browser_->WaitFor("location.hash.startsWith('#/capture/cap-')", 20'000))
      << Text("#capture-form");
  ASSERT_TRUE(
      browser_->WaitFor("document.querySelector('.badge') && "
                        "document.querySelector('.badge').textContent === 'complete'",
                        120'000))
      << Js("return document.body.innerText;");
  ASSERT_TRUE(
      browser_->WaitFor(R"(document.querySelector('canvas[aria-label^="Step "]'))", 60'000));
  json::value hash = Js("return location.hash;");
  const std::string id = std::string(hash.as_string()).substr(std::string("#/capture/").size());
  EXPECT_EQ(State(id), "complete");
  EXPECT_EQ(Capture(id)["job"].get_string().value(), "form");
  ExpectNoConsoleErrors("capture form");
  Shot("capture-form-result");
}

// The rule editor: a rule set with a misspelt key is refused with the coordinator's own words
// and changes nothing; a good edit is stored. The schedules form adds one, and deletes it.
TEST_F(UiTest, TheRulesAndSchedulesFormsChangeWhatTheCoordinatorKeeps) {
  StartCoordinator();
  ASSERT_NO_FATAL_FAILURE(OpenBrowser());
  Open("#/rules", TestSecurity::Get().admin_token);
  ASSERT_TRUE(
      browser_->WaitFor("document.querySelector('#rules-text') && "
                        "document.querySelector('#rules-text').value.includes('straggler')",
                        20'000))
      << Js("return document.body.innerText;");
  const std::string before = HttpCall(http_port_, "GET", "/v1/alerts/rules").body;
  auto save = [&](const std::string& edit_js) {
    Js("const t = document.querySelector('#rules-text'); const r = JSON.parse(t.value); " +
       edit_js + " t.value = JSON.stringify(r, null, 2);");
    absl::StatusOr<std::string> button = browser_->Find("#rules-text ~ .row button[type=submit]");
    ASSERT_TRUE(button.ok()) << button.status();
    ASSERT_TRUE(browser_->Click(*button).ok());
  };
  save("r.rules[0].min_share_of_caused_delai = 0.3;");
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('.error')", 10'000));
  EXPECT_NE(Text(".error").find("min_share_of_caused_delai"), std::string::npos) << Text(".error");
  EXPECT_EQ(HttpCall(http_port_, "GET", "/v1/alerts/rules").body, before);
  for (const std::string& e : browser_->ConsoleErrors()) {
    EXPECT_NE(e.find("/v1/alerts/rules - Failed to load resource: the server responded with a "
                     "status of 400"),
              std::string::npos)
        << e;
  }
  save("delete r.rules[0].min_share_of_caused_delai; r.rules[1].enabled = false;");
  ASSERT_TRUE(browser_->WaitFor("document.body.textContent.includes('Saved 6 rules')", 10'000))
      << Js("return document.body.innerText;");
  EXPECT_NE(HttpCall(http_port_, "GET", "/v1/alerts/rules")
                .body.find(R"("name":"hang","kind":"hang","enabled":false)"),
            std::string::npos);

  Open("#/schedules", TestSecurity::Get().capture_token);
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('#schedule-job')", 10'000));
  absl::StatusOr<std::string> job = browser_->Find("#schedule-job");
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(browser_->Type(*job, "nightly").ok());
  absl::StatusOr<std::string> add = browser_->Find("#schedule-job ~ .wide button[type=submit]");
  ASSERT_TRUE(add.ok()) << add.status();
  ASSERT_TRUE(browser_->Click(*add).ok());
  ASSERT_TRUE(browser_->WaitFor(
      "[...document.querySelectorAll('td')].some(td => td.textContent === 'nightly')", 15'000))
      << Js("return document.body.innerText;");
  EXPECT_NE(HttpCall(http_port_, "GET", "/v1/schedules").body.find(R"("job":"nightly")"),
            std::string::npos);
  absl::StatusOr<std::string> remove = browser_->Find("button[aria-label^='delete schedule']");
  ASSERT_TRUE(remove.ok()) << remove.status();
  ASSERT_TRUE(browser_->Click(*remove).ok());
  ASSERT_TRUE(browser_->WaitFor("document.body.textContent.includes('No schedule.')", 15'000));
  EXPECT_EQ(HttpCall(http_port_, "GET", "/v1/schedules").body.find("nightly"), std::string::npos);
  ExpectNoConsoleErrors("rules and schedules");

  // Import two ranks of a real Kineto trace from the captures page: one capture of two workers.
  Open("#/captures", TestSecurity::Get().admin_token);
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('#import-files')", 10'000));
  absl::StatusOr<std::string> files = browser_->Find("#import-files");
  ASSERT_TRUE(files.ok());
  // chromedriver takes canonical paths only (no "..").
  const std::string dlrm =
      std::filesystem::canonical(SharedDataDir() + "/kineto/dlrm_8rank").string() + "/";
  const absl::Status typed =
      browser_->Type(*files, dlrm + "rank-0.json.gz\n" + dlrm + "rank-1.json.gz");
  ASSERT_TRUE(typed.ok()) << typed;
  absl::StatusOr<std::string> import = browser_->Find("#import-job ~ .wide button[type=submit]");
  ASSERT_TRUE(import.ok()) << import.status();
  ASSERT_TRUE(browser_->Click(*import).ok());
  ASSERT_TRUE(browser_->WaitFor("document.body.textContent.includes('Imported into')", 60'000))
      << Js("return document.body.innerText;");
  const std::string id(
      Js("return document.querySelector('a[href^=\"#/capture/imp-\"]').textContent;").as_string());
  EXPECT_EQ(Capture(id)["workers"].get_array().size(), 2u);
  EXPECT_EQ(Capture(id)["state"].get_string().value(), "complete");
  ExpectNoConsoleErrors("import");
}

// The files: served with the CSP and caching headers, revalidated by ETag; an unknown file is a
// 404 problem. No token is needed for them, and they hold no data.
// An imported capture: its ranks keep their own clocks, so the clock bounds are unknown, said in
// words, not drawn as bounds of 0 with axes of zeros.
TEST_F(UiTest, AnImportedCaptureSaysItsClockBoundsAreUnknown) {
  StartCoordinator();
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = "sampled_rank-" + std::to_string(rank) + ".json.gz";
    std::ifstream in(KinetoFixture("trace_filter/" + file), std::ios::binary);
    const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(gz.empty()) << file;
    const HttpResult imported =
        HttpCall(http_port_, "POST", "/v1/captures:import?job=tf&capture=imp&name=" + file, gz,
                 "application/gzip");
    ASSERT_EQ(imported.status, 201) << imported.body;
  }
  ASSERT_NO_FATAL_FAILURE(OpenBrowser());
  Open("#/capture/imp", TestSecurity::Get().read_token);
  const std::string clock_figure =
      "[...document.querySelectorAll('figure')].find(f => f.querySelector('figcaption') && "
      "f.querySelector('figcaption').textContent === 'Clock error bound per worker')";
  ASSERT_TRUE(browser_->WaitFor(clock_figure, 60'000)) << Js("return document.body.innerText;");
  EXPECT_EQ(Js("return " + clock_figure + ".querySelector('canvas') === null;"), json::value(true));
  EXPECT_NE(Js("return " + clock_figure + ".textContent;").as_string().find("Unknown: "),
            json::string::npos);
  EXPECT_EQ(Js("return document.body.textContent.includes('Largest bound');"), json::value(false));
  ExpectNoConsoleErrors("imported capture");
  FullPageShot("capture-page-imported");
}

TEST_F(UiTest, TheFilesCarryTheirSecurityHeadersAndRevalidate) {
  StartCoordinator();
  const HttpResult page = HttpCallWithToken(http_port_, "", "GET", "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.headers.at("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(page.headers.at("content-security-policy").find("script-src 'self'"),
            std::string::npos);
  EXPECT_EQ(page.headers.at("x-content-type-options"), "nosniff");
  EXPECT_EQ(page.headers.at("x-frame-options"), "DENY");
  const HttpResult again = HttpCallWithToken(http_port_, "", "GET", "/", "", "",
                                             {{"If-None-Match", page.headers.at("etag")}});
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
  const HttpResult script = HttpCallWithToken(http_port_, "", "GET", "/ui/app.js");
  EXPECT_EQ(script.status, 200);
  EXPECT_EQ(script.headers.at("content-type"), "text/javascript; charset=utf-8");
  for (const char* bad : {"/ui/nosuch.js", "/ui/..%2Fmain.cc", "/ui/%2e%2e"}) {
    const HttpResult r = HttpCallWithToken(http_port_, "", "GET", bad);
    EXPECT_EQ(r.status, 404) << bad;
    EXPECT_EQ(r.headers.at("content-type"), "application/problem+json") << bad;
  }
  // The data behind the pages still needs a token, and no API answer can act as a page: not
  // sniffed, and sandboxed with nothing allowed to run.
  const HttpResult data = HttpCallWithToken(http_port_, "", "GET", "/v1/workers");
  EXPECT_EQ(data.status, 401);
  EXPECT_EQ(data.headers.at("x-content-type-options"), "nosniff");
  EXPECT_EQ(data.headers.at("content-security-policy"),
            "default-src 'none'; frame-ancestors 'none'; sandbox");
  const HttpResult missing = HttpCallWithToken(http_port_, "", "GET", "/ui/nosuch.js");
  EXPECT_NE(missing.headers.at("content-security-policy").find("script-src 'self'"),
            std::string::npos);
}

// 1024 workers x 100 steps (simulated, written to the store before the coordinator starts): the
// page renders every column and the heat map, aggregated. The load times are printed and written
// to ui-screenshots/load-times.txt (docs/measured-figures.md); they are measured, not asserted.
TEST_F(UiTest, ACaptureOf1024WorkersAnd100StepsRendersAndItsLoadTimeIsMeasured) {
#if defined(PODSCOPE_UNDER_ASAN)
  GTEST_SKIP() << "load times are measured in the optimised build";
#endif
  sim::WorkloadOptions o;
  o.ranks = 1024;
  o.ranks_per_host = 8;
  o.steps = 100;
  o.job = "big";
  o.seed = 11;
  o.forward_kernels = 3, o.backward_kernels = 4, o.optimizer_kernels = 1, o.buckets = 2;
  o.slowdowns = {{.rank = 700, .factor = 1.3}};
  sim::Workload workload = sim::SimulateJob(o);
  const std::string id = "cap-ui-1024";
  {
    auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("store")});
    ASSERT_TRUE(store.ok()) << store.status();
    storage::CaptureRecord record{.id = id,
                                  .job = "big",
                                  .state = storage::CaptureState::kComplete,
                                  .created_ns = o.epoch_ns,
                                  .updated_ns = o.epoch_ns};
    for (size_t i = 0; i < workload.capture.workers.size(); ++i) {
      common::WorkerTrace& w = workload.capture.workers[i];
      w.clock = workload.true_clocks[i];
      ASSERT_TRUE((*store)->PutChunk(id, static_cast<uint32_t>(i), 0, w).ok());
      storage::WorkerRecord worker{.worker_index = static_cast<uint32_t>(i),
                                   .rank = w.info.rank,
                                   .host = w.info.host,
                                   .source = "simulated",
                                   .events = w.Counts().Total(),
                                   .chunks = 1,
                                   .state = "complete"};
      worker.clock = workload.true_clocks[i];
      record.events += worker.events;
      record.workers.push_back(std::move(worker));
    }
    record.generation = 1;
    ASSERT_TRUE((*store)->PutCapture(record).ok());
  }
  StartCoordinator();
  ASSERT_NO_FATAL_FAILURE(OpenBrowser());
  // Every panel loaded (the 8 titled ones, the pod view's and the AllReduce one) and every chart
  // drawn (5, and the pod view's column chart, which loads its step only after its panel has).
  // Without the last, the pod chart could still be loading when its pixels are read.
  const std::string done =
      R"((() => { const names = performance.getEntriesByType('mark').map(m => m.name)
                     .filter(n => n.startsWith('podscope:'));
                   return names.length >= 16 && names.some(n => n.startsWith('podscope:drawn:Step ') &&
                                                                n.endsWith("where each worker's time went")); })())";
  auto load = [&](const std::string& what) {
    Open("#/capture/" + id, TestSecurity::Get().read_token);
    EXPECT_TRUE(browser_->WaitFor(done, 300'000)) << Js("return document.body.innerText;");
    json::value marks =
        Js("return performance.getEntriesByType('mark').filter(m => m.name.startsWith('podscope:'))"
           ".map(m => [m.name, m.startTime]);");
    double last = 0;
    std::string lines;
    for (const json::value& m : marks.as_array()) {
      last = std::max(last, m.as_array()[1].to_number<double>());
      lines += "  " + std::string(m.as_array()[0].as_string()) + " " +
               std::to_string(m.as_array()[1].to_number<double>()) + " ms\n";
    }
    std::cout << what << ": every panel loaded and drawn " << last << " ms after navigation\n"
              << lines;
    return last;
  };
  const double cold = load("cold (analyses computed)");
  const double warm = load("warm (analyses cached)");
  json::value pod = ColumnPixels(R"(canvas[aria-label^="Step "])");
  ASSERT_TRUE(pod.is_object());
  EXPECT_EQ(pod.at("n"), json::value(1024));
  // One pixel per worker, every one drawn; the straggler's marker and label (wider than its
  // column) sit over rank 700 and nowhere else.
  EXPECT_EQ(pod.at("column"), json::value(1));
  EXPECT_EQ(pod.at("filled"), json::value(1024)) << pod;
  const json::array& red = pod.at("red").as_array();
  ASSERT_FALSE(red.empty());
  EXPECT_LE(red.front().as_int64(), 700) << pod;
  EXPECT_GE(red.back().as_int64(), 700) << pod;
  EXPECT_LT(red.back().as_int64() - red.front().as_int64(), 60) << pod;
  EXPECT_EQ(
      Js(R"(return document.querySelector('canvas[aria-label^="Step "]').dataset.highlighted;)"),
      json::value("rank 700"));
  json::value heat =
      Js(R"(const c = document.querySelector('canvas[aria-label^="Step time, worker"]');
                           return [c.getAttribute('aria-label'), +c.dataset.rows, +c.dataset.group];)");
  EXPECT_NE(heat.as_array()[0].as_string().find("1024 workers by 100 steps"), json::string::npos)
      << heat;
  EXPECT_EQ(heat.as_array()[2],
            json::value(3));  // 1024 ranks in 342 rows of 3: a straggler shows as its row's longest
  // Zoom from the keyboard: "+" on the focused map shows a quarter of the ranks, one per row;
  // "0" shows them all again.
  absl::StatusOr<std::string> map = browser_->Find(R"(canvas[aria-label^="Step time, worker"])");
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_TRUE(browser_->Type(*map, "+").ok());
  EXPECT_TRUE(browser_->WaitFor(
      R"(document.querySelector('canvas[aria-label^="Step time, worker"]').dataset.group === '1')",
      5'000));
  EXPECT_EQ(
      Js(R"(return +document.querySelector('canvas[aria-label^="Step time, worker"]').dataset.rows;)"),
      json::value(256));
  ASSERT_TRUE(browser_->Type(*map, "0").ok());
  EXPECT_TRUE(browser_->WaitFor(
      R"(document.querySelector('canvas[aria-label^="Step time, worker"]').dataset.group === '3')",
      5'000));
  ExpectNoConsoleErrors("1024-worker capture page");
  FullPageShot("capture-page-1024-workers");
  std::ofstream(UiScreenshotDir() + "/load-times.txt")
      << "1024 workers x 100 steps, Chromium headless 1280x800: cold " << cold << " ms, warm "
      << warm << " ms\n";
}

}  // namespace
}  // namespace podscope::testing
