/* telephony-admin: the navigation's Menu (templates/base.html, a <details> closed in the HTML).
   At desktop width static/app.css shows its links anyway, where the browser lets CSS style
   ::details-content; a browser that cannot (Firefox before 143) would show a closed menu
   there, so at desktop width it is opened here. A phone keeps it closed until tapped. */
(function () {
  "use strict";

  var desktop = window.matchMedia("(min-width: 641px)");

  function openOnDesktop() {
    var menu = document.querySelector("details.menu");
    if (menu && desktop.matches) {
      menu.open = true;
    }
  }

  openOnDesktop();
  desktop.addEventListener("change", openOnDesktop);
})();
