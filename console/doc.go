// Package console is llmdiag's web console: a small single-page app of
// hand-written ES modules, CSS and SVG, embedded in the binary (static/) and
// served from the service's own port, so it works with no other host
// reachable.
//
// Handler serves the page at auth.ConsolePath ("/", exact) and its assets
// under auth.ConsolePrefix ("/console/"). Both are public (auth/policy.go):
// the same files for everyone, holding no fleet data. The data comes from
// DiagnosisService's procedures, called from the browser with the token
// the person enters (kept in sessionStorage, sent as a bearer token): the
// unary reads over Connect's JSON GET, StreamHealth over Connect's
// enveloped streaming with fetch (static/api.js).
//
// Every response carries a strict Content-Security-Policy (scripts,
// styles, images and fetches from this origin only; no inline script or
// style), X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer.
//
// The pages are hash routes handled by static/app.js: #/ the fleet
// (static/pages/fleet.js), #/node/<id> one node, #/compare percentiles
// compared across a group. Each page module exports
// render(root, params, ctx) and returns its cleanup.
package console
