package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made in a test with crypto/x509, for TLS tests: its
// certificate is in File, and Leaf signs server and client certificates with it.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	File string // the PEM file of cert
}

// serial numbers the certificates made here, one each.
var serial atomic.Int64

// NewCA makes a CA named name (its common name), written as dir/name.pem.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, key := sign(t, tmpl, nil, nil)
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{cert: cert, key: key, File: filepath.Join(dir, name+".pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// sign makes a key and a certificate of tmpl (with the next serial) signed by parent's key,
// or self-signed when parent is nil; it returns the certificate's DER and the key.
func sign(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// Cert is what a leaf certificate says: its validity period, and for a server
// certificate the IPs and DNS names it is for (none for a client certificate).
type Cert struct {
	NotBefore, NotAfter time.Time
	IPs                 []net.IP
	DNS                 []string
}

// Leaf writes a certificate signed by ca (and its key) as name.pem and
// name-key.pem in dir, saying what c says.
func (ca *CA) Leaf(t testing.TB, dir, name string, c Cert) (certFile, keyFile string) {
	t.Helper()
	der, key := sign(t, &x509.Certificate{
		Subject:   pkix.Name{CommonName: name},
		NotBefore: c.NotBefore, NotAfter: c.NotAfter, IPAddresses: c.IPs, DNSNames: c.DNS,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca.cert, ca.key)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ClientTLS is a tls.Config trusting ca and presenting cert/key.
func ClientTLS(t testing.TB, ca *CA, cert, key string) *tls.Config {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}
