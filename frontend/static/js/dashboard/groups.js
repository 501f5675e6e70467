// Job groups page: each group's runs stacked by how they ended (completed, failed, cancelled, running or unknown),
// in cost, facility energy or CO2e; the figures come with the page (json_script "groups-chart").
(function () {
  "use strict";
  const el = document.getElementById("groups-chart");
  const data = JSON.parse(document.getElementById("groups-chart-data").textContent);
  const picker = document.getElementById("groups-metric");
  const colors = { completed: "#2f9e44", failed: "#e03131", cancelled: "#f08c00", other: "#adb5bd" };
  const units = { cost: data.currency || "cost", facility_kwh: "kWh (facility)", co2e_kg: "kg CO2e" };

  function draw() {
    if (!data.groups.length) { el.textContent = "No job group had runs in this period."; return; }
    const metric = picker.value;
    const names = data.groups.map((g) => g.name);
    const traces = data.outcomes.map((o) => ({
      type: "bar", orientation: "h", name: o.label, y: names,
      x: data.groups.map((g) => g.outcomes[o.outcome][metric]), marker: { color: colors[o.outcome] },
      hovertemplate: "%{y}: %{x:,.2f} " + units[metric] + "<extra>" + o.label + "</extra>",
    }));
    Plotly.react(el, traces, {
      barmode: "stack", showlegend: true, margin: { t: 80, r: 10, b: 50, l: 20 },
      title: { text: "Runs by how they ended, per job group (" + units[metric] + ")", x: 0, xanchor: "left", font: { size: 15 } },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      xaxis: { title: { text: units[metric] }, tickformat: ",.0f" }, yaxis: { autorange: "reversed", automargin: true },
      height: Math.max(260, 70 * names.length + 120),
    }, { displaylogo: false, responsive: true });
  }

  picker.addEventListener("change", draw);
  draw();
})();
