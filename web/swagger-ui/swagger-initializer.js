// Doppel's own: starts Swagger UI over this Doppel's OpenAPI document.
// A file of its own, not an inline script, so the page needs no
// 'unsafe-inline' in a Content-Security-Policy.
"use strict";

window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    // Relative to this page (/swagger-ui/), so it also works behind a
    // reverse proxy that mounts the admin listener under a prefix.
    url: new URL("../openapi.json", document.baseURI).href,
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "BaseLayout",
    // By path, then in the order a reader expects: read, create, change, delete.
    operationsSorter: function (a, b) {
      var order = ["get", "post", "put", "patch", "delete"];
      return a.get("path").localeCompare(b.get("path")) ||
        order.indexOf(a.get("method")) - order.indexOf(b.get("method"));
    },
    // No request leaves for the public validator: the page works offline.
    validatorUrl: null,
    // A token typed into "Authorize" lives as long as the tab, not longer.
    persistAuthorization: false,
    // ?url=... and ?configUrl=... are ignored: the page shows this
    // instance's document and nothing a link could point it at.
    queryConfigEnabled: false,
  });
});
