// pgbus dashboard: reloads a page that changes on its own (a runs list, a
// run that has not ended, a bulk action under way). Such a page says how often
// on its body, <body data-refresh="5">, in seconds; other pages load nothing.
//
// It reloads only while the page is shown (never in a hidden tab), waits
// while the operator is typing in a form or has changed a field, and while a
// <details> is open (a long error being read), so a reload never takes away
// what someone is doing. No framework: the page is drawn on the server.
(function () {
  "use strict";
  var period = parseInt(document.body.getAttribute("data-refresh"), 10);
  if (!(period > 0)) {
    return;
  }
  var timer = null;

  // Whether a reload now would take something from the operator.
  function busy() {
    var active = document.activeElement;
    if (active && active.matches("input, textarea, select")) {
      return true;
    }
    if (document.querySelector("details[open]")) {
      return true;
    }
    var fields = document.querySelectorAll("input, textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].type !== "hidden" && fields[i].value !== fields[i].defaultValue) {
        return true;
      }
    }
    // A select shows its first option when none is marked selected in the
    // page, and that option is then selected without being "default
    // selected": compare indexes, not each option's flags.
    var selects = document.querySelectorAll("select");
    for (var j = 0; j < selects.length; j++) {
      var shown = 0;
      for (var k = 0; k < selects[j].options.length; k++) {
        if (selects[j].options[k].defaultSelected) {
          shown = k;
          break;
        }
      }
      if (selects[j].selectedIndex !== shown) {
        return true;
      }
    }
    return false;
  }

  function tick() {
    timer = null;
    if (document.visibilityState !== "visible") {
      return;
    }
    if (busy()) {
      schedule();
    } else {
      window.location.reload();
    }
  }

  function schedule() {
    if (timer === null) {
      timer = window.setTimeout(tick, period * 1000);
    }
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") {
      schedule();
    } else if (timer !== null) {
      window.clearTimeout(timer);
      timer = null;
    }
  });
  if (document.visibilityState === "visible") {
    schedule();
  }
})();
