// Fleet dashboard (admins, finance): teams side by side on cost, facility energy and CO2e, from the API: three
// charts, side by side on a wide screen and one under the other on a phone (the CSS grid of .chart-row).
(function () {
  "use strict";
  const row = document.getElementById("teams-chart");
  const config = { displaylogo: false, responsive: true };

  function draw(teams) {
    if (!teams.length) { row.textContent = "No team used GPUs in this period."; return; }
    // Each team as the table below names it; Plotly reads a few HTML tags in its labels: a name is text, never markup.
    const plain = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
    const names = teams.map((t) => plain(t.display_name || t.team));
    const cur = row.dataset.currency || "";
    const bars = (key, name, color) => ({ type: "bar", name: name, x: names, y: teams.map((t) => Number(t[key])), marker: { color: color } });
    const chart = (id, traces, title, unit) => Plotly.newPlot(document.getElementById(id), traces, {
      // room above the plot for a legend of two entries wrapped on two lines (a phone, a third of a screen)
      barmode: "stack", showlegend: true, margin: { t: 105, r: 10, b: 20, l: 60 },
      title: { text: title, x: 0, xanchor: "left", y: 0.98, yref: "container", yanchor: "top", font: { size: 15 } },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      xaxis: { automargin: true, tickangle: -30 },
      yaxis: { title: { text: unit }, automargin: true, tickformat: ",.0f", rangemode: "tozero" },
    }, config);
    chart("teams-cost-chart", [bars("cost", "cost (" + (cur || "-") + ")", "#6a4c93")], "Cost per team (" + (cur || "-") + ")", cur || "cost");
    chart("teams-energy-chart", [bars("facility_kwh", "facility energy (kWh)", "#1b6ca8")], "Facility energy per team (kWh)", "kWh (facility)");
    chart("teams-carbon-chart", [
      bars("operational_kg", "operational CO2e (kg)", "#3fa34d"), bars("embodied_kg", "embodied CO2e (kg)", "#a5d6a7"),
    ], "Carbon per team (kg CO2e)", "kg CO2e");
  }

  fetch(row.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
    .then(draw)
    .catch((status) => { row.textContent = "Could not load the figures (" + status + ")."; });
})();
