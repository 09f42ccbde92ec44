// Package slackcmd answers Slack's slash command, /llmdiag, at
// auth.SlackCommandPath ("/slack/command"):
//
//	/llmdiag diagnose NODE [zh]   the verdict on one node (zh: in Chinese)
//	/llmdiag nodes                every node with its status and load score
//	/llmdiag unhealthy            the nodes not OK, worst first
//	/llmdiag compare METRIC [by model|engine|node|label KEY]
//	                              a latency metric ranked across subjects
//	/llmdiag help                 the usage (also for anything else)
//
// What it promises:
//
//   - Nothing is parsed, and no command runs, before the request is proven
//     to come from Slack: a POST of a form, at most Config.MaxBodyBytes,
//     whose v0 signature (slack.NewSecretsVerifier, then Ensure over the raw
//     body) matches the signing secret, whose timestamp is within
//     Config.Tolerance of the clock, and whose signature has not been seen
//     within that tolerance (a replay). Refusals are 401 with a short
//     reason; the log names the reason and the caller, never the secret or
//     the signature.
//   - Slack gets its answer within its 3 s: a command that finishes within
//     Config.InlineDeadline is answered in the response; a slower one is
//     acknowledged at once and its answer posted to the request's
//     response_url when it is ready, with a deadline per attempt, bounded
//     retries with backoff, and at most Config.MaxJobs commands in flight
//     (beyond that the caller is told that limit refused it).
//   - The answer is posted only to a response_url under
//     Config.ResponseURLPrefix (https://hooks.slack.com/ unless configured):
//     the URL comes from the request, and llmdiag posts to no other host. It
//     follows no redirect, and never logs the URL, which lets anyone holding
//     it post into the channel.
//   - Answers are Block Kit messages (with a plain-text fallback) within
//     Slack's limits: at most 50 blocks, section text at most 3000
//     characters, header at most 150; what does not fit is cut with a note
//     saying so. Text from the fleet (node ids, labels) and from the caller
//     is escaped, so it cannot mention @channel or forge links.
//   - Answers are ephemeral: seen by the person who asked, as a diagnosis
//     asked for while investigating should not page a channel.
//
// The commands call a Service, the unary methods of the DiagnosisService
// they need: serve passes its in-process service, and a separate tool could
// pass a Connect client to a running llmdiag.
package slackcmd
