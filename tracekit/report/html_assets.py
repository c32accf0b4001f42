"""The HTML report's inline style sheet and script: no network, no libraries, vanilla JS over SVG.

The script only adds interaction (zoom and pan of the timelines, their time axis, click-for-details,
copy buttons); every chart is already drawn by the server-side SVG, so a page printed or opened without
scripts still shows everything.
"""

CSS = """
:root { --fg: #1d2125; --muted: #5f6b76; --line: #d8dde3; --bg: #fff; --panel: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 16px 24px 40px; max-width: 1360px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line);
  padding-bottom: 4px; } h3 { font-size: 15px; margin: 16px 0 6px; }
h1, h2, h3, p, li, .sub { overflow-wrap: anywhere; } /* a kernel name in text wraps, never runs off the page */
.sub { color: var(--muted); font-size: 13px; word-break: break-all; }
.verdict { display: inline-block; padding: 2px 12px; border-radius: 12px; color: #fff; font-weight: 600;
           letter-spacing: .02em; }
.v-near-floor { background: #2e7d32; } .v-pipeline { background: #e67e22; } .v-kernel { background: #c0392b; }
.v-inconclusive { background: #607d8b; }
.top { display: grid; grid-template-columns: minmax(0, 1.1fr) minmax(0, 1fr); gap: 20px; align-items: start; }
@media (max-width: 1000px) { .top { grid-template-columns: 1fr; } }
ul.reasons { margin: 8px 0; padding-left: 20px; } ul.reasons li { margin: 3px 0; }
.caveat { color: #8a5a00; }
.tw { max-width: 100%; overflow-x: auto; } /* a table wider than the window scrolls inside, never the page */
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 10px 3px 0; text-align: left; vertical-align: top;
  min-width: 8ch; } /* no column squeezed to a character per line */
th { white-space: nowrap; } /* headers are a few words: one line each */
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num, th.num { white-space: nowrap; }
td.name { max-width: 620px; word-break: break-all; font-family: ui-monospace, Menlo, Consolas, monospace;
  font-size: 12px; }
.chart { width: 100%; height: auto; display: block; }
.chart text { font: 12px system-ui, sans-serif; fill: var(--fg); }
.chart .muted { fill: var(--muted); }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; margin: 6px 0; }
.legend span::before { content: ""; display: inline-block; width: 11px; height: 11px; margin-right: 5px;
  vertical-align: -1px; background: var(--c); border: 1px solid rgba(0,0,0,.25); }
.legend span.over::before { background: #d62728; height: 4px; vertical-align: 6px; }
.tl { border: 1px solid var(--line); border-radius: 6px; padding: 8px; margin: 8px 0 16px; background: var(--panel); }
.tl-bar { display: flex; gap: 6px; align-items: center; margin-bottom: 6px; font-size: 13px; flex-wrap: wrap; }
.tl-bar button, .copy { font: inherit; font-size: 12px; padding: 2px 10px; border: 1px solid #aab4be;
  background: #fff; border-radius: 4px; cursor: pointer; }
.tl-bar button:hover, .copy:hover { background: #eef2f6; }
.tl-range { color: var(--muted); margin-left: auto; font-variant-numeric: tabular-nums; }
.tl-body { display: grid; grid-template-columns: 120px minmax(0, 1fr); }
.tl-lanes div { height: 24px; line-height: 24px; font-size: 12px; color: var(--muted); white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; padding-right: 6px; }
.tl-svg { width: 100%; display: block; background: #fff; cursor: grab; touch-action: none; }
.tl-svg:active { cursor: grabbing; }
.tl-svg rect.k:hover, .tl-svg rect.m:hover { stroke: #000; stroke-width: 1px; vector-effect: non-scaling-stroke; }
.tl-axis { width: 100%; height: 22px; display: block; }
.tl-axis text { font: 11px system-ui, sans-serif; fill: var(--muted); }
.tl-detail { min-height: 20px; font-size: 12px; font-family: ui-monospace, Menlo, Consolas, monospace;
  white-space: pre-wrap; word-break: break-all; color: var(--fg); margin-top: 4px; }
.cmd { position: relative; margin: 6px 0 14px; }
.cmd pre { background: #0f1720; color: #e6edf3; padding: 10px 12px; border-radius: 6px; margin: 0;
  white-space: pre-wrap; word-break: break-all; font-size: 12px; padding-right: 72px; }
.cmd .copy { position: absolute; top: 6px; right: 6px; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  button, .tl-bar button, .copy { display: none !important; }
  section, .tl, .cmd, svg { break-inside: avoid; page-break-inside: avoid; }
  .top { grid-template-columns: 1fr 1fr; }
  .cmd pre { background: #fff; color: #000; border: 1px solid #999; }
  a { color: inherit; text-decoration: none; }
}
"""

JS = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("tk-data").textContent);

  function fmt(us) {  // microseconds -> short text
    var a = Math.abs(us);
    if (a >= 1000) return (us / 1000).toFixed(a >= 10000 ? 1 : 2) + " ms";
    if (a >= 1) return us.toFixed(a >= 100 ? 0 : 1) + " \u00b5s";
    return (us * 1000).toFixed(0) + " ns";
  }
  function niceStep(span, n) {
    var raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
  }

  function setupTimeline(box) {
    var svg = box.querySelector(".tl-svg"), axis = box.querySelector(".tl-axis");
    var rangeEl = box.querySelector(".tl-range"), detail = box.querySelector(".tl-detail");
    var full = parseFloat(box.dataset.durUs), height = parseFloat(box.dataset.height);
    var view = { x0: 0, w: full }, SVGNS = axis.namespaceURI;

    function draw() {
      view.w = Math.min(Math.max(view.w, full / 1e6, 0.001), full);
      view.x0 = Math.min(Math.max(view.x0, 0), full - view.w);
      svg.setAttribute("viewBox", view.x0 + " 0 " + view.w + " " + height);
      rangeEl.textContent = fmt(view.x0) + " \u2013 " + fmt(view.x0 + view.w) + "  (" + fmt(view.w) + " shown of " +
        fmt(full) + ")";
      while (axis.firstChild) axis.removeChild(axis.firstChild);
      var px = axis.getBoundingClientRect().width || 1000, step = niceStep(view.w, Math.max(2, px / 110));
      for (var t = Math.ceil(view.x0 / step) * step; t <= view.x0 + view.w + 1e-9; t += step) {
        var x = (t - view.x0) / view.w * px;
        var tick = document.createElementNS(SVGNS, "line");
        tick.setAttribute("x1", x); tick.setAttribute("x2", x); tick.setAttribute("y1", 0); tick.setAttribute("y2", 5);
        tick.setAttribute("stroke", "#8a96a3"); axis.appendChild(tick);
        var label = document.createElementNS(SVGNS, "text");
        label.setAttribute("x", Math.min(Math.max(x, 2), px - 2)); label.setAttribute("y", 17);
        label.setAttribute("text-anchor", x < 30 ? "start" : x > px - 30 ? "end" : "middle");
        label.textContent = fmt(t); axis.appendChild(label);
      }
    }
    function zoomAt(factor, frac) {
      var at = view.x0 + frac * view.w;
      view.w = view.w * factor; view.x0 = at - frac * view.w; draw();
    }
    box.querySelectorAll("button[data-zoom]").forEach(function (b) {
      b.addEventListener("click", function () {
        var z = b.dataset.zoom;
        if (z === "in") zoomAt(0.5, 0.5); else if (z === "out") zoomAt(2, 0.5);
        else if (z === "left") { view.x0 -= view.w * 0.4; draw(); }
        else if (z === "right") { view.x0 += view.w * 0.4; draw(); }
        else { view.x0 = 0; view.w = full; draw(); }
      });
    });
    svg.addEventListener("wheel", function (e) {
      e.preventDefault();
      var r = svg.getBoundingClientRect();
      if (e.shiftKey) { view.x0 += (e.deltaY || e.deltaX) / r.width * view.w; draw(); return; }
      zoomAt(Math.exp(e.deltaY * 0.0015), (e.clientX - r.left) / r.width);
    }, { passive: false });
    var drag = null;
    svg.addEventListener("pointerdown", function (e) {
      drag = { x: e.clientX, x0: view.x0, moved: false }; svg.setPointerCapture(e.pointerId);
    });
    svg.addEventListener("pointermove", function (e) {
      if (!drag) return;
      var dx = e.clientX - drag.x;
      if (Math.abs(dx) > 2) drag.moved = true;
      view.x0 = drag.x0 - dx / svg.getBoundingClientRect().width * view.w; draw();
    });
    svg.addEventListener("pointerup", function (e) {
      var clicked = drag && !drag.moved;
      drag = null;
      if (!clicked) return;
      var hit = document.elementFromPoint(e.clientX, e.clientY), t = hit && hit.querySelector("title");
      detail.textContent = t ? t.textContent : "";
    });
    svg.addEventListener("dblclick", function () { view.x0 = 0; view.w = full; draw(); });
    window.addEventListener("resize", draw);
    draw();
  }

  function copyText(text, button) {
    function done(ok) { button.textContent = ok ? "copied" : "select and copy"; setTimeout(function () {
      button.textContent = "copy"; }, 1500); }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallback()); });
    } else { done(fallback()); }
    function fallback() {
      var area = document.createElement("textarea");
      area.value = text; document.body.appendChild(area); area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
      document.body.removeChild(area); return ok;
    }
  }
  document.querySelectorAll("button.copy").forEach(function (b) {
    b.addEventListener("click", function () {
      copyText(document.getElementById(b.dataset.copy).textContent, b);
    });
  });
  document.querySelectorAll(".tl").forEach(setupTimeline);
  document.documentElement.setAttribute("data-tk-ready", String(data.timelines));
})();
"""
