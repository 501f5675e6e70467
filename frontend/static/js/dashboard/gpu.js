// A GPU's page: per hour, the energy its jobs and its idle time used (kWh, stacked) and its mean power (W),
// from the page's own figures (json_script "gpu-chart-data").
(function () {
  "use strict";
  const el = document.getElementById("gpu-chart");
  const hours = JSON.parse(document.getElementById("gpu-chart-data").textContent);
  if (!hours.length) { el.textContent = "No hour ingested in this period."; return; }
  const x = hours.map((h) => h.hour);
  Plotly.newPlot(el, [
    { type: "bar", name: "its jobs' GPU energy (kWh)", x: x, y: hours.map((h) => h.jobs_kwh), marker: { color: "#1b6ca8" },
      hovertemplate: "%{x} UTC<br>its jobs: %{y:,.3f} kWh (GPU)<extra></extra>" },
    { type: "bar", name: "idle GPU energy (kWh)", x: x, y: hours.map((h) => h.idle_kwh), marker: { color: "#adb5bd" },
      hovertemplate: "%{x} UTC<br>idle: %{y:,.3f} kWh (GPU)<extra></extra>" },
    { type: "scatter", mode: "lines+markers", name: "mean power (W)", x: x, y: hours.map((h) => h.power_w), yaxis: "y2",
      line: { color: "#e8590c" }, hovertemplate: "%{x} UTC<br>%{y:,.0f} W<extra></extra>" },
  ], {
    barmode: "stack", showlegend: true, margin: { t: 80, r: 10, b: 10, l: 60 },
    title: { text: "GPU energy (kWh) and mean power (W) per hour, UTC", x: 0, xanchor: "left", font: { size: 15 } },
    legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
    xaxis: { automargin: true, title: { text: "UTC" } },
    yaxis: { title: { text: "GPU energy (kWh)" }, automargin: true, tickformat: ",.2f" },
    yaxis2: { title: { text: "power (W)" }, overlaying: "y", side: "right", rangemode: "tozero", automargin: true, tickformat: ",.0f" },
  }, { displaylogo: false, responsive: true });
})();
