/* telephony-admin: where focus goes after htmx swaps part of a page, and what is announced.
   A file of its own because the Content-Security-Policy forbids inline scripts.

   After a swap, focus moves into the region that changed, to the first of:
     [data-focus]           an element the server marks (the new or changed row),
     [aria-invalid="true"]  the first field with an error after a failed form,
     [autofocus]            the first field of a form just opened,
     the region itself      (made focusable with tabindex="-1").
   Except while the user types or chooses in a field that filters as they go (the swap was
   triggered by input/change/search): focus stays in that field, and the list's count line is
   announced through the polite live region #announcer instead.
   On a page load after a redirect (a form saved), focus goes to its confirmation message. */
(function () {
  "use strict";

  // "company-picked": a company chosen in a filter's picker (static/picker.js) reloads the list
  // like a change does; the user may already be typing the next company into the same field.
  var KEEP_FOCUS_EVENTS = {
    input: true,
    change: true,
    keyup: true,
    search: true,
    "company-picked": true,
  };
  var FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]";
  var handled = new WeakSet();

  function focusLost() {
    var active = document.activeElement;
    return !active || active === document.body || !active.isConnected;
  }

  // Someone already moved into what was swapped in by an action from outside it (filling the
  // form just opened before the swap settled): leave them there rather than pull focus back to
  // its first field. A swap sent from inside the region (a form's own save) still moves focus.
  function alreadyInside(region, source) {
    var active = document.activeElement;
    if (focusLost() || active === region || !region.contains(active)) {
      return false;
    }
    return !!source && source.isConnected && !region.contains(source);
  }

  function focusOn(el) {
    if (!el.matches(FOCUSABLE)) {
      el.setAttribute("tabindex", "-1");
    }
    el.focus({ preventScroll: false });
  }

  function focusTarget(region) {
    return (
      region.querySelector("[data-focus]") ||
      region.querySelector('[aria-invalid="true"]') ||
      region.querySelector("[autofocus]") ||
      region
    );
  }

  /* The region's count line (e.g. "Showing 1–50 of 1,204"), without its links. */
  function countText(region) {
    var line = region.querySelector("[data-announce], .count");
    if (!line) {
      return "";
    }
    var copy = line.cloneNode(true);
    copy.querySelectorAll("a").forEach(function (a) {
      a.remove();
    });
    return copy.textContent.replace(/\s+/g, " ").replace(/[\s·]+$/, "").trim();
  }

  function announce(text) {
    var live = document.getElementById("announcer");
    if (!live || !text) {
      return;
    }
    // Emptied first so the same words twice in a row are still read out.
    live.textContent = "";
    window.setTimeout(function () {
      live.textContent = text;
    }, 100);
  }

  document.addEventListener("htmx:afterSettle", function (evt) {
    var detail = evt.detail || {};
    var key = detail.xhr || detail.requestConfig;
    // afterSettle fires once per swapped element (an outerHTML swap, out-of-band parts):
    // act once per response.
    if (!key || handled.has(key)) {
      return;
    }
    handled.add(key);
    var region = detail.target && detail.target.isConnected ? detail.target : evt.target;
    if (!region || !region.isConnected) {
      return;
    }
    // A picker's suggestions (static/picker.js) belong to its combobox, where focus stays while
    // the user types or moves through them; moving it would close the next suggestions.
    if (region.closest && region.closest(".picker-list")) {
      return;
    }
    var config = detail.requestConfig || {};
    // A part the page loads after itself (data-no-focus: a closed month's changes) is not
    // something the user asked for: focus stays where it is.
    if ((config.elt && config.elt.hasAttribute && config.elt.hasAttribute("data-no-focus")) ||
        (region.hasAttribute && region.hasAttribute("data-no-focus"))) {
      return;
    }
    var trigger = config.triggeringEvent;
    var typing = !trigger || KEEP_FOCUS_EVENTS[trigger.type];
    if ((!typing || focusLost()) && !alreadyInside(region, config.elt)) {
      focusOn(focusTarget(region));
    }
    announce(countText(region));
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (!focusLost() || document.querySelector("[autofocus]")) {
      return;
    }
    // A bulk form refused is the list again: its message first, else the field at fault
    // (views/bulk.py).
    var message =
      document.querySelector("#bulk-error") ||
      document.querySelector("#bulk [aria-invalid=true]") ||
      document.querySelector("#flashes .flash");
    if (message) {
      focusOn(message);
    }
  });
})();

/* The record lists' "Tick all on this page" box (templates/records/_rows.html): hidden in the
   HTML, since without JavaScript it could do nothing, and shown here. Ticking it ticks every
   row of the page; ticking rows one by one keeps it in step (mixed: indeterminate). Listeners
   sit on the document, so rows swapped in by htmx (filtering, paging) need nothing more. */
(function () {
  "use strict";

  function ticks(all) {
    var table = all.closest("table");
    return table ? table.querySelectorAll("input.tick") : [];
  }

  function sync(all) {
    var boxes = Array.prototype.slice.call(ticks(all));
    var ticked = boxes.filter(function (box) {
      return box.checked;
    }).length;
    all.checked = boxes.length > 0 && ticked === boxes.length;
    all.indeterminate = ticked > 0 && ticked < boxes.length;
  }

  function reveal() {
    document.querySelectorAll("input.tick-all[hidden]").forEach(function (all) {
      all.hidden = false;
      sync(all);
    });
  }

  document.addEventListener("change", function (evt) {
    var box = evt.target;
    if (!(box instanceof HTMLInputElement)) {
      return;
    }
    if (box.classList.contains("tick-all")) {
      ticks(box).forEach(function (tick) {
        tick.checked = box.checked;
      });
    } else if (box.classList.contains("tick")) {
      var table = box.closest("table");
      var all = table && table.querySelector("input.tick-all");
      if (all) {
        sync(all);
      }
    }
  });
  document.addEventListener("DOMContentLoaded", reveal);
  document.addEventListener("htmx:afterSettle", reveal);
})();

/* The bulk bar's fold (templates/records/_rows.html, a <details>): app.css shows its content at
   desktop width and once a row is ticked, where the browser lets CSS style ::details-content;
   for a browser that cannot, it is opened here then. A phone keeps it closed until tapped or
   a row is ticked. */
(function () {
  "use strict";

  var desktop = window.matchMedia("(min-width: 641px)");

  function openFolds() {
    document.querySelectorAll("details.bulk-fold:not([open])").forEach(function (fold) {
      var list = fold.closest("#rows");
      if (desktop.matches || (list && list.querySelector("input.tick:checked"))) {
        fold.open = true;
      }
    });
  }

  document.addEventListener("DOMContentLoaded", openFolds);
  document.addEventListener("htmx:afterSettle", openFolds);
  document.addEventListener("change", openFolds);
  desktop.addEventListener("change", openFolds);
})();

/* A refused bulk form is the list again, answering a POST to /ddis/bulk (views/bulk.py): the
   address bar shows the list's address as shown (data-list-url) instead, so a reload shows the
   list rather than posting the form again, and the address can be copied. (An htmx submission
   is told the same by the HX-Replace-Url header; a GET of /ddis/bulk redirects to the list.) */
(function () {
  document.addEventListener("DOMContentLoaded", function () {
    var refused = document.querySelector("[data-list-url]");
    if (refused && /\/bulk(\/apply)?$/.test(window.location.pathname) && window.history.replaceState) {
      window.history.replaceState(null, "", refused.getAttribute("data-list-url"));
    }
  });
})();

/* A form carrying a one-time key (views/once.py: creating a token or a webhook, rotating a
   secret) is sent once. The server already refuses a second POST of the key ("already done"),
   but the browser shows the answer to the last POST, which then lacks the secret shown only
   once: a double click on a slow machine sent both. Without JavaScript the key still stops
   the repeat. */
(function () {
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.querySelector('input[name="once"]')) {
      return;
    }
    if (form.dataset.sent) {
      event.preventDefault();
      return;
    }
    form.dataset.sent = "1";
  });
  // Back to a page kept whole in the browser's cache: its forms may be sent again.
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) return;
    document.querySelectorAll("form[data-sent]").forEach(function (form) {
      delete form.dataset.sent;
    });
  });
})();
