// Fleet dashboard: daily GPU energy per team, stacked by split method (kWh), loaded from the API.
(function () {
  "use strict";
  const el = document.getElementById("energy-chart");
  // The split methods, their labels and colours: apps/jobs/methods.py, through json_script.
  const legend = JSON.parse(document.getElementById("split-methods").textContent);
  const methods = legend.map((m) => m.method);
  const colors = Object.fromEntries(legend.map((m) => [m.method, m.colour]));
  const labels = Object.fromEntries(legend.map((m) => [m.method, m.label]));

  function draw(rows) {
    if (!rows.length) { el.textContent = "No energy in this period."; return; }
    const keys = [];
    const seen = new Set();
    rows.forEach((r) => {
      const k = r.day + "|" + r.team;
      if (!seen.has(k)) { seen.add(k); keys.push([r.day, r.team]); }
    });
    const traces = methods.filter((m) => rows.some((r) => r.method === m)).map((m) => {
      const byKey = {};
      rows.filter((r) => r.method === m).forEach((r) => { byKey[r.day + "|" + r.team] = r.energy_j / 3.6e6; });
      return {
        type: "bar", name: labels[m], marker: { color: colors[m] },
        x: [keys.map((k) => k[0]), keys.map((k) => k[1])],
        y: keys.map((k) => byKey[k[0] + "|" + k[1]] || 0),
        hovertemplate: "%{x}<br>" + labels[m] + ": %{y:,.2f} kWh (GPU)<extra></extra>",
      };
    });
    // The legend always (one method is still a method), above the plot: below, it sat on the team names.
    Plotly.newPlot(el, traces, {
      barmode: "stack", showlegend: true, margin: { t: 80, r: 10, b: 10, l: 60 },
      title: { text: "GPU energy per team per day (kWh), by split method", x: 0, xanchor: "left", font: { size: 15 } },
      xaxis: { automargin: true, tickangle: -45 },
      yaxis: { title: { text: "GPU energy (kWh)" }, automargin: true, tickformat: ",.1f" },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", title: { text: "Split method: " } },
    }, { displaylogo: false, responsive: true });
  }

  fetch(el.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
    .then(draw)
    .catch((status) => { el.textContent = "Could not load the figures (" + status + ")."; });
})();
