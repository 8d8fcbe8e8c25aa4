package diagnose

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Credentials are what a member's client config authenticates with, as
// the credentials check reads them.
type Credentials struct {
	// Certificate is the client certificate (PEM), if the config has one.
	Certificate []byte
	// Token is the bearer token, if the config has one.
	Token string
	// Plugin returns when the credential of the config's exec plugin
	// expires (zero: the plugin says not); nil without a plugin.
	Plugin func(context.Context) (time.Time, error)
}

// ExpiryWarning is how long before a member's credentials expire the
// credentials check warns.
const ExpiryWarning = 7 * 24 * time.Hour

// expiry is when one credential of a member expires.
type expiry struct {
	what string
	at   time.Time
}

// credentials checks that a member's client certificate and bearer token
// have not expired and do not within ExpiryWarning: those in a client
// config (a kubeconfig, a Secret) stay until someone renews them, and the
// member is lost the moment they expire. An exec plugin's credential only
// fails when it has already expired as the plugin hands it out: the
// plugin is run again for a new one, so a short life (minutes, as cloud
// providers' plugins give) is no reason to warn.
func credentials(ctx context.Context, m Member, now time.Time) Check {
	c := Check{Name: "credentials not about to expire", Member: m.ID}
	cr := m.Credentials
	if cr == nil {
		c.Result, c.Detail = Skip, "no client config of the member's to read"
		return c
	}
	var expiries []expiry
	if len(cr.Certificate) > 0 {
		at, err := certificateExpiry(cr.Certificate)
		if err != nil {
			c.Result, c.Detail, c.Fix = Fail, "client certificate: "+err.Error(), "give the member's client config a valid client certificate"
			return c
		}
		expiries = append(expiries, expiry{"client certificate", at})
	}
	if at, ok := tokenExpiry(cr.Token); ok {
		expiries = append(expiries, expiry{"bearer token", at})
	}
	if cr.Plugin != nil {
		at, err := cr.Plugin(ctx)
		switch {
		case err != nil:
			c.Result, c.Detail, c.Fix = Fail, "exec plugin: "+err.Error(), "run the member's credential plugin by hand and mend what it says"
			return c
		case !at.IsZero() && !now.Before(at):
			c.Result, c.Detail = Fail, "the exec plugin hands out a credential that expired at "+at.UTC().Format(time.RFC3339)
			c.Fix = "check the plugin's own login or cache (it should hand out a fresh credential)"
			return c
		case !at.IsZero():
			c.Detail = fmt.Sprintf("exec plugin's credential until %s (the plugin is run again for a new one); ", at.UTC().Format(time.RFC3339))
		}
	}
	judgeExpiries(&c, expiries, now)
	return c
}

// judgeExpiries sets c's result by the first of expiries to expire.
func judgeExpiries(c *Check, expiries []expiry, now time.Time) {
	if len(expiries) == 0 {
		c.Result = Pass
		c.Detail += "no client certificate or token of the config's that expires"
		return
	}
	slices.SortFunc(expiries, func(a, b expiry) int { return a.at.Compare(b.at) })
	first := expiries[0]
	renew := "renew the member's " + first.what + " in its client config (and in the Secret or file mcs-syncer reads it from)"
	switch left := first.at.Sub(now); {
	case left <= 0:
		c.Result, c.Fix = Fail, renew
		c.Detail += fmt.Sprintf("%s expired at %s", first.what, first.at.UTC().Format(time.RFC3339))
	case left < ExpiryWarning:
		c.Result, c.Fix = Warn, renew+" before then"
		c.Detail += fmt.Sprintf("%s expires in %s, at %s", first.what, left.Round(time.Minute), first.at.UTC().Format(time.RFC3339))
	default:
		c.Result = Pass
		var until []string
		for _, e := range expiries {
			until = append(until, e.what+" until "+e.at.UTC().Format(time.RFC3339))
		}
		c.Detail += strings.Join(until, ", ")
	}
}

// certificateExpiry is the NotAfter of the first certificate of pemData.
func certificateExpiry(pemData []byte) (time.Time, error) {
	block, _ := pem.Decode(pemData)
	if block == nil || block.Type != "CERTIFICATE" {
		return time.Time{}, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, err
	}
	return cert.NotAfter, nil
}

// tokenExpiry is the exp claim of a JWT bearer token (a ServiceAccount's,
// an OIDC provider's), read without verifying it: what the API server will
// hold the token to. A token that is no JWT, or has no exp, has none.
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	exp, err := claims.Exp.Float64()
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0), true
}
