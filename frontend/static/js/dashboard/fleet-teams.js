// Fleet dashboard (admins, finance): teams side by side on cost, facility energy and CO2e, from the API.
(function () {
  "use strict";
  const el = document.getElementById("teams-chart");

  function draw(teams) {
    if (!teams.length) { el.textContent = "No team used GPUs in this period."; return; }
    const names = teams.map((t) => t.team);
    const cur = el.dataset.currency || "";
    const panel = (key, name, axis, color) => ({
      type: "bar", name: name, x: names, y: teams.map((t) => Number(t[key])), xaxis: "x" + axis, yaxis: "y" + axis,
      marker: { color: color },
    });
    Plotly.newPlot(el, [
      panel("cost", "cost (" + cur + ")", "", "#6a4c93"),
      panel("facility_kwh", "facility energy (kWh)", "2", "#1b6ca8"),
      panel("operational_kg", "operational CO2e (kg)", "3", "#3fa34d"),
      panel("embodied_kg", "embodied CO2e (kg)", "3", "#a5d6a7"),
    ], {
      // Each panel its title and unit; the legend above the plot, clear of the team names below.
      grid: { rows: 1, columns: 3, pattern: "independent", xgap: 0.15 }, barmode: "stack", showlegend: true,
      title: { text: "Teams compared over the period", x: 0, xanchor: "left", y: 0.98, yref: "container", yanchor: "top", font: { size: 15 } },
      margin: { t: 130, r: 10, b: 20, l: 60 },
      legend: { orientation: "h", x: 0, y: 1.1, yanchor: "bottom" },
      xaxis: { automargin: true, tickangle: -30 }, xaxis2: { automargin: true, tickangle: -30 }, xaxis3: { automargin: true, tickangle: -30 },
      yaxis: { title: { text: cur || "cost" }, automargin: true, tickformat: ",.0f" },
      yaxis2: { title: { text: "kWh" }, automargin: true, tickformat: ",.0f" },
      yaxis3: { title: { text: "kg CO2e" }, automargin: true, tickformat: ",.0f" },
      annotations: [
        { text: "Cost (" + (cur || "-") + ")", xref: "x domain", yref: "y domain", x: 0.5, y: 1.02, yanchor: "bottom", showarrow: false },
        { text: "Facility energy (kWh)", xref: "x2 domain", yref: "y2 domain", x: 0.5, y: 1.02, yanchor: "bottom", showarrow: false },
        { text: "Carbon (kg CO2e)", xref: "x3 domain", yref: "y3 domain", x: 0.5, y: 1.02, yanchor: "bottom", showarrow: false },
      ],
    }, { displaylogo: false, responsive: true });
  }

  fetch(el.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
    .then(draw)
    .catch((status) => { el.textContent = "Could not load the figures (" + status + ")."; });
})();
