// ontime console: the little behaviour pages need beyond htmx. No inline
// script anywhere (the Content-Security-Policy forbids it).
(function () {
  "use strict";
  var csrf = document.body.dataset.csrf || "";

  // Every htmx request carries the CSRF token, like the forms do.
  document.body.addEventListener("htmx:configRequest", function (e) {
    e.detail.headers["X-CSRF-Token"] = csrf;
  });

  // A form with data-confirm asks first.
  document.addEventListener("submit", function (e) {
    var f = e.target, sub = e.submitter;
    var msg = (sub && sub.dataset.confirm) || f.dataset.confirm;
    if (msg && !window.confirm(msg)) e.preventDefault();
    // A datetime-local value has no zone: send the browser's offset.
    var tz = f.querySelector('input[name="tz_offset"]');
    if (tz) tz.value = String(new Date().getTimezoneOffset());
  }, true);

  // "Select all" checkboxes.
  document.addEventListener("change", function (e) {
    var name = e.target.dataset && e.target.dataset.selectAll;
    if (!name) return;
    var form = e.target.form;
    form.querySelectorAll('input[type="checkbox"][name="' + name + '"]').forEach(function (c) { c.checked = e.target.checked; });
  });

  // The overview's charts: the node's per-second samples, every 2 s.
  var rate = document.getElementById("chart-rate"), late = document.getElementById("chart-late");
  if (!rate || !late || !window.uPlot) return;
  var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  var axis = { stroke: dark ? "#9aa4b0" : "#5d6672", grid: { stroke: dark ? "#2d333b" : "#e5e7eb" }, ticks: { stroke: dark ? "#2d333b" : "#e5e7eb" } };
  // At least a minute wide: a node a few seconds old would otherwise
  // label its axis in fractions of a second.
  function xRange(u, min, max) {
    if (min == null || max == null) return [min, max];
    return [Math.min(min, max - 60), max];
  }
  function opts(el, series) {
    return { width: el.clientWidth || 400, height: 200, series: [{}].concat(series), axes: [axis, axis], scales: { x: { time: true, range: xRange } }, legend: { live: true } };
  }
  var empty = [[], [], []];
  var pr = new uPlot(opts(rate, [{ label: "deliveries/s", stroke: "#2e7d32", width: 1.5, points: { show: false } }, { label: "failures/s", stroke: "#c62828", width: 1.5, points: { show: false } }]), empty, rate);
  var pl = new uPlot(opts(late, [{ label: "p50 ms", stroke: "#2563eb", width: 1.5, spanGaps: false }, { label: "p99 ms", stroke: "#b26a00", width: 1.5 }]), empty, late);
  function load() {
    fetch("/ui/overview/series", { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (c) {
        if (!c) return;
        pr.setData([c[0], c[1], c[2]]);
        pl.setData([c[0], c[3], c[4]]);
      })
      .catch(function () {});
  }
  function resize() {
    pr.setSize({ width: rate.clientWidth, height: 200 });
    pl.setSize({ width: late.clientWidth, height: 200 });
  }
  window.addEventListener("resize", resize);
  load();
  setInterval(function () { if (!document.hidden) load(); }, 2000);
})();
