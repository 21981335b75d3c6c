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
  // Printing (to attach a PDF to a review) shows every call's details.
  window.addEventListener("beforeprint", function () { each("#timeline details", function (d) { d.open = true; }); });
  document.body.setAttribute("data-report-ready", "1");
})();
