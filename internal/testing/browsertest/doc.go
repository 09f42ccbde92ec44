// Package browsertest drives a headless Debian chromium from tests with
// chromedp: New gives a test a tab, closed at the test's cleanup; when the
// test has failed by then, a screenshot of the page (and its HTML) is saved
// first, into the directory LLMDIAG_SCREENSHOTS names or else a new temporary
// directory, which the test log names and which is kept. Screenshot saves a
// deliberate one (the pictures in docs/integrations.md, Web console).
//
// The browser is /usr/bin/chromium (or LLMDIAG_CHROMIUM, or chromium on
// PATH); scripts/deps.sh installs Debian's package when it is missing, and
// New fails saying so (-short skips it). It runs without its sandbox
// (--no-sandbox): tests run as root in containers, where chromium's
// sandbox cannot start.
//
// The page's console messages, uncaught exceptions and browser log entries
// (a Content-Security-Policy violation is one) go to the test log, and
// Problems returns the errors among them, so a test can assert the page
// raised none. Every wait is bounded: tests derive a context with a timeout
// from New's for each step (chromedp.Poll, chromedp.WaitVisible), and New
// bounds the browser's start.
package browsertest
