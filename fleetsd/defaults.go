package fleetsd

import (
	_ "embed"
	"fmt"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/relabel"
	yamlv2 "go.yaml.in/yaml/v2"
)

// DefaultsYAML is the default relabel rules, by Kubernetes role, as
// docs/configuration.md shows them.
//
//go:embed defaults.yaml
var DefaultsYAML []byte

// Defaults returns the relabel rules a job without relabel_configs gets,
// by its Kubernetes role (pod, endpointslice, endpoints), parsed anew on
// each call (a job owns its rules).
func Defaults() map[string][]*relabel.Config {
	var d map[string][]*relabel.Config
	if err := yamlv2.UnmarshalStrict(DefaultsYAML, &d); err != nil {
		panic(fmt.Sprintf("fleetsd: defaults.yaml: %v", err))
	}
	for role, rules := range d {
		for i, r := range rules {
			if err := r.Validate(model.UTF8Validation); err != nil {
				panic(fmt.Sprintf("fleetsd: defaults.yaml %s[%d]: %v", role, i, err))
			}
		}
	}
	return d
}
