// Every page (base.html), progressive enhancement: without it the pages work as server-rendered.
// - Tables: each data table scrolls inside its card (phones), keeps its money column (th.money) in sight, sorts by
//   a click on (or Enter on) its header, and gets a filter box that hides the rows not containing the text typed.
// - Date-range forms (form.period with start and end): quick ranges, last 7 days, last 30 days,
//   this month, last month (UTC days; the end is exclusive, as the pages read it).
// - Copy buttons (button[data-copy]): the text of the element they name, to the clipboard.
(function () {
  "use strict";

  // A cell's value to sort by: data-sort if the template gave one, else a number when the text reads
  // as one ("1,234.5 kWh", "81 %", "12.30 EUR"), else the text.
  function cellKey(cell) {
    if (!cell) return "";
    const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    const m = /^[-+]?[\d,]*\.?\d+(e[-+]?\d+)?/i.exec(raw.replace(/\s/g, ""));
    if (m && m[0].replace(/[,+-]/g, "") !== "") return Number(m[0].replace(/,/g, ""));
    return raw.toLowerCase();
  }

  function compare(a, b) {
    if (typeof a === "number" && typeof b === "number") return a - b;
    if (typeof a === "number") return -1;
    if (typeof b === "number") return 1;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  // The rows that hold data: not the "nothing in this period" row (one cell spanning the table).
  function dataRows(tbody) {
    return Array.from(tbody.rows).filter((r) => !(r.cells.length === 1 && r.cells[0].colSpan > 1));
  }

  function sortable(table) {
    const head = table.tHead && table.tHead.rows[0];
    const tbody = table.tBodies[0];
    if (!head || !tbody) return;
    Array.from(head.cells).forEach((th, col) => {
      if (!th.textContent.trim() || th.querySelector("a, button, input, select, textarea")) return;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.innerHTML = th.innerHTML;
      th.textContent = "";
      th.appendChild(button);
      th.setAttribute("aria-sort", "none");
      button.addEventListener("click", () => {
        const ascending = th.getAttribute("aria-sort") !== "ascending";
        Array.from(head.cells).forEach((other) => other.hasAttribute("aria-sort") && other.setAttribute("aria-sort", "none"));
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        const rows = dataRows(tbody);
        rows.sort((a, b) => compare(cellKey(a.cells[col]), cellKey(b.cells[col])) * (ascending ? 1 : -1));
        rows.forEach((r) => tbody.appendChild(r));
      });
    });
  }

  let filters = 0;
  function filterable(table, wrap) {
    const tbody = table.tBodies[0];
    if (!tbody || dataRows(tbody).length < 2) return;
    filters += 1;
    const id = "table-filter-" + filters;
    const box = document.createElement("div");
    box.className = "table-filter";
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = "Filter rows";
    const input = document.createElement("input");
    input.type = "search";
    input.id = id;
    input.setAttribute("data-filter-for", table.id || "");
    const count = document.createElement("span");
    count.className = "hint";
    count.setAttribute("aria-live", "polite");
    input.addEventListener("input", () => {
      const needle = input.value.trim().toLowerCase();
      let shown = 0;
      const rows = dataRows(tbody);
      rows.forEach((r) => {
        const hit = !needle || r.textContent.toLowerCase().includes(needle);
        r.hidden = !hit;
        if (hit) shown += 1;
      });
      count.textContent = needle ? shown + " of " + rows.length + " rows" : "";
    });
    box.append(label, input, count);
    wrap.parentNode.insertBefore(box, wrap);
  }

  // The money column (its header th.money, in the table's head or its first row): each of its cells too, so that
  // the column stays in sight while the table scrolls sideways (fleetwatt.css). A cell across several columns
  // ("No job in this period") is left.
  function moneyColumn(table) {
    const head = table.tHead ? table.tHead.rows[0] : table.rows[0];
    if (!head) return;
    let at = -1;
    let x = 0;
    for (const th of head.cells) { if (th.classList.contains("money")) { at = x; break; } x += th.colSpan; }
    if (at < 0) return;
    Array.from(table.rows).filter((row) => row !== head).forEach((row) => {
      let col = 0;
      for (const cell of row.cells) {
        if (col === at && cell.colSpan === 1) cell.classList.add("money");
        col += cell.colSpan;
      }
    });
  }

  document.querySelectorAll("main table").forEach((table) => {
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    table.parentNode.insertBefore(wrap, table);
    wrap.appendChild(table);
    moneyColumn(table);
    if (table.classList.contains("record") || table.dataset.sortable === "off") return;
    sortable(table);
    filterable(table, wrap);
  });

  // Quick ranges on the date-range forms.
  const iso = (d) => d.toISOString().slice(0, 10);
  const day = (y, m, d) => new Date(Date.UTC(y, m, d));
  function ranges(now) {
    const today = day(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
    const tomorrow = day(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() + 1);
    const back = (n) => day(tomorrow.getUTCFullYear(), tomorrow.getUTCMonth(), tomorrow.getUTCDate() - n);
    const month = day(today.getUTCFullYear(), today.getUTCMonth(), 1);
    const lastMonth = day(today.getUTCFullYear(), today.getUTCMonth() - 1, 1);
    return [
      ["Last 7 days", back(7), tomorrow],
      ["Last 30 days", back(30), tomorrow],
      ["This month", month, tomorrow],
      ["Last month", lastMonth, month],
    ];
  }
  document.querySelectorAll("form.period").forEach((form) => {
    const start = form.querySelector("input[name=start]");
    const end = form.querySelector("input[name=end]");
    if (!start || !end) return;
    const nav = document.createElement("p");
    nav.className = "quick-ranges";
    nav.setAttribute("aria-label", "Quick ranges");
    nav.setAttribute("role", "group");
    ranges(new Date()).forEach(([label, from, to]) => {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = label;
      button.dataset.start = iso(from);
      button.dataset.end = iso(to);
      button.addEventListener("click", () => {
        start.value = button.dataset.start;
        end.value = button.dataset.end;
        form.requestSubmit ? form.requestSubmit() : form.submit();
      });
      nav.appendChild(button);
    });
    form.appendChild(nav);
    // A reversed range is refused before it is sent (the server refuses it too, with the same words).
    form.addEventListener("submit", (event) => {
      if (start.value && end.value && start.value >= end.value) {
        event.preventDefault();
        end.setCustomValidity("The end must be after the start.");
        end.reportValidity();
      }
    });
    [start, end].forEach((input) => input.addEventListener("input", () => end.setCustomValidity("")));
  });

  // Copy buttons: data-copy names the element whose text goes to the clipboard; the button says it worked.
  document.querySelectorAll("button[data-copy]").forEach((button) => {
    const source = document.querySelector(button.dataset.copy);
    if (!source || !navigator.clipboard) return;
    const label = button.textContent;
    button.addEventListener("click", () => {
      navigator.clipboard.writeText(source.textContent.trim()).then(
        () => { button.textContent = "Copied"; setTimeout(() => { button.textContent = label; }, 2000); },
        () => { button.textContent = "Select and copy it by hand"; },
      );
    });
  });
})();
