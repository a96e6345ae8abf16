// scaleright dashboard: progressive enhancement only. Pages work without this file except for the charts.
"use strict";

// Charts: each <script type="application/json" id="figures…"> holds Plotly figures computed on the server from the
// plan's own numbers; draw them into the matching .charts container.
function drawCharts() {
  if (typeof Plotly === "undefined") return;
  document.querySelectorAll(".charts").forEach(function (box) {
    var src = document.getElementById(box.dataset.figures || "figures");
    if (!src) return;
    var figs = JSON.parse(src.textContent || "[]");
    figs.forEach(function (f) {
      var div = document.createElement("div");
      div.className = "chart";
      div.id = box.id ? box.id + "-" + f.id : (box.dataset.figures || "") + "-" + f.id;
      div.setAttribute("data-chart", f.id);
      var title = document.createElement("h3");
      title.textContent = f.title;
      box.appendChild(title);
      box.appendChild(div);
      Plotly.newPlot(div, f.data, f.layout, {displaylogo: false, responsive: true});
    });
  });
}

// Inline validation of the scenario editor: the server's own one-line message (the CLI's), while typing.
function validateWhileTyping() {
  var area = document.getElementById("scenario");
  if (!area) return;
  var err = document.getElementById("scenario-error"), ok = document.getElementById("scenario-ok");
  var timer = null, seq = 0;
  area.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () {
      var mine = ++seq;
      fetch("/api/validate", {method: "POST", headers: {"Content-Type": "application/yaml"}, body: area.value})
        .then(function (r) { return r.json().then(function (j) { return [r.status, j]; }); })
        .then(function (res) {
          if (mine !== seq) return;  // a newer edit is being checked
          var bad = res[0] !== 200;
          err.textContent = bad ? (res[1].error || "invalid scenario") : "";
          err.hidden = !bad;
          ok.hidden = bad;
        })
        .catch(function () {});
    }, 300);
  });
}

document.addEventListener("DOMContentLoaded", function () {
  drawCharts();
  validateWhileTyping();
});
