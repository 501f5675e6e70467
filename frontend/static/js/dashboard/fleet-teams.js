// Fleet dashboard (admins, finance): teams side by side on cost, facility energy and CO2e, from the API.
(function () {
  "use strict";
  const el = document.getElementById("teams-chart");

  function draw(teams) {
    if (!teams.length) { el.textContent = "No team used GPUs in this period."; return; }
    const names = teams.map((t) => t.team);
    const panel = (key, name, axis, color) => ({
      type: "bar", name: name, x: names, y: teams.map((t) => Number(t[key])), xaxis: "x" + axis, yaxis: "y" + axis,
      marker: { color: color },
    });
    Plotly.newPlot(el, [
      panel("cost", "cost", "", "#6a4c93"),
      panel("facility_kwh", "facility energy (kWh)", "2", "#1b6ca8"),
      panel("operational_kg", "operational CO2e (kg)", "3", "#3fa34d"),
      panel("embodied_kg", "embodied CO2e (kg)", "3", "#a5d6a7"),
    ], {
      grid: { rows: 1, columns: 3, pattern: "independent" }, barmode: "stack",
      margin: { t: 20, r: 10, b: 60, l: 50 }, legend: { orientation: "h", y: -0.25 },
    }, { displaylogo: false, responsive: true });
  }

  fetch(el.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
    .then(draw)
    .catch((status) => { el.textContent = "Could not load the figures (" + status + ")."; });
})();
