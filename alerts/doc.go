// Package alerts is llmdiag's Alertmanager receiver:
// POST /alertmanager takes Alertmanager's webhook payload, attaches to each
// alert the verdict of the node it is about, and forwards it to the
// configured sinks — a Slack incoming webhook (Block Kit), a generic JSON
// webhook, and a plain-text webhook in Chinese for Feishu, DingTalk or
// WeCom.
//
// # Intake
//
// Receiver.ServeHTTP checks the payload (version "4", at most
// Options.MaxBodyBytes of body and Options.MaxAlerts alerts, each alert
// firing or resolved with labels) and answers 400 naming the field that is
// wrong, 413 when the body is too large, or 202 at once: the work is done
// by Run's workers. An alert whose fingerprint, status and start were
// accepted within Options.DedupWindow is a duplicate and dropped
// (Alertmanager sends the whole group again whenever one alert of it
// changes); one that resolved and fires again has a new start and goes
// out. When the
// intake queue (Options.IntakeQueue messages) is full the answer is 503,
// and Alertmanager retries.
//
// # Matching
//
// An alert names its node by a label: Options.NodeLabels in order
// (default instance, then node; `llmdiag rules` labels nodes by
// instance, or by serve's --node-label). The value is matched against the
// node ids of ListNodes (reading Prometheus, a node's id is its instance)
// and against the host:port of each node's metrics URL (scraping nodes
// directly, the instance Prometheus gives a target). The index is read
// from ListNodes at most every Options.IndexTTL and holds at most
// Options.MaxIndexNodes nodes. An alert matching no node is forwarded all
// the same, with a note that llmdiag knows no such node.
//
// # Enrichment
//
// A matched alert carries the node's DiagnoseNode verdict: status, root
// cause, summary, evidence and recommendations, in the language each sink
// wants (English; Chinese for the text sink), and a runbook link when
// Options.Runbook builds one for the cause. The alert's own runbook_url
// annotation is passed through as it is.
//
// # Delivery
//
// Each sink has its own bounded queue (Options.SinkQueue; when full the
// oldest notification is dropped, logged and counted) and one sender:
// a POST per notification, each attempt with a deadline
// (Options.AttemptTimeout), retried on network errors, 429 and 5xx with
// exponential backoff and jitter, at most Options.MaxAttempts times and
// within Options.MaxElapsed. Other 4xx answers are final. Metrics per sink
// (label sink): llmdiag_alert_sink_delivered_total,
// llmdiag_alert_sink_failed_total, llmdiag_alert_sink_dropped_total,
// llmdiag_alert_sink_retries_total, llmdiag_alert_sink_queue_length and
// llmdiag_alert_sink_delivery_seconds (from enqueue to the sink's 2xx);
// and llmdiag_alerts_received_total by outcome.
//
// Webhook URLs are secrets (the token is in the path): they are never
// logged, nor put in errors; a failed delivery is reported by the sink's
// name and the error with its URL removed.
//
// # Message types
//
// The alerts are Alertmanager's own types (template.Data, template.Alert,
// template.KV). The webhook envelope, Message, is defined here: the
// upstream one, notify/webhook.Message, is four fields, but its package
// imports Alertmanager's notifier and with it the cluster stack.
package alerts
