// Passkeys and security keys (WebAuthn) for templates/account/_passkeys.html,
// templates/auth/_passkey_step.html and templates/auth/_passkey_confirm.html
// (webapp/views/passkeys.py, docs/security.md#passkeys).
//
// Contract with the server: every call is a POST of JSON with the page's CSRF token in the
// X-CSRFToken header (the section's data-csrf). An options URL answers the options of
// navigator.credentials.create/get as JSON, binary fields in base64url; the answer URL takes
// {credential, ...} and answers {next} (where to go) or {error} with a 4xx status.
// The binary fields are converted by hand: PublicKeyCredential.parseCreationOptionsFromJSON
// is not in every browser yet.
(function () {
  "use strict";

  function toBytes(text) {
    const b64 = text.replace(/-/g, "+").replace(/_/g, "/");
    const raw = atob(b64 + "===".slice((b64.length + 3) % 4));
    return Uint8Array.from(raw, (ch) => ch.charCodeAt(0)).buffer;
  }

  function toText(buffer) {
    let raw = "";
    for (const byte of new Uint8Array(buffer)) raw += String.fromCharCode(byte);
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function withIds(list) {
    return (list || []).map((item) => Object.assign({}, item, { id: toBytes(item.id) }));
  }

  // The server's JSON options as the browser's API takes them.
  function creationOptions(json) {
    const user = Object.assign({}, json.user, { id: toBytes(json.user.id) });
    return Object.assign({}, json, {
      challenge: toBytes(json.challenge), user: user,
      excludeCredentials: withIds(json.excludeCredentials),
    });
  }

  function requestOptions(json) {
    return Object.assign({}, json, {
      challenge: toBytes(json.challenge), allowCredentials: withIds(json.allowCredentials),
    });
  }

  // The browser's PublicKeyCredential as the JSON the server (py_webauthn) reads.
  function credentialJSON(cred) {
    const r = cred.response;
    const response = { clientDataJSON: toText(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = toText(r.attestationObject);
      response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      response.authenticatorData = toText(r.authenticatorData);
      response.signature = toText(r.signature);
      if (r.userHandle) response.userHandle = toText(r.userHandle);
    }
    return {
      id: cred.id, rawId: toText(cred.rawId), type: cred.type, response: response,
      authenticatorAttachment: cred.authenticatorAttachment || undefined,
    };
  }

  async function post(section, url, body) {
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": section.dataset.csrf },
      body: JSON.stringify(body),
    });
    // Sent to a page instead (signed out, a confirmation asked for first): go there.
    if (response.redirected && !(response.headers.get("Content-Type") || "").includes("json")) {
      window.location.assign(response.url);
      return new Promise(() => {});
    }
    let data;
    try { data = await response.json(); } catch (e) { data = { error: "Unexpected answer (" + response.status + "); reload the page." }; }
    if (!response.ok && !data.error) data.error = "Refused (" + response.status + ").";
    return data;
  }

  // What the browser's own refusals mean to the user.
  function why(error) {
    if (error.name === "NotAllowedError") return "Cancelled, or the time ran out; try again.";
    if (error.name === "InvalidStateError") return "That authenticator already holds one of your passkeys.";
    if (error.name === "SecurityError") return "Passkeys do not work at this address (it needs HTTPS and a host name).";
    return "The browser could not use a passkey: " + error.message;
  }

  function say(section, text) {
    section.querySelector("[data-passkey-status]").textContent = text;
  }

  function showCodes(section, codes, next) {
    const box = section.querySelector("[data-passkey-codes]");
    const list = box.querySelector("[data-passkey-code-list]");
    list.replaceChildren(...codes.map((code) => {
      const item = document.createElement("li");
      item.textContent = code;
      return item;
    }));
    box.querySelector("[data-passkey-continue]").href = next;
    box.hidden = false;
    box.focus();
  }

  async function add(section, form) {
    const name = form.elements.name.value.trim();
    if (!name) { say(section, "Give the passkey a name first."); form.elements.name.focus(); return; }
    say(section, "Follow your browser's prompt…");
    const options = await post(section, form.dataset.optionsUrl, { name: name });
    if (options.error) { say(section, options.error); return; }
    let cred;
    try { cred = await navigator.credentials.create({ publicKey: creationOptions(options) }); }
    catch (error) { say(section, why(error)); return; }
    const answer = await post(section, form.dataset.url, {
      name: name, credential: credentialJSON(cred), back: form.dataset.back,
    });
    if (answer.error) { say(section, answer.error); return; }
    if (answer.recovery_codes) { say(section, "Passkey added."); showCodes(section, answer.recovery_codes, answer.next); return; }
    window.location.assign(answer.next);
  }

  async function use(section, button) {
    say(section, "Follow your browser's prompt…");
    const options = await post(section, button.dataset.optionsUrl, {});
    if (options.error) { say(section, options.error); return; }
    let cred;
    try { cred = await navigator.credentials.get({ publicKey: requestOptions(options) }); }
    catch (error) { say(section, why(error)); return; }
    const answer = await post(section, button.dataset.url, {
      credential: credentialJSON(cred), next: button.dataset.next || "",
    });
    if (answer.error) { say(section, answer.error); return; }
    window.location.assign(answer.next);
  }

  function setUp(section) {
    if (!window.PublicKeyCredential || !navigator.credentials) return; // the sentence stays
    section.querySelector("[data-passkey-unsupported]").hidden = true;
    section.querySelector("[data-passkey-controls]").hidden = false;
    const form = section.querySelector("[data-passkey-add]");
    if (form) form.addEventListener("submit", (event) => { event.preventDefault(); add(section, form); });
    const button = section.querySelector("[data-passkey-get]");
    if (button) button.addEventListener("click", () => use(section, button));
  }

  // Each partial loads this file; set up once.
  if (window.passkeysSetUp) return;
  window.passkeysSetUp = true;
  document.querySelectorAll("section[data-passkeys]").forEach(setUp);
})();
