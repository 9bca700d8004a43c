/* Copy buttons beside a secret shown once (templates/_macros/tokens.html, `copyable`).
 *
 * The button is hidden in the HTML: without this file (or without a clipboard the page may
 * use) the secret is plain text to select and copy. With it, the button appears, copies the
 * text with navigator.clipboard, and says "Copied" in the status beside it (role="status":
 * screen readers announce it), or how to copy by hand when the browser refuses.
 */
(function () {
  "use strict";

  function say(status, text) {
    // Emptied first so a second click says it again.
    status.textContent = "";
    window.setTimeout(function () {
      status.textContent = text;
    }, 50);
  }

  function setUp() {
    if (!navigator.clipboard || !navigator.clipboard.writeText) return;
    document.querySelectorAll("button[data-copy]").forEach(function (button) {
      var source = document.getElementById(button.getAttribute("data-copy"));
      var status = document.getElementById(button.getAttribute("data-copy") + "-copied");
      if (!source || !status) return;
      button.hidden = false;
      button.addEventListener("click", function () {
        navigator.clipboard.writeText(source.textContent.trim()).then(
          function () {
            say(status, "Copied");
          },
          function () {
            say(status, "Could not copy: select the text and copy it");
          }
        );
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
