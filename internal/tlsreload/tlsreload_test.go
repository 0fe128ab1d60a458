package tlsreload

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func served(t *testing.T, r *Reloader) string {
	t.Helper()
	c, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x.Subject.CommonName
}

// A changed pair is served without a signal; a broken one is refused and
// the previous pair kept.
func TestReloadOnFileChange(t *testing.T) {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	write := func(c, k []byte) {
		os.WriteFile(cf+".tmp", c, 0o600)
		os.WriteFile(kf+".tmp", k, 0o600)
		os.Rename(cf+".tmp", cf)
		os.Rename(kf+".tmp", kf)
	}
	c, k := selfSigned(t, "first")
	write(c, k)
	if _, err := New(cf, filepath.Join(dir, "missing"), 0, nil); err == nil {
		t.Fatal("a missing key file was accepted")
	}
	r, err := New(cf, kf, 10*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if served(t, r) != "first" {
		t.Fatal("first pair not served")
	}
	c2, k2 := selfSigned(t, "second")
	write(c2, k2)
	for deadline := time.Now().Add(10 * time.Second); served(t, r) != "second"; {
		if time.Now().After(deadline) {
			t.Fatal("the changed pair was not loaded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	loads := r.Loads()
	_, k3 := selfSigned(t, "third")
	write(c2, k3) // a key that does not match the certificate
	if err := r.Reload(); err == nil {
		t.Fatal("a mismatched pair was loaded")
	}
	if served(t, r) != "second" || r.Loads() != loads {
		t.Fatalf("after a failed reload: serving %q, loads %d (was %d)", served(t, r), r.Loads(), loads)
	}
}
