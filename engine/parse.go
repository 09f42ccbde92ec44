package engine

import (
	"errors"
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ErrEmpty is returned by Parse for an exposition without any sample.
var ErrEmpty = errors.New("no metric samples in exposition")

// Parse reads a Prometheus text-format exposition into metric families keyed
// by family name. A truncated body (one that does not end in a newline) or a
// malformed one is an error, and so is a body without samples (ErrEmpty);
// the families are returned only when the whole body parsed. Parse does not
// bound the size of r: callers reading from the network limit it.
func Parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	// The UTF-8 scheme accepts every legacy name (colons included, as in
	// vllm:…) and also quoted names, so an exporter sharing the endpoint
	// that uses them does not make the whole body unreadable.
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	if len(families) == 0 {
		return nil, ErrEmpty
	}
	return families, nil
}
