package etcdconn

import "testing"

func TestCheckEndpoint(t *testing.T) { // D9: a bad endpoint is a usage error
	for _, ok := range []string{"127.0.0.1:2379", "etcd.internal:2379", "http://10.0.0.1:2379", "https://[::1]:2379/", "unix:///run/etcd.sock"} {
		if err := checkEndpoint(ok); err != nil {
			t.Errorf("checkEndpoint(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"notaurl::", "localhost", "ftp://x:1", "http://x", ":2379", "x:0", "x:99999", "unix://"} {
		if err := checkEndpoint(bad); err == nil {
			t.Errorf("checkEndpoint(%q) accepted", bad)
		}
	}
}
