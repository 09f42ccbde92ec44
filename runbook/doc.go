// Package runbook holds llmdiag's runbooks, one per root cause a verdict can
// name (every llmdiagv1.Cause but CAUSE_UNSPECIFIED), in English and
// Chinese, and serves them as HTML under auth.RunbooksPrefix.
//
// The runbooks are Markdown files in this package, en/<slug>.md and
// zh/<slug>.md, embedded in the binary: edit them there. Each says what the
// cause means, how to confirm it (the metrics, PromQL and llmdiag commands)
// and what to do; they link to one another by file name (kv-exhausted.md),
// which the handler serves as the page in the same language. What to do quotes every recommendation the cause's
// verdict can give (diagnose/messages.go, chosen in diagnose/cause_*.go);
// runbook_test.go checks that against the catalog's source, so a changed
// recommendation fails the test until its runbook follows.
//
// `llmdiag rules --runbook-base-url` links every alert to the runbook of the
// cause it leads to (promrules), and the MCP server, the Alertmanager
// receiver and the Slack command link or quote them through Markdown,
// Title and Slug.
package runbook
