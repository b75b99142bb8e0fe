package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
)

// selfSigned writes a new self-signed certificate for 127.0.0.1 and its key
// as PEM files in dir and returns their paths and a pool trusting it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "holdfast test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLS runs the real binary with --tls-cert and --tls-key and a
// bearer token, and talks to it over a real TLS handshake: a client that
// trusts the certificate works, one that does not is refused at the
// handshake, plain HTTP gets no API answer, and the token is never logged.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	const secret = "tls-admin-secret-41c9"

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stderr := &lockedWriter{b: &strings.Builder{}}
	cmd := exec.Command(binary, "serve", "--listen", addr, "--store", filepath.Join(dir, "data"),
		"--tls-cert", certFile, "--tls-key", keyFile)
	cmd.Env = append(os.Environ(), "HOLDFAST_TOKENS=admin:"+secret, "HOLDFAST_CONFIG=")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})

	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + addr
	deadline := time.Now().Add(30 * time.Second)
	var state *tls.ConnectionState
	for {
		res, err := trusting.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				state = res.TLS
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("holdfast serve with TLS not ready after 30s: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if state == nil || !state.HandshakeComplete || state.Version < tls.VersionTLS12 {
		t.Fatalf("no complete TLS 1.2+ handshake: %+v", state)
	}

	c, err := client.New(client.Config{BaseURL: base, Token: secret, HTTPClient: trusting})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"tls/1"}, Owner: holdfast.Owner{Session: "s"}})
	if err != nil || len(res.Locks) != 1 {
		t.Fatalf("acquire over TLS: %v %+v", err, res)
	}

	// A client that does not trust the certificate fails at the handshake.
	untrusting, _ := client.New(client.Config{BaseURL: base, Token: secret})
	_, err = untrusting.Locks(ctx, holdfast.LockQuery{})
	var unknownAuthority x509.UnknownAuthorityError
	if !errors.As(err, &unknownAuthority) {
		t.Fatalf("a client without the certificate: %v, want an unknown authority error", err)
	}

	// Plain HTTP on the TLS port reaches no handler.
	plain, err := http.Get("http://" + addr + "/v1/locks")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP to the TLS port: status %d, want 400 from the TLS layer", plain.StatusCode)
		}
	}

	// Without the token, over TLS: 401.
	anon, _ := client.New(client.Config{BaseURL: base, HTTPClient: trusting})
	if _, err := anon.Locks(ctx, holdfast.LockQuery{}); !errors.Is(err, holdfast.ErrUnauthenticated) {
		t.Fatalf("no token over TLS: %v, want unauthenticated", err)
	}

	if strings.Contains(stderr.String(), secret) {
		t.Fatalf("the server's log contains the bearer token:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "https://") {
		t.Fatalf("the server does not say it serves https:\n%s", stderr.String())
	}
}

// String returns what was written so far.
func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
