// Team dashboard: per day, cost, energy and carbon side by side (three panels sharing the days).
(function () {
  "use strict";
  const rollup = JSON.parse(document.getElementById("rollup-data").textContent);
  const el = document.getElementById("team-chart");
  const days = rollup.periods.map((p) => p.period);
  if (!days.length) { el.textContent = "No jobs in this period."; return; }
  const cur = rollup.currency || "";
  const traces = [
    { type: "bar", name: "cost (" + cur + ")", x: days, y: rollup.periods.map((p) => Number(p.cost)), xaxis: "x", yaxis: "y", marker: { color: "#6a4c93" } },
    { type: "bar", name: "facility energy (kWh)", x: days, y: rollup.periods.map((p) => p.facility_kwh), xaxis: "x2", yaxis: "y2", marker: { color: "#1b6ca8" } },
    { type: "bar", name: "operational CO2e (kg)", x: days, y: rollup.periods.map((p) => p.operational_kg), xaxis: "x3", yaxis: "y3", marker: { color: "#3fa34d" } },
    { type: "bar", name: "embodied CO2e (kg)", x: days, y: rollup.periods.map((p) => p.embodied_kg), xaxis: "x3", yaxis: "y3", marker: { color: "#a5d6a7" } },
  ];
  Plotly.newPlot(el, traces, {
    grid: { rows: 1, columns: 3, pattern: "independent" },
    xaxis: { type: "category" }, xaxis2: { type: "category" }, xaxis3: { type: "category" },
    barmode: "stack",
    margin: { t: 30, r: 10, b: 60, l: 50 },
    annotations: [
      { text: "Cost (" + cur + ")", xref: "x domain", yref: "y domain", x: 0.5, y: 1.1, showarrow: false },
      { text: "Energy (kWh)", xref: "x2 domain", yref: "y2 domain", x: 0.5, y: 1.1, showarrow: false },
      { text: "Carbon (kg CO2e)", xref: "x3 domain", yref: "y3 domain", x: 0.5, y: 1.1, showarrow: false },
    ],
    legend: { orientation: "h", y: -0.2 },
  }, { displaylogo: false, responsive: true });
})();
