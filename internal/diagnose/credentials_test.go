package diagnose

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

// certificateUntil is a PEM client certificate valid until notAfter.
func certificateUntil(t *testing.T, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "member"},
		NotBefore: notAfter.Add(-365 * 24 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// tokenUntil is a JWT (unsigned: the check does not verify) whose exp is
// exp, as a bound ServiceAccount token carries it.
func tokenUntil(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(fmt.Sprintf(`{"iss":"https://kubernetes.default.svc","exp":%d}`, exp.Unix()))) + ".c2ln"
}

// TestCredentialsExpiry: a member's client certificate or bearer token
// that expires within 7 days warns (with what to do), one expired fails,
// the first to expire is named; an exec plugin's short-lived credential
// passes (the plugin is run again) unless it is handed out expired or the
// plugin fails; a static token has no expiry.
func TestCredentialsExpiry(t *testing.T) {
	day := 24 * time.Hour
	plugin := func(at time.Time, err error) func(context.Context) (time.Time, error) {
		return func(context.Context) (time.Time, error) { return at, err }
	}
	for _, tc := range []struct {
		name   string
		creds  *Credentials
		result Result
		detail string
	}{
		{"no client config", nil, Skip, "no client config"},
		{"a certificate for a year", &Credentials{Certificate: certificateUntil(t, t0.Add(365*day))}, Pass, "client certificate until 2027-11-27T12:00:00Z"},
		{"a certificate for 3 days", &Credentials{Certificate: certificateUntil(t, t0.Add(3*day))}, Warn, "client certificate expires in 72h0m0s, at 2026-11-30T12:00:00Z"},
		{"a certificate expired", &Credentials{Certificate: certificateUntil(t, t0.Add(-time.Hour))}, Fail, "client certificate expired at 2026-11-27T11:00:00Z"},
		{"a bound token for 2 days, a certificate for longer", &Credentials{Certificate: certificateUntil(t, t0.Add(30*day)), Token: tokenUntil(t0.Add(2 * day))}, Warn, "bearer token expires in 48h0m0s"},
		{"a bound token for 8 days", &Credentials{Token: tokenUntil(t0.Add(8 * day))}, Pass, "bearer token until 2026-12-05T12:00:00Z"},
		{"a static token", &Credentials{Token: "0123456789abcdef"}, Pass, "no client certificate or token of the config's that expires"},
		{"a plugin's credential for 15 minutes", &Credentials{Plugin: plugin(t0.Add(15*time.Minute), nil)}, Pass, "exec plugin's credential until 2026-11-27T12:15:00Z"},
		{"a plugin's credential handed out expired", &Credentials{Plugin: plugin(t0.Add(-time.Minute), nil)}, Fail, "hands out a credential that expired at 2026-11-27T11:59:00Z"},
		{"a plugin that fails", &Credentials{Plugin: plugin(time.Time{}, errors.New("credential plugin login: exit status 1"))}, Fail, "exec plugin: credential plugin login: exit status 1"},
		{"not a certificate", &Credentials{Certificate: []byte("garbage")}, Fail, "client certificate: no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := credentials(t.Context(), Member{ID: "east", Credentials: tc.creds}, t0)
			if c.Result != tc.result || !strings.Contains(c.Detail, tc.detail) || c.Member != "east" {
				t.Errorf("%s %q, want %s with %q", c.Result, c.Detail, tc.result, tc.detail)
			}
			if needsFix := c.Result == Fail || c.Result == Warn; needsFix != (c.Fix != "") {
				t.Errorf("%s with fix %q", c.Result, c.Fix)
			}
		})
	}
	if Failed([]Check{{Result: Warn}}) {
		t.Error("a warning fails the command")
	}
}
