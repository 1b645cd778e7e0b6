// edu-parallel: an interrupted plotly animation is no error (edu_parallel/app/animation_js.py).
// Pressing pause, or a slider step while Play runs, interrupts Play's Plotly.animate call, whose
// promise plotly.js then rejects with no reason; its buttons and sliders never catch it, so the
// browser reports "Uncaught (in promise) undefined". That rejection, and only on a page that
// shows a plotly animation, is marked handled. The same file is a JupyterLab extension (the
// container below, loaded by the lab's page) and a script of every page of the offline site.
var _JUPYTERLAB;
(function () {
  "use strict";
  var name = "edu-parallel-animations";
  function animated() {
    var plots = document.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < plots.length; i++) {
      var frames = (plots[i]._transitionData || {})._frames || [];
      if (frames.length) return true;
    }
    return false;
  }
  if (!window.__eduParallelQuietInterrupts) {
    window.__eduParallelQuietInterrupts = true;
    window.addEventListener("unhandledrejection", function (event) {
      if (event.reason === undefined && animated()) event.preventDefault();
    });
  }
  var plugin = {
    id: name + ":interrupted-animations",
    description: "An interrupted plotly animation (pause) is no error in the console.",
    autoStart: true,
    activate: function () {},
  };
  _JUPYTERLAB = window._JUPYTERLAB = window._JUPYTERLAB || {};
  _JUPYTERLAB[name] = {
    init: function () {},
    get: function () {
      return Promise.resolve(function () {
        return { __esModule: true, default: plugin };
      });
    },
  };
})();
