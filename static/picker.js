/* Company pickers (templates/_macros/pickers.html): suggestions as one types, ARIA combobox.
 *
 * htmx fetches the suggestions (hx-get on the field); this file only renames the field's value
 * to `q`, numbers the options, moves through them with the arrow keys, and on a choice fills
 * the field, then presses the chooser's Add button or fires `company-picked`. Without it the
 * field is a plain text field taking an identifier.
 */
(function () {
  "use strict";

  function listOf(input) {
    return document.getElementById(input.getAttribute("aria-controls"));
  }

  function inputOf(list) {
    return document.querySelector('[data-picker-input][aria-controls="' + list.id + '"]');
  }

  function options(list) {
    return Array.prototype.slice.call(list.querySelectorAll('[role="option"][data-value]'));
  }

  function active(input) {
    var id = input.getAttribute("aria-activedescendant");
    return id ? document.getElementById(id) : null;
  }

  function close(input) {
    var list = listOf(input);
    if (list) list.replaceChildren();
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
  }

  function activate(input, option) {
    options(listOf(input)).forEach(function (o) {
      o.setAttribute("aria-selected", o === option ? "true" : "false");
    });
    if (option) {
      input.setAttribute("aria-activedescendant", option.id);
      option.scrollIntoView({ block: "nearest" });
    } else {
      input.removeAttribute("aria-activedescendant");
    }
  }

  function picked(input) {
    input.dispatchEvent(new CustomEvent("company-picked", { bubbles: true }));
  }

  function choose(input, option) {
    input.value = option.getAttribute("data-value");
    close(input);
    input.focus();
    var add = input.getAttribute("data-picker-add");
    var button = add && document.getElementById(add);
    if (button) {
      button.click();
    } else {
      picked(input);
    }
  }

  function step(input, by) {
    var list = listOf(input);
    var all = options(list);
    if (!all.length) {
      htmx.trigger(input, "picker-open");
      return;
    }
    var index = all.indexOf(active(input)) + by;
    if (index < 0) index = all.length - 1;
    if (index >= all.length) index = 0;
    activate(input, all[index]);
  }

  function onKey(event) {
    var input = event.target;
    var option = active(input);
    var open = input.getAttribute("aria-expanded") === "true";
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      step(input, event.key === "ArrowDown" ? 1 : -1);
    } else if (event.key === "Enter" && open && option) {
      event.preventDefault();
      choose(input, option);
    } else if (event.key === "Enter" && input.value.trim() && input.getAttribute("data-picker-add")) {
      event.preventDefault(); // Enter in a chooser's picker adds, it does not save the form
      close(input);
      document.getElementById(input.getAttribute("data-picker-add")).click();
    } else if (event.key === "Escape" && open) {
      event.preventDefault();
      close(input);
    }
  }

  function setUp(box) {
    if (box.hasAttribute("data-picker-ready")) return;
    box.setAttribute("data-picker-ready", "");
    var input = box.querySelector("[data-picker-input]");
    // The typing is the picker's own: an enclosing form that reloads on input or change (the
    // audit filter) hears of the company only once it is picked.
    box.addEventListener("input", function (event) {
      event.stopPropagation();
      if (input.value === "") picked(input); // emptied: no company
    });
    box.addEventListener("change", function (event) {
      event.stopPropagation();
    });
    input.addEventListener("keydown", onKey);
    box.addEventListener("focusout", function (event) {
      if (!box.contains(event.relatedTarget)) close(input);
    });
  }

  // The suggestion request asks for `q`, whatever the field's name.
  document.addEventListener("htmx:configRequest", function (event) {
    var input = event.detail.elt;
    if (!input.hasAttribute || !input.hasAttribute("data-picker-input")) return;
    var data = event.detail.formData;
    Array.from(data.keys()).forEach(function (key) {
      data.delete(key);
    });
    data.set("q", input.value);
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var list = event.detail.target;
    if (!list.classList || !list.classList.contains("picker-list")) return;
    var input = inputOf(list);
    if (!input) return;
    options(list).forEach(function (option, i) {
      option.id = list.id + "-" + i;
    });
    if (document.activeElement !== input) {
      close(input); // the answer came after the field was left
      return;
    }
    input.setAttribute("aria-expanded", list.children.length ? "true" : "false");
    input.removeAttribute("aria-activedescendant");
  });

  // A click keeps the focus in the field (no blur closing the list first), then chooses.
  document.addEventListener("mousedown", function (event) {
    if (event.target.closest && event.target.closest(".picker-list")) event.preventDefault();
  });
  document.addEventListener("click", function (event) {
    var option = event.target.closest && event.target.closest('.picker-list [role="option"][data-value]');
    if (!option) return;
    var input = inputOf(option.closest(".picker-list"));
    if (input) choose(input, option);
  });

  // After a chooser's Add or Remove swapped the form, the focus goes back to its picker.
  var lastChooser = null;
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-chooser]");
    if (button) lastChooser = button.getAttribute("data-chooser");
  }, true);
  document.addEventListener("htmx:afterSettle", function () {
    if (!lastChooser) return;
    var field = document.getElementById("add_" + lastChooser);
    lastChooser = null;
    // Marked as well as focused: static/app.js, which settles focus after every swap, then
    // keeps it here instead of moving it to the swapped region.
    if (field) {
      field.setAttribute("data-focus", "");
      field.focus();
    }
  });

  function ready() {
    htmx.onLoad(function (root) {
      var boxes = root.querySelectorAll ? root.querySelectorAll("[data-picker]") : [];
      if (root.matches && root.matches("[data-picker]")) setUp(root);
      Array.prototype.forEach.call(boxes, setUp);
    });
  }

  if (window.htmx) {
    ready();
  } else {
    document.addEventListener("DOMContentLoaded", ready);
  }
})();
