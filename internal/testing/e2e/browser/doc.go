// Package browser checks the web console end to end in a real headless
// Chromium (internal/testing/browsertest): the fleet page lists every node
// of the simulated seed fleet with the status the service reports and
// follows status changes without a reload; the node and compare pages show
// the decode-bound verdict, the section-8 table, charts and the Chinese
// report; with --auth-tokens the console asks for a token and reads the
// fleet with the role it is given.
//
// The tests skip under -short.
package browser
