// Package metrics reads an etcd server's /metrics (the Prometheus text
// format) into samples, for the tests and the benchmarks that judge the
// recipe by the server's own counters (D1's watch events, D2's requests).
package metrics

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Samples is one scrape: sample name with its labels, as written
// ("grpc_server_handled_total{grpc_code=...}"), to value.
type Samples map[string]float64

// Scrape GETs url (plain HTTP, not a gRPC request, so it never shows in the
// counters it reads) and parses it. Errors: the request's, a status other
// than 200, or the body's read error.
func Scrape(ctx context.Context, url string) (Samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Close = true // no idle keep-alive connection left behind (goleak in the tests)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return Parse(resp.Body)
}

// Parse reads the text format: comments and unparsable lines are skipped,
// each sample line is "name{labels} value".
func Parse(r io.Reader) (Samples, error) {
	m := Samples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		i := strings.LastIndexByte(l, ' ')
		if l == "" || l[0] == '#' || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			m[l[:i]] = v
		}
	}
	return m, sc.Err()
}

// Sum adds the samples of metric name whose labels contain every one of
// labels (each written as `key="value"`).
func (m Samples) Sum(name string, labels ...string) float64 {
	var t float64
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k, l)
		}
		if ok {
			t += v
		}
	}
	return t
}

// Delta returns b - a for every sample of b (counters read before and
// after a window).
func Delta(a, b Samples) Samples {
	d := Samples{}
	for k, v := range b {
		d[k] = v - a[k]
	}
	return d
}
