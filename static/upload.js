/* telephony-admin: an upload form refuses a file over its limit before sending it.
   A form with data-max-bytes checks its file inputs on submit; a file too large gets the
   field's error message at once instead of after minutes of uploading (the server refuses it
   too, so the page works the same without JavaScript). A file of its own because the
   Content-Security-Policy forbids inline scripts. */
(function () {
  "use strict";

  function mib(bytes) {
    return Math.floor(bytes / 1048576);
  }

  function showError(input, text) {
    var field = input.closest(".field");
    var id = input.id + "-client-error";
    var error = document.getElementById(id);
    if (!error) {
      error = document.createElement("p");
      error.className = "error";
      error.id = id;
      error.setAttribute("role", "alert");
      input.insertAdjacentElement("afterend", error);
    }
    error.textContent = text;
    if (field) {
      field.classList.add("has-error");
    }
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", id);
    input.focus();
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var max = Number(form.getAttribute && form.getAttribute("data-max-bytes"));
    if (!max) {
      return;
    }
    var inputs = form.querySelectorAll("input[type=file]");
    for (var i = 0; i < inputs.length; i++) {
      var files = inputs[i].files || [];
      for (var j = 0; j < files.length; j++) {
        if (files[j].size > max) {
          event.preventDefault();
          showError(
            inputs[i],
            "The file is larger than " + mib(max) + " MiB: split it, or import it with the " +
              "command line (flask ddis import)."
          );
          return;
        }
      }
    }
  });
})();
