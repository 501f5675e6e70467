"""One way to say each thing (issue 35): the rules a page's visible text keeps, checked by the browser walks.

`SHOWN_JS`, run in the page, collects every piece of text a person can read there: the text nodes (not scripts,
styles or a drawn chart's SVG), the titles, labels and placeholders, the document's title, and each Plotly chart's
legend entries, titles, axis titles, annotations and hover texts. Each piece comes with its table cell's column and
row headers, the text of its nearest block (a cell, an item, a paragraph), and whether it is code (<code>, <pre>) or
a name that a source or a user chose (<bdi>). `shown_problems(pieces)` says which rule each piece breaks:

- no code identifier shown as a word: no snake_case token, no file path (a command or a key in <code> may hold
  them), and no value of the apps' vocabularies (finding kinds, split methods, job states...), in <code> neither;
- one name per GPU: "host/index" (apps.core.units.glossary.gpu_name), never "host/gpuN", "host / GPU N" or "GPU N";
- numbers one way: thousands grouped, at most 3 decimals, money to its currency's minor unit;
- every clock time says its zone (UTC, or a zone's name such as Europe/Berlin) in its text, block or headers;
- every kWh says which energy it is (GPU, server or facility energy) in its text or its headers.
"""

from __future__ import annotations

import re
from typing import Any

from apps.core.units.money import MINOR_EXPONENTS, minor_exponent
from apps.fleet.models import Cluster, TeamRule
from apps.jobs.methods import Method
from apps.jobs.states import JobState
from apps.waste.kinds import FlagKind

SHOWN_JS = """() => {
  const BLOCK = "td, th, li, p, h1, h2, h3, h4, caption, label, summary, dt, dd, pre, option, button, legend";
  const squash = (s) => String(s || "").replace(/\\s+/g, " ").trim();
  const rowHeader = (row, cell) => (row.cells[0] && row.cells[0] !== cell ? squash(row.cells[0].textContent) : "");
  function headers(el) {
    const cell = el && el.closest("td, th");
    const table = cell && cell.closest("table");
    if (!table) return "";
    const row = cell.parentElement;
    let col = 0;
    for (const c of row.cells) { if (c === cell) break; col += c.colSpan; }
    // the column's header: the table's head, else a first row of header cells
    const first = table.rows[0];
    const head = table.tHead ? table.tHead.rows[0] : ([...first.cells].every((c) => c.tagName === "TH") ? first : null);
    let column = "";
    if (head && head !== row) {
      let x = 0;
      for (const th of head.cells) {
        if (col < x + th.colSpan) { column = squash(th.textContent); break; }
        x += th.colSpan;
      }
    }
    return column + " | " + rowHeader(row, cell);
  }
  const pieces = [];
  function add(text, el, where, block) {
    text = squash(text);
    if (!text) return;
    const near = el && el.closest(BLOCK);
    pieces.push({
      text: text, where: where, headers: el && where !== "chart" ? headers(el) : "",
      block: block !== undefined ? block : squash(near ? near.textContent : text),
      code: !!(el && el.closest("code, pre, kbd, samp")), name: !!(el && el.closest("bdi")),
    });
  }
  add(document.title, null, "title");
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (el.closest("script, style, template, noscript, .js-plotly-plot")) continue;
    add(n.nodeValue, el, "text");
  }
  for (const el of document.body.querySelectorAll("[title], [aria-label], [placeholder], [alt]")) {
    if (el.closest(".js-plotly-plot") && !el.classList.contains("js-plotly-plot")) continue;
    for (const a of ["title", "aria-label", "placeholder", "alt"]) {
      if (el.hasAttribute(a)) add(el.getAttribute(a), el, a);
    }
  }
  // Each drawn chart: what its legend, titles, annotations and hover boxes say (placeholders dropped).
  const title = (t) => (t && typeof t === "object" ? t.text : t);
  const plain = (s) => squash(String(s || "").replace(/<extra>.*?<\\/extra>/g, "").replace(/%\\{[^}]*\\}/g, "")
    .replace(/<br>/g, " ").replace(/<[^>]+>/g, ""));
  for (const gd of document.querySelectorAll(".js-plotly-plot")) {
    const layout = gd.layout || {}, full = gd._fullLayout || {};
    const texts = [title(layout.title)];
    for (const t of gd.data || []) texts.push(t.name, t.hovertemplate, t.colorbar && title(t.colorbar.title));
    for (const [key, axis] of Object.entries(layout)) {
      if (/^[xy]axis\\d*$/.test(key) && axis) texts.push(title(axis.title));
    }
    for (const a of layout.annotations || []) texts.push(a.text);
    if (layout.legend) texts.push(title(layout.legend.title));
    for (const t of texts) { const p = plain(t); if (p) add(p, gd, "chart", p); }
    // an axis of dates and times says their zone, in its title or the chart's
    for (const [key, axis] of Object.entries(full)) {
      if (/^xaxis\\d*$/.test(key) && axis && axis.type === "date") {
        const words = plain(title((layout[key] || {}).title)) + " | " + plain(title(layout.title));
        pieces.push({text: "00:00", where: "chart-dates", headers: "", block: words, code: false, name: false});
      }
    }
  }
  return pieces;
}"""

SNAKE = re.compile(r"(?<![\w./@-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/@-])")
PATH = re.compile(r"(?<![\w.-])(?:[\w.-]+/)+[\w.-]+\.(?:md|py|html|js|css|txt|json|ya?ml|toml|cfg)\b")
GPU_OTHER_NAMES = re.compile(r"[\w.-]+/gpu\d+\b|[\w.-]+ / GPU \d+\b|(?<![\w/])GPU \d+\b")
NUMBER = re.compile(r"(?<![\w.,/:#-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w,/:-]|\.\d)")
CURRENCIES = {"EUR", "USD", "GBP", "CHF", "SEK", "NOK", "DKK", "PLN", "CZK", "CAD", "AUD", *MINOR_EXPONENTS}
CURRENCY_AFTER = re.compile(r"\s*(" + "|".join(sorted(CURRENCIES)) + r")\b")
CLOCK = re.compile(r"(?<![\d:])\d{1,2}:\d{2}(?::\d{2})?(?![\d:])")
ZONE = re.compile(r"\bUTC\b|\b[A-Z][a-z]+/[A-Z][A-Za-z_]+")
KWH = re.compile(r"\bkWh\b")
WHICH_ENERGY = re.compile(r"\b(GPU|server|facility)\b", re.IGNORECASE)
MAX_DECIMALS = 3


def vocabulary_codes() -> set[str]:
    """The apps' code values that have a label of their own (a finding kind, a split method, a job state...)."""
    enums: list[Any] = [FlagKind, Method, JobState, TeamRule.Kind, Cluster.Scheduler]
    return {str(member.value) for enum in enums for member in enum if "_" in str(member.value)}


def _is_year(whole: str, decimals: str) -> bool:
    return not decimals and len(whole) == 4 and 1970 <= int(whole) <= 2100


def number_problems(text: str) -> list[str]:
    """The figures of a text that are not written the pages' way."""
    found = []
    for m in NUMBER.finditer(text):
        whole, fraction = m.group(1), m.group(2) or ""
        if "," not in whole and len(whole) > 3 and not _is_year(whole, fraction):
            found.append(f"thousands not grouped: {m.group(0)}")
        if len(fraction) - 1 > MAX_DECIMALS:
            found.append(f"more than {MAX_DECIMALS} decimals: {m.group(0)}")
        currency = CURRENCY_AFTER.match(text, m.end())
        if currency and max(len(fraction) - 1, 0) != minor_exponent(currency.group(1)):
            found.append(f"money not to the {currency.group(1)} minor unit: {m.group(0)} {currency.group(1)}")
    return found


def piece_problems(piece: dict[str, Any], codes: set[str]) -> list[str]:
    """The rules one piece of shown text breaks (the module's docstring)."""
    text, found = piece["text"], []
    if piece["name"]:
        return []  # a job's, a user's or a host's own name, as they chose it
    found += [f"code value shown: {c}" for c in codes if re.search(rf"(?<![\w-]){c}(?![\w-])", text)]
    if not piece["code"]:
        found += [f"code identifier shown: {m}" for m in SNAKE.findall(text) if m not in codes]
        found += [f"file path shown: {m.group(0)}" for m in PATH.finditer(text)]
        found += number_problems(text)
    found += [f"GPU not named host/index: {m}" for m in GPU_OTHER_NAMES.findall(text)]
    context = " ".join((text, piece["block"], piece["headers"]))
    if not piece["code"] and CLOCK.search(text) and not ZONE.search(context):
        found.append("a time without its zone")
    if not piece["code"] and KWH.search(text) and not WHICH_ENERGY.search(f"{text} {piece['headers']}"):
        found.append("kWh without saying which energy")
    return found


def shown_problems(pieces: list[dict[str, Any]]) -> list[str]:
    """'rule: the text' for each rule a piece breaks, each once."""
    codes = vocabulary_codes()
    lines = [
        f"{problem} [{piece['where']}] {piece['text'][:160]!r}"
        for piece in pieces
        for problem in piece_problems(piece, codes)
    ]
    return list(dict.fromkeys(lines))
