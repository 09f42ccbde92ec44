package alerts

import (
	"fmt"

	"github.com/prometheus/alertmanager/template"
)

// Version is the webhook payload version this package reads.
const Version = "4"

// Message is Alertmanager's webhook payload: notify/webhook.Message,
// restated here because that package imports Alertmanager's notifier and
// cluster stack (memberlist and all) for a struct of four fields.
type Message struct {
	*template.Data

	// Version is the payload version; "4" since Alertmanager 0.6.
	Version string `json:"version"`
	// GroupKey identifies the alert group.
	GroupKey string `json:"groupKey"`
	// TruncatedAlerts is how many alerts the receiver's max_alerts left
	// out.
	TruncatedAlerts uint64 `json:"truncatedAlerts"`
}

// validate checks what the receiver relies on, naming the field that is
// wrong.
func (m *Message) validate(maxAlerts int) error {
	if m.Version != Version {
		return fmt.Errorf("version: got %q, want %q (Alertmanager's webhook payload)", m.Version, Version)
	}
	if m.Data == nil || len(m.Alerts) == 0 {
		return fmt.Errorf("alerts: none")
	}
	if len(m.Alerts) > maxAlerts {
		return fmt.Errorf("alerts: %d, more than the %d accepted in one message (set max_alerts in the webhook_config)", len(m.Alerts), maxAlerts)
	}
	for i, a := range m.Alerts {
		if a.Status != "firing" && a.Status != "resolved" {
			return fmt.Errorf("alerts[%d].status: got %q, want firing or resolved", i, a.Status)
		}
		if len(a.Labels) == 0 {
			return fmt.Errorf("alerts[%d].labels: none", i)
		}
	}
	return nil
}
