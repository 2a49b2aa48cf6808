// pathgrade's browser UI: the little the pages do in the browser. Every page works without
// it (links carry the state in the URL); with it, selecting a span does not reload the
// trace, a trace-list row opens its trace, and the agent graph shows counts on hover.
"use strict";

function selectSpan(spanId, push) {
  const panel = document.getElementById("detail-" + spanId);
  if (!panel) return false;
  document.querySelectorAll(".span-detail").forEach((p) => { p.hidden = p !== panel; });
  document.querySelectorAll(".wf-row").forEach((row) => {
    row.classList.toggle("selected", row.dataset.span === spanId);
  });
  if (push) {
    const url = new URL(window.location.href);
    url.searchParams.set("span", spanId);
    history.replaceState(null, "", url);
  }
  return true;
}

function wireTrace() {
  document.querySelectorAll("a.wf-row, a.span-link").forEach((link) => {
    link.addEventListener("click", (event) => {
      if (event.metaKey || event.ctrlKey || event.shiftKey) return;
      if (selectSpan(link.dataset.span, true)) event.preventDefault();
    });
  });
}

function wireTraceList() {
  document.querySelectorAll("tr.trace-row").forEach((row) => {
    row.addEventListener("click", (event) => {
      if (event.target.closest("a")) return;
      const link = row.querySelector("a[href^='/trace/']");
      if (link) window.location.href = link.href;
    });
  });
}

function wireGraph() {
  const info = document.getElementById("graph-info");
  if (!info) return;
  document.querySelectorAll("#edge-graph [data-counts]").forEach((shape) => {
    const name = shape.dataset.node || shape.dataset.edge;
    shape.addEventListener("mouseenter", () => {
      shape.classList.add("hover");
      info.textContent = name + ": " + shape.dataset.counts;
      info.classList.remove("muted");
    });
    shape.addEventListener("mouseleave", () => shape.classList.remove("hover"));
  });
}

document.addEventListener("DOMContentLoaded", () => {
  wireTrace();
  wireTraceList();
  wireGraph();
});
