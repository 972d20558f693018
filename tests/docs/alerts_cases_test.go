package docs

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// segment is a state of one semaphore, as one metrics writer (instance) exports it, lasting
// minutes: one sample a minute, as conch-metrics.timer writes the file. A nil state is the
// semaphore gone from the file.
type segment struct {
	s       sample
	minutes int
}

// track is one writer's timeline of one semaphore.
type track struct {
	instance string
	segs     []segment
}

// eval is one check of an alert at a minute: firing with those labels (alertname and the
// rule's own labels aside), or quiet.
type eval struct {
	at     int
	alert  string
	fires  bool
	labels map[string]string
}

// alertCase is one promtool test: timelines and the checks on them. mtime, when set, is
// node_exporter's node_textfile_mtime_seconds of the file, in promtool's series notation
// (not conch's output: the collector's).
type alertCase struct {
	name   string
	tracks []track
	mtime  string
	evals  []eval
}

func repeat(n int, segs ...segment) []segment {
	var out []segment
	for range n {
		out = append(out, segs...)
	}
	return out
}

// everyAlert is a quiet check of each alert at each of the minutes.
func everyAlert(minutes ...int) []eval {
	var out []eval
	for _, a := range []string{"ConchHolderForHours", "ConchQueueNotMoving", "ConchPausedForHours", "ConchHolderExpiring", "ConchSlotKeptAfterRun", "ConchForeignKeys", "ConchTwoCapacities", "ConchMetricsStale"} {
		for _, at := range minutes {
			out = append(out, eval{at: at, alert: a})
		}
	}
	return out
}

// alertCases are the shipped units' normal life, on which every alert stays quiet, and one
// case per fault, on which its alert fires (and not before its time).
func alertCases(c captures) []alertCase {
	on := func(labels ...string) map[string]string {
		l := map[string]string{"instance": "node1"}
		for i := 0; i+1 < len(labels); i += 2 {
			l[labels[i]] = labels[i+1]
		}
		return l
	}
	fires := func(at int, alert string, l map[string]string) eval {
		return eval{at: at, alert: alert, fires: true, labels: l}
	}
	quiet := func(at int, alert string) eval { return eval{at: at, alert: alert} }
	return []alertCase{
		{
			name: "the shipped units for 3 hours, written by two nodes: standby daemons, hourly maintenance rounds with a 30-minute pause, a reboot every 10 minutes, queued jobs, a healthy holder",
			tracks: []track{
				{"node1", []segment{{c.worker, 180}}},
				{"node2", []segment{{c.worker, 180}}},
				{"node1", []segment{{c.maint, 20}, {nil, 40}, {c.paused, 30}, {nil, 30}, {c.maint, 20}, {nil, 40}}},
				{"node1", repeat(18, segment{c.kept, 4}, segment{nil, 6})},
				{"node1", repeat(6, segment{c.job, 15}, segment{nil, 15})},
				{"node1", []segment{{c.alive, 60}, {nil, 120}}},
			},
			mtime: "0+60x180",
			evals: everyAlert(30, 90, 150, 179),
		},
		{
			name:   "a maintenance job hangs past its --runtime-max",
			tracks: []track{{"node1", []segment{{c.maint, 150}}}},
			evals: []eval{quiet(125, "ConchHolderForHours"),
				fires(135, "ConchHolderForHours", on("name", "node-maintenance", "max", "2"))},
		},
		{
			name:   "a job's holder never ends and its waiter waits on",
			tracks: []track{{"node1", []segment{{c.job, 80}}}},
			evals: []eval{quiet(62, "ConchQueueNotMoving"),
				fires(70, "ConchQueueNotMoving", on("name", "reindex", "max", "1"))},
		},
		{
			name:   "a pause left in place",
			tracks: []track{{"node1", []segment{{c.paused, 130}}}},
			evals: []eval{quiet(115, "ConchPausedForHours"),
				fires(125, "ConchPausedForHours", on("name", "node-maintenance", "max", "2"))},
		},
		{
			name:   "a holder's conch killed: one file shows it expiring, then its slot is gone",
			tracks: []track{{"node1", []segment{{c.alive, 3}, {c.expiring, 1}, {nil, 20}}}},
			evals: []eval{quiet(2, "ConchHolderExpiring"),
				fires(4, "ConchHolderExpiring", on("name", "video-encode", "max", "2")),
				fires(11, "ConchHolderExpiring", on("name", "video-encode", "max", "2")),
				quiet(15, "ConchHolderExpiring")},
		},
		{
			name:   "a rebooted node never releases its slot",
			tracks: []track{{"node1", []segment{{c.kept, 25}}}},
			evals: []eval{quiet(10, "ConchSlotKeptAfterRun"),
				fires(20, "ConchSlotKeptAfterRun", on("name", "rolling-reboot", "max", "1"))},
		},
		{
			name:   "a key written by hand",
			tracks: []track{{"node1", []segment{{c.foreign, 5}}}},
			evals:  []eval{fires(2, "ConchForeignKeys", on("name", "hand-made"))},
		},
		{
			name:   "one name, two capacities",
			tracks: []track{{"node1", []segment{{c.capacities, 5}}}, {"node2", []segment{{c.capacities, 5}}}},
			evals:  []eval{fires(2, "ConchTwoCapacities", map[string]string{"name": "deploy"})},
		},
		{
			name:  "the metrics timer stops after 10 minutes",
			mtime: "0+60x10 600x20",
			evals: []eval{quiet(15, "ConchMetricsStale"),
				fires(18, "ConchMetricsStale", on("file", "/var/lib/prometheus/node-exporter/conch.prom"))},
		},
	}
}

// withInstance puts the instance label a scrape adds into a series written as name{labels}.
func withInstance(series, instance string) string {
	return strings.TrimSuffix(series, "}") + fmt.Sprintf(",instance=%q}", instance)
}

// inputSeries turns the timelines into promtool's input series: a value a minute while a
// state lasts (an age growing by 60 s a sample, as it does between two writes), a stale
// marker when the semaphore leaves the file, nothing after.
func inputSeries(tracks []track) map[string]string {
	values := map[string][]string{}
	for _, tr := range tracks {
		length := 0
		for _, sg := range tr.segs {
			length += sg.minutes
		}
		keys := map[string]bool{}
		for _, sg := range tr.segs {
			for k := range sg.s {
				keys[k] = true
			}
		}
		for k := range keys {
			series := withInstance(k, tr.instance)
			var vs []string
			for _, sg := range tr.segs {
				for i := range sg.minutes {
					v, ok := sg.s[k]
					switch {
					case ok && ages(sg.s, k):
						vs = append(vs, fmt.Sprint(v+float64(60*i)))
					case ok:
						vs = append(vs, fmt.Sprint(v))
					case len(vs) > 0 && vs[len(vs)-1] != "_" && vs[len(vs)-1] != "stale":
						vs = append(vs, "stale")
					default:
						vs = append(vs, "_")
					}
				}
			}
			values[series] = vs
		}
	}
	out := map[string]string{}
	for k, vs := range values {
		out[k] = strings.Join(vs, " ")
	}
	return out
}

// ages reports whether series k of s is an age that grows while the state lasts: the oldest
// holder's while there is a holder, the oldest waiter's while one waits (a capture taken
// just after a start shows 0 s).
func ages(s sample, k string) bool {
	name, labels, _ := strings.Cut(k, "{")
	count := map[string]string{"conch_sema_oldest_holder_seconds": "conch_sema_holders", "conch_sema_oldest_waiter_seconds": "conch_sema_waiters"}[name]
	return count != "" && s[count+"{"+labels] > 0
}

// rule is what a test needs of an alerting rule: its own labels and its annotations'
// templates.
type rule struct {
	labels      map[string]string
	annotations map[string]string
}

var (
	alertStart = regexp.MustCompile(`(?m)^\s*- alert: (\w+)\s*$`)
	ruleField  = regexp.MustCompile(`(?m)^\s+(severity|summary|description): '?(.*?)'?$`)
	labelRef   = regexp.MustCompile(`\{\{ \$labels\.(\w+) \}\}`)
)

// alertRules reads the rules file's alerts: the rules file uses only a severity label and
// summary and description annotations, whose templates name labels only.
func alertRules(t *testing.T, path string) map[string]rule {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]rule{}
	locs := alertStart.FindAllSubmatchIndex(text, -1)
	for i, loc := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		r := rule{labels: map[string]string{}, annotations: map[string]string{}}
		for _, f := range ruleField.FindAllSubmatch(text[loc[1]:end], -1) {
			if string(f[1]) == "severity" {
				r.labels["severity"] = string(f[2])
			} else {
				r.annotations[string(f[1])] = string(f[2])
			}
		}
		rules[string(text[loc[2]:loc[3]])] = r
	}
	if len(rules) < 5 {
		t.Fatalf("found %d alerts in %s; is the parse right?", len(rules), path)
	}
	return rules
}

func alertNames(t *testing.T, path string) []string {
	return slices.Sorted(maps.Keys(alertRules(t, path)))
}

// promtoolTests writes the cases as a promtool unit-test file (JSON, which is YAML) for the
// rules file and returns its path.
func promtoolTests(t *testing.T, rulesPath string, cases []alertCase) string {
	t.Helper()
	rules := alertRules(t, rulesPath)
	type expAlert struct {
		Labels      map[string]string `json:"exp_labels"`
		Annotations map[string]string `json:"exp_annotations"`
	}
	type alertTest struct {
		EvalTime  string     `json:"eval_time"`
		Alertname string     `json:"alertname"`
		Exp       []expAlert `json:"exp_alerts"`
	}
	type series struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	type test struct {
		Name   string      `json:"name"`
		Every  string      `json:"interval"`
		Input  []series    `json:"input_series"`
		Alerts []alertTest `json:"alert_rule_test"`
	}
	var tests []test
	for _, c := range cases {
		in := inputSeries(c.tracks)
		if c.mtime != "" {
			in[`node_textfile_mtime_seconds{file="/var/lib/prometheus/node-exporter/conch.prom",instance="node1"}`] = c.mtime
		}
		tc := test{Name: c.name, Every: "1m"}
		for _, k := range slices.Sorted(maps.Keys(in)) {
			tc.Input = append(tc.Input, series{k, in[k]})
		}
		for _, e := range c.evals {
			r, ok := rules[e.alert]
			if !ok {
				t.Fatalf("case %q checks %s, which %s does not define", c.name, e.alert, rulesFile)
			}
			at := alertTest{EvalTime: fmt.Sprintf("%dm", e.at), Alertname: e.alert, Exp: []expAlert{}}
			if e.fires {
				exp := expAlert{Labels: maps.Clone(e.labels), Annotations: map[string]string{}}
				maps.Copy(exp.Labels, r.labels)
				for k, tmpl := range r.annotations {
					exp.Annotations[k] = labelRef.ReplaceAllStringFunc(tmpl, func(ref string) string {
						return e.labels[labelRef.FindStringSubmatch(ref)[1]]
					})
				}
				at.Exp = append(at.Exp, exp)
			}
			tc.Alerts = append(tc.Alerts, at)
		}
		tests = append(tests, tc)
	}
	b, err := json.MarshalIndent(map[string]any{
		"rule_files":          []string{rulesPath},
		"evaluation_interval": "1m",
		"tests":               tests,
	}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "conch-rules.test.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
