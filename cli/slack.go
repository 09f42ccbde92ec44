package cli

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/slackcmd"
)

// slackConfig is serve's configuration of Slack's slash command.
type slackConfig struct {
	secretFile, prefix string
	inline             time.Duration
}

// register defines the Slack flags on fs, filling s.
func (s *slackConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&s.secretFile, "slack-signing-secret-file", "", "file holding the Slack app's signing secret (read for every command, so a new secret needs no restart); with it, Slack's slash command is answered at "+auth.SlackCommandPath+" (docs/integrations.md, Slack), without it that path is not served")
	fs.StringVar(&s.prefix, "slack-response-url-prefix", slackcmd.DefaultResponseURLPrefix, "the only place answers to slow Slack commands are posted: a response_url must lie under this URL (scheme, host and path)")
	fs.DurationVar(&s.inline, "slack-inline-deadline", slackcmd.DefaultInlineDeadline, "how long a Slack command may take to be answered at once (below Slack's 3s); slower answers go to the command's response_url")
}

// route is Slack's command handler, and how to stop it, when
// --slack-signing-secret-file is given; nil otherwise.
func (s slackConfig) route(svc slackcmd.Service, log *slog.Logger) (*server.Route, func(), error) {
	if s.secretFile == "" {
		return nil, nil, nil
	}
	path := s.secretFile
	secret := func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			// The error names the file; its content is never quoted.
			return "", fmt.Errorf("--slack-signing-secret-file: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", errors.New("--slack-signing-secret-file is empty")
		}
		return v, nil
	}
	if _, err := secret(); err != nil {
		return nil, nil, usageError{err}
	}
	h, err := slackcmd.New(slackcmd.Config{
		Service: svc, Secret: secret, ResponseURLPrefix: s.prefix, InlineDeadline: s.inline,
		Log: log.With("surface", "slack"),
	})
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--slack-response-url-prefix or --slack-inline-deadline: %w", err)}
	}
	log.Info("answering Slack's slash command", "path", auth.SlackCommandPath, "response_url_prefix", s.prefix)
	return &server.Route{Pattern: auth.SlackCommandPath, Handler: h}, h.Close, nil
}
