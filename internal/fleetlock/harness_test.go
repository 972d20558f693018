package fleetlock

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/internal/polltest"
	"github.com/conch-project/conch/internal/sematest"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// served is a real Server on a random loopback port, on a real etcd.
type served struct {
	srv  *Server
	base string // http://127.0.0.1:PORT
	c    *clientv3.Client
	stop func() // stops it (idempotent); also at cleanup
}

// serve starts a Server for groups on c, stopped at cleanup.
func serve(t *testing.T, c *clientv3.Client, groups map[string]int, hold time.Duration) *served {
	t.Helper()
	return serveQueue(t, c, groups, hold, 0)
}

// serveQueue is serve with --queue (0: none).
func serveQueue(t *testing.T, c *clientv3.Client, groups map[string]int, hold, queue time.Duration) *served {
	t.Helper()
	return serveWith(t, Config{Client: c, Groups: groups, Hold: hold, Queue: queue, Record: schema.Record{PID: os.Getpid()}, Timeout: 3 * time.Second}, nil)
}

// serveWith starts a Server of cfg on a random loopback port, over HTTPS when tc is not
// nil, stopped at cleanup.
func serveWith(t *testing.T, cfg Config, tc *tls.Config) *served {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, tc) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	scheme := "http://"
	if tc != nil {
		scheme = "https://"
	}
	return &served{srv: s, base: scheme + ln.Addr().String(), c: cfg.Client, stop: stop}
}

// clientStyle is how a real client joins its base URL and the operation's path.
type clientStyle int

const (
	// zincati joins "v1/pre-reboot" onto a base that ends in "/" (URL join).
	zincati clientStyle = iota
	// flatcar builds base + "/v1/pre-reboot": a base ending in "/" sends "//v1/...".
	flatcar
)

// fleetClient behaves as the real clients do: POST, the protocol header, no
// Content-Type, the JSON body, and every 2xx taken as granted.
type fleetClient struct {
	base  string // as the operator configured it
	style clientStyle
	id    string
	group string
	hc    *http.Client
}

func newClient(base string, style clientStyle, id, group string) *fleetClient {
	return &fleetClient{base: base, style: style, id: id, group: group, hc: &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (f *fleetClient) url(api string) string {
	if f.style == zincati {
		b := f.base
		if !strings.HasSuffix(b, "/") {
			b += "/"
		}
		return b + "v1/" + api
	}
	return f.base + "/v1/" + api
}

// reply is one answer: its status, and the error body when not 2xx.
type reply struct {
	status int
	kind   Kind
	value  string
	header http.Header
	body   string
}

func (r reply) ok() bool { return r.status >= 200 && r.status < 300 }

func (f *fleetClient) do(api string) (reply, error) {
	body := fmt.Sprintf(`{"client_params":{"id":%q,"group":%q}}`, f.id, f.group)
	return rawPost(f.hc, f.url(api), map[string]string{ProtocolHeader: "true"}, body)
}

func (f *fleetClient) lock() (reply, error)   { return f.do(APIPreReboot) }
func (f *fleetClient) unlock() (reply, error) { return f.do(APISteadyState) }

// rawPost sends body to url with the headers given, and no Content-Type.
func rawPost(hc *http.Client, url string, headers map[string]string, body string) (reply, error) {
	return rawDo(hc, http.MethodPost, url, headers, body)
}

func rawDo(hc *http.Client, method, url string, headers map[string]string, body string) (reply, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return reply{}, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if !r.ok() && resp.StatusCode != http.StatusNotModified {
		var ref Refusal
		if err := json.Unmarshal(b, &ref); err != nil {
			return r, fmt.Errorf("%s %s: status %d with a body that is not the {kind, value} JSON: %q", method, url, resp.StatusCode, b)
		}
		r.kind, r.value = ref.Kind, ref.Value
	}
	return r, nil
}

// holders reads the keys of group[max] from etcd: node (record host) to lease, in
// create order, failing t if etcd does not answer.
func holders(t testing.TB, c *clientv3.Client, group string, max int) []fleet.Holding {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, schema.Prefix(group, max), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatalf("reading %s: %v", schema.Prefix(group, max), err)
	}
	var out []fleet.Holding
	for _, kv := range resp.Kvs {
		r := schema.DecodeRecord(kv.Value)
		h := fleet.Holding{Key: string(kv.Key), Rev: kv.CreateRevision, Node: r.Host, HeldAfter: r.IsHeldAfter(), Via: r.Via}
		if r.HeldUntil != nil {
			h.Until = *r.HeldUntil
		}
		out = append(out, h)
	}
	return out
}

func nodes(hs []fleet.Holding) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Node)
	}
	return out
}

// holdJob is a conch sema job of node db-vacuum-node holding a slot of name[max], on a 5 s
// lease; the caller releases it.
func holdJob(t *testing.T, c *clientv3.Client, name string, max int) *sema.Holder {
	t.Helper()
	return sematest.MustAcquire(t, sematest.NewSem(t, c, name, max, sema.Options{Record: schema.Record{Host: "db-vacuum-node"}}))
}

// eventually polls cond (polltest.Until) until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	polltest.Until(t, within, what, cond)
}
