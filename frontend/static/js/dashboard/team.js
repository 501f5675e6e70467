// Team dashboard: loads the team's rollup from the API (the numbers of record) and draws, per day, cost, facility
// energy and carbon as three charts (side by side on a wide screen, one under the other on a phone: the CSS grid
// of .chart-row), and GPU energy stacked by split method.
(function () {
  "use strict";
  const section = document.getElementById("team-charts");
  // The split methods, their labels and colours: apps/jobs/methods.py, through json_script.
  const legend = JSON.parse(document.getElementById("split-methods").textContent);
  const methodColors = Object.fromEntries(legend.map((m) => [m.method, m.colour]));
  const methodLabels = Object.fromEntries(legend.map((m) => [m.method, m.label]));
  const config = { displaylogo: false, responsive: true };

  // One day's chart: its bars, its title (what and in which unit), its axis's unit.
  function perDay(id, traces, title, unit, tickformat) {
    Plotly.newPlot(document.getElementById(id), traces, {
      // room above the plot for a legend of two entries wrapped on two lines (a phone, a third of a screen)
      barmode: "stack", showlegend: true, margin: { t: 105, r: 10, b: 10, l: 60 },
      title: { text: title, x: 0, xanchor: "left", y: 0.98, yref: "container", yanchor: "top", font: { size: 15 } },
      xaxis: { type: "category", automargin: true },
      yaxis: { title: { text: unit }, automargin: true, tickformat: tickformat, rangemode: "tozero" },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
    }, config);
  }

  // No chart to draw: each place says why.
  function say(words) {
    document.getElementById("team-chart").textContent = words;
    document.getElementById("method-chart").textContent = words;
  }

  function draw(rollup) {
    const days = rollup.periods.map((p) => p.period);
    if (!days.length) { say("No jobs in this period."); return; }
    const cur = rollup.currency || "";
    const bars = (name, key, color) => ({
      type: "bar", name: name, x: days, y: rollup.periods.map((p) => Number(p[key])), marker: { color: color },
    });
    perDay("team-cost-chart", [bars("cost (" + cur + ")", "cost", "#6a4c93")], "Cost per day (" + cur + ")", cur, ",.2f");
    perDay("team-energy-chart", [bars("facility energy (kWh)", "facility_kwh", "#1b6ca8")],
      "Facility energy per day (kWh)", "kWh (facility)", ",.1f");
    perDay("team-carbon-chart", [
      bars("operational CO2e (kg)", "operational_kg", "#3fa34d"), bars("embodied CO2e (kg)", "embodied_kg", "#a5d6a7"),
    ], "Carbon per day (kg CO2e)", "kg CO2e", ",.1f");

    const methods = Object.keys(methodColors).filter((m) => rollup.periods.some((p) => p.energy_by_method_j[m]));
    Plotly.newPlot(document.getElementById("method-chart"), methods.map((m) => ({
      type: "bar", name: methodLabels[m], marker: { color: methodColors[m] }, x: days,
      y: rollup.periods.map((p) => (p.energy_by_method_j[m] || 0) / 3.6e6),
    })), {
      // The legend even for a single method: which method made the number is the point of this chart.
      barmode: "stack", showlegend: true, xaxis: { type: "category", automargin: true },
      yaxis: { title: { text: "GPU energy (kWh)" }, automargin: true, tickformat: ",.1f" },
      title: { text: "GPU energy per day (kWh), by split method", x: 0, xanchor: "left", font: { size: 15 } },
      margin: { t: 80, r: 10, b: 10, l: 60 },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", title: { text: "Split method: " } },
    }, config);
  }

  fetch(section.dataset.rollupUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
    .then(draw)
    .catch((status) => say("Could not load the figures (" + status + ")."));
})();
