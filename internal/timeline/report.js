(function () {
  "use strict";
  document.documentElement.classList.add("js");
  var tl = document.getElementById("timeline");
  function each(sel, fn) { Array.prototype.forEach.call(document.querySelectorAll(sel), fn); }
  function on(id, ev, fn) { var el = document.getElementById(id); if (el) { el.addEventListener(ev, fn); } }
  on("expand-all", "click", function () { each("#timeline details", function (d) { d.open = true; }); });
  on("collapse-all", "click", function () { each("#timeline details", function (d) { d.open = false; }); });
  on("only-flagged", "change", function (e) { tl.classList.toggle("flagged-only", e.target.checked); });
  on("hide-harness", "change", function (e) { tl.classList.toggle("no-harness", e.target.checked); });
  // The probe filter is CSS (it works with scripts off); this only says
  // how many rows it shows, and lets a link pick it: report.html#probes=pass.
  var probes = document.getElementById("probes");
  function showing() {
    var status = document.getElementById("pf-status");
    if (!probes || !status) { return; }
    var rows = probes.querySelectorAll("tr.probe"), shown = 0;
    Array.prototype.forEach.call(rows, function (r) { if (window.getComputedStyle(r).display !== "none") { shown++; } });
    status.textContent = "showing " + shown + " of " + rows.length + " probes";
    probes.setAttribute("data-shown", String(shown));
  }
  var m = /(?:^#|&)probes=(all|violation|pass|other)\b/.exec(window.location.hash);
  if (m) { var r = document.getElementById("pf-" + m[1]); if (r) { r.checked = true; } }
  each("input[name=probe-filter]", function (r) { r.addEventListener("change", showing); });
  showing();
  // Printing (to attach a PDF to a review) shows every call's details.
  window.addEventListener("beforeprint", function () { each("#timeline details", function (d) { d.open = true; }); });
  document.body.setAttribute("data-report-ready", "1");
})();
