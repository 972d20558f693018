// Package whotest reads back, in tests, the Prometheus text that package who writes.
package whotest

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ParseProm parses text (the exposition format) with prometheus/common's own parser and
// returns its metric families by name; it fails t when the text does not parse.
func ParseProm(t testing.TB, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, text)
	}
	return fams
}

// PromValue is the gauge value of metric with exactly the labels kv (name, value, name,
// value...), or -1 when there is none.
func PromValue(fams map[string]*dto.MetricFamily, metric string, kv ...string) float64 {
	mf := fams[metric]
	if mf == nil {
		return -1
	}
	for _, m := range mf.Metric {
		if len(m.Label) != len(kv)/2 {
			continue
		}
		match := true
		for i, l := range m.Label {
			match = match && l.GetName() == kv[2*i] && l.GetValue() == kv[2*i+1]
		}
		if match {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
