package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/alerts"
	"github.com/llmdiag/llmdiag/auth"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/runbook"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source/prom"
)

// alertConfig is serve's configuration of the Alertmanager receiver. The
// webhook URLs are secrets (their token is in the path), so they are read
// from files, never given on the command line where ps shows them.
type alertConfig struct {
	slackFile, jsonFile, textFile, textFormat string
	runbookBase                               string
	dedupWindow                               time.Duration
	queue                                     int
	// runbook, set by load from --alert-runbook-base-url, links a
	// verdict's root cause to its runbook (alerts.Options.Runbook).
	runbook func(llmdiagv1.Cause) string
	// sinks are read by load.
	sinks []alerts.Sink
}

// register defines the Alertmanager receiver's flags on fs, filling a.
func (a *alertConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&a.slackFile, "alert-slack-webhook-file", "", "file holding a Slack incoming-webhook URL: alerts posted to "+auth.AlertmanagerPath+" go there with their node's verdict (Block Kit)")
	fs.StringVar(&a.jsonFile, "alert-json-webhook-file", "", "file holding a webhook URL that gets each alert with its node's verdict as JSON (the alert and llmdiag.v1.Diagnosis in protojson)")
	fs.StringVar(&a.textFile, "alert-text-webhook-file", "", "file holding a Feishu, DingTalk or WeCom robot webhook URL that gets each alert with its node's verdict as plain text in Chinese")
	fs.StringVar(&a.textFormat, "alert-text-format", "feishu", "body of --alert-text-webhook-file: feishu, dingtalk or wecom")
	fs.DurationVar(&a.dedupWindow, "alert-dedup-window", alerts.DefaultDedupWindow, "an alert with the same fingerprint, status and start within this window is forwarded once (Alertmanager resends whole groups)")
	fs.StringVar(&a.runbookBase, "alert-runbook-base-url", "", "llmdiag's external URL, as people reach it: notifications link the verdict's root cause to <this>/runbooks/<cause> (as `llmdiag rules --runbook-base-url` links alerts); empty: no such link (an alert's own runbook_url is passed on)")
	fs.IntVar(&a.queue, "alert-queue", alerts.DefaultSinkQueue, "notifications each sink may have waiting; when full the oldest is dropped (llmdiag_alert_sink_dropped_total)")
}

// load reads the sinks' webhook files: called by serve's configure, so
// that a bad one is a usage error before anything is opened. Errors name
// the flag and the file, never what it holds.
func (a *alertConfig) load() error {
	a.sinks = nil
	for _, s := range []struct {
		flag string
		path string
		sink func(url string) (alerts.Sink, error)
	}{
		{"alert-slack-webhook-file", a.slackFile, func(u string) (alerts.Sink, error) { return alerts.SlackSink(u), nil }},
		{"alert-json-webhook-file", a.jsonFile, func(u string) (alerts.Sink, error) { return alerts.JSONSink(u), nil }},
		{"alert-text-webhook-file", a.textFile, func(u string) (alerts.Sink, error) { return alerts.TextSink(u, a.textFormat) }},
	} {
		if s.path == "" {
			continue
		}
		b, err := os.ReadFile(s.path)
		if err != nil {
			return usageError{fmt.Errorf("--%s: %w", s.flag, err)}
		}
		u := strings.TrimSpace(string(b))
		if u == "" {
			return usageError{fmt.Errorf("--%s: %s is empty", s.flag, s.path)}
		}
		sink, err := s.sink(u)
		if err == nil {
			err = sink.Check()
		}
		if err != nil {
			return usageError{fmt.Errorf("--%s: %w", s.flag, err)}
		}
		a.sinks = append(a.sinks, sink)
	}
	a.runbook = nil
	if base := strings.TrimSuffix(a.runbookBase, "/"); base != "" {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return usageError{errors.New("--alert-runbook-base-url: want an http(s) URL without query, fragment or user, e.g. https://llmdiag.example.com")}
		}
		has := map[llmdiagv1.Cause]bool{}
		for _, c := range runbook.Causes() {
			has[c] = true
		}
		a.runbook = func(c llmdiagv1.Cause) string {
			if !has[c] {
				return ""
			}
			return base + auth.RunbooksPrefix + runbook.Slug(c)
		}
	}
	if len(a.sinks) > 0 && (a.dedupWindow <= 0 || a.queue <= 0) {
		return usageError{errors.New("--alert-dedup-window and --alert-queue must be positive")}
	}
	return nil
}

// route is the Alertmanager receiver's route, its workers running until
// ctx is done. Without a sink the route answers 404 saying so: an
// Alertmanager pointed at it then logs why nothing is forwarded.
func (a *alertConfig) route(ctx context.Context, svc alerts.Service, log *slog.Logger, reg prometheus.Registerer, nodeLabel string) (server.Route, error) {
	sinks := a.sinks
	if len(sinks) == 0 {
		return server.Route{Pattern: auth.AlertmanagerPath, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "llmdiag forwards no alerts: serve has no sink (--alert-slack-webhook-file, --alert-json-webhook-file or --alert-text-webhook-file)", http.StatusNotFound)
		})}, nil
	}
	labels := []string{prom.DefaultNodeLabel, "node"}
	if nodeLabel != "" && nodeLabel != prom.DefaultNodeLabel {
		labels = []string{nodeLabel, prom.DefaultNodeLabel, "node"}
	}
	// Sinks are outside: the environment's proxy applies; each attempt has
	// its own deadline (alerts.Options.AttemptTimeout).
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	r, err := alerts.New(svc, sinks, log, reg, client, alerts.Options{
		NodeLabels: labels, Runbook: a.runbook, DedupWindow: a.dedupWindow, SinkQueue: a.queue,
	})
	if err != nil {
		return server.Route{}, err
	}
	names := make([]string, len(sinks))
	for i, s := range sinks {
		names[i] = s.Name
	}
	log.Info("forwarding Alertmanager alerts with verdicts", "path", auth.AlertmanagerPath, "sinks", strings.Join(names, ","))
	go r.Run(ctx)
	return server.Route{Pattern: auth.AlertmanagerPath, Handler: r}, nil
}
