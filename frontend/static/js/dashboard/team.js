// Team dashboard: loads the team's rollup from the API (the numbers of record) and draws, per day,
// cost, energy and carbon side by side, and GPU energy stacked by split method.
(function () {
  "use strict";
  const section = document.getElementById("team-charts");
  // The split methods' colours: apps/jobs/methods.py, through json_script.
  const legend = JSON.parse(document.getElementById("split-methods").textContent);
  const methodColors = Object.fromEntries(legend.map((m) => [m.method, m.colour]));

  function draw(rollup) {
    const el = document.getElementById("team-chart");
    const days = rollup.periods.map((p) => p.period);
    if (!days.length) { el.textContent = "No jobs in this period."; return; }
    const cur = rollup.currency || "";
    Plotly.newPlot(el, [
      { type: "bar", name: "cost (" + cur + ")", x: days, y: rollup.periods.map((p) => Number(p.cost)), xaxis: "x", yaxis: "y", marker: { color: "#6a4c93" } },
      { type: "bar", name: "facility energy (kWh)", x: days, y: rollup.periods.map((p) => p.facility_kwh), xaxis: "x2", yaxis: "y2", marker: { color: "#1b6ca8" } },
      { type: "bar", name: "operational CO2e (kg)", x: days, y: rollup.periods.map((p) => p.operational_kg), xaxis: "x3", yaxis: "y3", marker: { color: "#3fa34d" } },
      { type: "bar", name: "embodied CO2e (kg)", x: days, y: rollup.periods.map((p) => p.embodied_kg), xaxis: "x3", yaxis: "y3", marker: { color: "#a5d6a7" } },
    ], {
      grid: { rows: 1, columns: 3, pattern: "independent" },
      xaxis: { type: "category" }, xaxis2: { type: "category" }, xaxis3: { type: "category" },
      barmode: "stack", showlegend: true,
      margin: { t: 70, r: 10, b: 10, l: 60 },
      yaxis: { title: { text: cur || "cost" }, automargin: true, tickformat: ",.2f" },
      yaxis2: { title: { text: "kWh" }, automargin: true, tickformat: ",.1f" },
      yaxis3: { title: { text: "kg CO2e" }, automargin: true, tickformat: ",.1f" },
      annotations: [
        { text: "Cost (" + cur + ")", xref: "x domain", yref: "y domain", x: 0.5, y: 1.1, showarrow: false },
        { text: "Energy (kWh)", xref: "x2 domain", yref: "y2 domain", x: 0.5, y: 1.1, showarrow: false },
        { text: "Carbon (kg CO2e)", xref: "x3 domain", yref: "y3 domain", x: 0.5, y: 1.1, showarrow: false },
      ],
      legend: { orientation: "h", x: 0, y: 1.15, yanchor: "bottom" },
    }, { displaylogo: false, responsive: true });

    const methods = Object.keys(methodColors).filter((m) => rollup.periods.some((p) => p.energy_by_method_j[m]));
    Plotly.newPlot(document.getElementById("method-chart"), methods.map((m) => ({
      type: "bar", name: m, marker: { color: methodColors[m] }, x: days,
      y: rollup.periods.map((p) => (p.energy_by_method_j[m] || 0) / 3.6e6),
    })), {
      // The legend even for a single method: which method made the number is the point of this chart.
      barmode: "stack", showlegend: true, xaxis: { type: "category", automargin: true },
      yaxis: { title: { text: "GPU energy (kWh)" }, automargin: true, tickformat: ",.1f" },
      title: { text: "GPU energy per day (kWh), by split method", x: 0, xanchor: "left", font: { size: 15 } },
      margin: { t: 80, r: 10, b: 10, l: 60 },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", title: { text: "Split method: " } },
    }, { displaylogo: false, responsive: true });
  }

  fetch(section.dataset.rollupUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
    .then(draw)
    .catch((status) => { document.getElementById("team-chart").textContent = "Could not load the figures (" + status + ")."; });
})();
