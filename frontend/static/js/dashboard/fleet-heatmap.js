// Fleet page, for admins and finance: each GPU's mean power per hour (or day, or week) of the period, GPUs as
// rows, from the page's own figures (json_script "gpu-heatmap-data", apps/dashboard/heatmap.py). A click on a
// cell opens its GPU's page; the same links are listed under the chart for the keyboard.
(function () {
  "use strict";
  const el = document.getElementById("gpu-heatmap");
  const source = document.getElementById("gpu-heatmap-data");
  if (!el || !source) return;
  const grid = JSON.parse(source.textContent);
  if (!grid.rows.length) { el.textContent = "No GPU-hour ingested in this period."; return; }
  // Plotly reads a few HTML tags in its labels: a host's name is text, never markup.
  const plain = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const names = grid.rows.map((r) => plain(r.name));
  const unit = grid.bucket_h === 1 ? "hour" : grid.bucket_h === 24 ? "day" : "week";
  // From 0 W, so that an idle GPU reads dark beside a busy one (Plotly takes zmin only with zmax).
  const zmax = grid.rows.reduce((m, r) => r.power_w.reduce((n, w) => (w !== null && w > n ? w : n), m), 1);
  // A cell's GPU energy: its mean power over its hours ingested (W x h / 1000 = kWh).
  const cells = grid.rows.map((r) => r.power_w.map((w, i) => [w === null ? null : w * r.hours[i] / 1000, r.held_pct[i], r.hours[i]]));
  Plotly.newPlot(el, [{
    type: "heatmap", x: grid.columns, y: names, z: grid.rows.map((r) => r.power_w), customdata: cells,
    colorscale: "Viridis", zmin: 0, zmax: zmax, hoverongaps: false, xgap: 1, ygap: 1,
    colorbar: { title: { text: "mean GPU power (W)", side: "right" } },
    hovertemplate: "%{y}<br>" + unit + " from %{x} UTC<br>mean power %{z:,.0f} W<br>" +
      "GPU energy %{customdata[0]:,.2f} kWh<br>held by jobs %{customdata[1]:.0f} % of the time<br>" +
      "%{customdata[2]} hour(s) ingested<extra></extra>",
  }], {
    margin: { t: 50, r: 10, b: 40, l: 10 },
    height: Math.max(260, 110 + 18 * names.length),
    title: { text: "Mean GPU power per " + unit + " (W), UTC", x: 0, xanchor: "left", font: { size: 15 } },
    xaxis: { automargin: true, title: { text: "UTC" } },
    yaxis: { automargin: true, autorange: "reversed", type: "category" },
  }, { displaylogo: false, responsive: true });
  el.on("plotly_click", (event) => {
    const point = event.points && event.points[0];
    if (!point) return;
    const row = grid.rows[point.pointIndex[0]];
    if (row) window.location.assign(row.url);
  });
})();
