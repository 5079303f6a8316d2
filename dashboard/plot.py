"""A Plotly figure drawn in the page and updated in place when the page's next run changes it.

``st.plotly_chart`` names its element by a hash of the figure, so every changed chart is a new element: the browser
removes the old one and builds the new one from nothing (``Plotly.newPlot``, its DOM and a layout of the page around
it). A move on Readout alignment changes six charts. :func:`plot` keeps one element per chart (its ``key``) and hands
the new figure to ``Plotly.react``, which changes only what differs: on two cores chromium spent 8-32 % less over ten
moves, and the previews came as soon or sooner (BENCHMARKS.md).

A chart out of sight is not drawn: its latest figure waits until the chart comes within a quarter of the page's
height of the visible part (or the page is printed), so a move spends the browser's share of the cores on the charts
the visitor sees. On Readout alignment two or three of six charts lie below a 1,800-pixel window (more below a
laptop's), and their redraws took 80-210 ms of chromium's page thread a move. In a laptop's 950-pixel window chromium
now spends 28 % less over ten moves (7.2-8.7 against 10.0-11.8 core-s), which leaves the exact run more of two cores
(BENCHMARKS.md).

plotly.js is the copy the ``plotly`` package ships (the figures' own version), gzipped once into the cache folder and
served by Streamlit's component file route as it is: the server compressed the 4.8 MB file again at every request
(0.1 core-s; a visitor's loop of requests would keep a core busy) and sent it uncacheable. The browser unpacks it and
keeps it in its IndexedDB store for the next visit (the browser's cache storage, used before, exists only on a secure
page: a server on plain http sent it at every visit). Nothing is fetched from elsewhere.
"""

from __future__ import annotations

import functools
import gzip
import os
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st
import streamlit.components.v1 as components_v1

from analysis.results.figures import CONFIG
from analysis.storage.paths import cache_dir

# Runs in the page (not in a frame) once per chart and again with each new figure. plotly.js is loaded once (the first
# chart starts it, the others await it); a chart keeps its place at the figure's height and is drawn when it is in or
# near sight (its latest figure only); each chart's drawings follow one another in order; the figure is drawn
# in the page's font and text colour on its background (a dark theme's too, as Streamlit's own charts are); the
# toolbar's last button shows the chart on the whole screen (at the screen's height; again, or Esc, to leave); a failure
# is said in the chart's place; the chart is purged when Streamlit removes the element (a page left), which drops its
# window resize listener.
_SCRIPT = """
export default function({ parentElement, data }) {
  const plotly = window.__rgPlotly || (window.__rgPlotly = load(data.plotly_js));
  const chart = parentElement.querySelector(".rg-plot");
  const figure = JSON.parse(data.figure);
  const page = getComputedStyle(parentElement);
  figure.layout.font = Object.assign({ family: page.fontFamily, color: page.color }, figure.layout.font);
  figure.layout.paper_bgcolor = figure.layout.paper_bgcolor || "rgba(0,0,0,0)";
  figure.layout.plot_bgcolor = figure.layout.plot_bgcolor || "rgba(0,0,0,0)";
  figure.layout.modebar = Object.assign({ bgcolor: "rgba(0,0,0,0)" }, figure.layout.modebar);  // not half the paper's
  const axes = figure.layout.template && figure.layout.template.layout;  // the template's white grid: grey on any page
  const grey = { gridcolor: "rgba(128,128,128,0.2)", zerolinecolor: "rgba(128,128,128,0.2)" };
  for (const axis of axes ? ["xaxis", "yaxis"] : []) axes[axis] = Object.assign({}, axes[axis], grey);
  chart.figureHeight = figure.layout.height || null;  // the figure's own, back when the whole screen is left
  chart.style.minHeight = (chart.figureHeight || 450) + "px";  // plotly's default height: its place while not drawn
  const whole = () => document.fullscreenElement === chart;
  const size = () => ({ width: chart.clientWidth, height: whole() ? chart.clientHeight : chart.figureHeight });
  chart.onfullscreenchange = () => chart.drawn.then(() => plotly).then(Plotly => Plotly.relayout(chart, size()));
  const layout = () => whole() ? { ...figure.layout, ...size() } : figure.layout;
  // the chart's one config: Plotly.react draws the whole chart anew when any part of it differs (a new click function
  // too: 42 against 20 ms a redraw)
  chart.config = chart.config || { ...data.config, responsive: true, modeBarButtonsToAdd: [{
    name: "fullscreen", title: "Full screen", icon: EXPAND,
    click: () => whole() ? document.exitFullscreen() : chart.requestFullscreen() }] };
  chart.draw = () => {
    chart.waiting = false;
    chart.drawn = (chart.drawn || plotly)
      .then(() => plotly)
      .then(Plotly => Plotly.react(chart, figure.data, layout(), chart.config))
      .catch(error => { chart.textContent = "This chart could not be drawn: " + error.message; });
  };
  chart.watcher = chart.watcher || sight(chart);
  chart.watcher.observe(chart);  // its first report comes in the next frame; observing again changes nothing
  if (chart.inSight || whole()) chart.draw(); else chart.waiting = true;
  return () => { chart.watcher.unobserve(chart); plotly.then(Plotly => Plotly.purge(chart)); };
}
function sight(chart) {  // the watcher of the part of the page that scrolls the chart (Streamlit's main block; else the
  const root = chart.closest("[data-testid=stMain]");  // window): a chart that comes near sight is drawn
  if (!window.__rgSight) {  // once per page
    window.__rgSight = new Map();
    addEventListener("beforeprint", () => {  // a printed page shows every chart
      for (const waiting of document.querySelectorAll(".rg-plot")) if (waiting.waiting) waiting.draw();
    });
  }
  const watchers = window.__rgSight;
  for (const [kept, watcher] of watchers) {  // a page's block gone: its watcher with it
    if (kept && !kept.isConnected) { watcher.disconnect(); watchers.delete(kept); }
  }
  if (!watchers.has(root)) watchers.set(root, new IntersectionObserver(entries => {
    for (const { target, isIntersecting } of entries) {
      target.inSight = isIntersecting;
      if (isIntersecting && target.waiting) target.draw();
    }
  }, { root, rootMargin: "25% 0px" }));  // a quarter of its height beyond each edge: drawn before it is seen
  return watchers.get(root);
}
async function load(url) {  // plotly.js, gzipped: from the browser's store where this version is kept, else the server
  if (window.caches) caches.delete("readout-geometry").catch(() => {});  // where an earlier version kept it
  const kept = await stored("readonly", files => files.get("plotly.js")).catch(() => null);
  if (kept && kept.url === url) {
    try { return await run(kept.bytes); } catch {}  // not plotly.js (a proxy's page?): fetched anew, kept in its place
  }
  const answer = await fetch(url);
  if (!answer.ok) throw new Error("plotly.js could not be loaded from " + url + " (" + answer.status + ")");
  const bytes = await answer.arrayBuffer();
  const plotly = await run(bytes);
  stored("readwrite", files => files.put({ url, bytes }, "plotly.js")).catch(() => {});  // a full quota: fetched again
  return plotly;
}
async function run(bytes) {  // unpacked and run in the window
  const unpacked = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  (0, eval)(await new Response(unpacked).text());
  if (!window.Plotly) throw new Error("the file sent as plotly.js defines no Plotly");
  return window.Plotly;
}
function stored(mode, ask) {  // one request to the page's IndexedDB store (on plain http too, unlike cache storage)
  return new Promise((resolve, reject) => {
    const opening = indexedDB.open("readout-geometry", 1);
    opening.onupgradeneeded = () => opening.result.createObjectStore("files");
    opening.onerror = () => reject(opening.error);
    opening.onsuccess = () => {
      const base = opening.result, files = base.transaction("files", mode);
      const request = ask(files.objectStore("files"));
      files.oncomplete = () => { base.close(); resolve(request.result); };
      files.onerror = files.onabort = () => { base.close(); reject(files.error); };
    };
  });
}
const EXPAND = { width: 1000, height: 1000, path: "M0 0H380V110H110V380H0Z M620 0H1000V380H890V110H620Z "
                 + "M1000 620V1000H620V890H890V620Z M0 620H110V890H380V1000H0Z" };  // four corners
"""
# On the whole screen the chart sits on the page's background (the element's own is clear; the screen's is black).
_CSS = ".rg-plot:fullscreen { background: var(--st-background-color, #fff); }"

_chart = st.components.v2.component("plot", html="<div class='rg-plot'></div>", css=_CSS, js=_SCRIPT,
                                    isolate_styles=False)


@functools.cache
def gzipped_plotly_js() -> Path:
    """The ``plotly`` package's ``plotly.min.js`` gzipped, in ``<cache>/plotly/`` (written once per plotly version, by
    whichever server process comes first; 0.2 s). Served as ``application/gzip``, which the server's compression skips.
    """
    target = cache_dir() / "plotly" / f"plotly-{version('plotly')}.min.js.gz"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        partial.write_bytes(gzip.compress((files("plotly") / "package_data" / "plotly.min.js").read_bytes(), mtime=0))
        partial.replace(target)
    return target


def _plotly_js_url() -> str:
    """Where the browser fetches plotly.js (:func:`gzipped_plotly_js`), served as a component's files (the
    registration belongs to the running server, so it is made in the script run; the same one again changes nothing)."""
    gzipped = gzipped_plotly_js()
    served = components_v1.declare_component("plotly_js", path=str(gzipped.parent))
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return f"{'/' + base if base else ''}/component/{served.name}/{gzipped.name}"


def plot(fig: go.Figure, key: str) -> None:
    """Draw ``fig`` at the page's width as the element ``key``: a later run's figure under the same key updates the
    chart in place."""
    _chart(key=key, data={"figure": fig.to_json(), "config": CONFIG, "plotly_js": _plotly_js_url()})
