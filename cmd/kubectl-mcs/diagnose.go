package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mcs-syncer/mcs-syncer/internal/credentials"
	"github.com/mcs-syncer/mcs-syncer/internal/diagnose"
)

// runDiagnose runs diagnose.
func runDiagnose(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "kubectl mcs diagnose:", err)
		return exitUsage
	}
	// --timeout in all: from the first read (an inventory's profiles) on.
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	conns, leftOut, err := o.members(ctx)
	if err != nil {
		return fail(err)
	}
	hub, err := o.hub()
	if err != nil {
		return fail(err)
	}
	checks, err := runChecks(ctx, conns, hub, o.timeout)
	if err != nil {
		return fail(err)
	}
	checks = append(checks, leftOutChecks(leftOut)...)
	if err := write(stdout, o.output, checks, func() string { return checksText(checks) }); err != nil {
		return fail(err)
	}
	if diagnose.Failed(checks) {
		return exitFailed
	}
	return exitOK
}

// runChecks runs diagnose's checks of the members, and of the hub if
// there is one, within total (the command's --timeout; ctx ends then).
func runChecks(ctx context.Context, conns []memberConn, hub *hubConn, total time.Duration) ([]diagnose.Check, error) {
	members, throughHub, err := diagnoseMembers(conns, total)
	if err != nil {
		return nil, err
	}
	checks := diagnose.Run(ctx, members, time.Now)
	for _, id := range throughHub {
		checks = append(checks, diagnose.Check{Name: "reachable", Member: id, Result: diagnose.Skip,
			Detail: "read through the hub: give a kubeconfig with a context per member to check it"})
	}
	if hub == nil {
		return checks, nil
	}
	c, err := newClient(hub.rest, requestWithin(hub.rest, total))
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	var ids []string
	for _, m := range conns {
		ids = append(ids, m.id)
	}
	return append(checks, diagnose.RunHub(ctx, &diagnose.Hub{Client: c, Namespace: hub.namespace, Members: ids})...), nil
}

// checksText renders checks as a table, then what to do about each
// failure and warning.
func checksText(checks []diagnose.Check) string {
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RESULT\tCHECK\tMEMBER\tDETAIL")
	var fixes []string
	for _, c := range checks {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.Result, c.Name, orDash(c.Member), c.Detail)
		if (c.Result == diagnose.Fail || c.Result == diagnose.Warn) && c.Fix != "" {
			fixes = append(fixes, fmt.Sprintf("%s (%s): %s", c.Name, orDash(c.Member), c.Fix))
		}
	}
	_ = w.Flush()
	if len(fixes) > 0 {
		out.WriteString("\nwhat to do:\n")
		for _, f := range fixes {
			out.WriteString("  " + f + "\n")
		}
	}
	return out.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// credentialsOf are the credentials of a member's client config, for
// diagnose's credentials check; an exec plugin is run (within timeout)
// only when the check asks when its credential expires.
func credentialsOf(rc *rest.Config, timeout time.Duration) (*diagnose.Credentials, error) {
	cr := &diagnose.Credentials{Certificate: rc.CertData, Token: rc.BearerToken}
	if len(cr.Certificate) == 0 && rc.CertFile != "" {
		raw, err := os.ReadFile(rc.CertFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cr.Certificate = raw
	}
	if cr.Token == "" && rc.BearerTokenFile != "" {
		raw, err := os.ReadFile(rc.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("bearer token: %w", err)
		}
		cr.Token = strings.TrimSpace(string(raw))
	}
	if rc.ExecProvider != nil {
		plugins := &credentials.Plugins{Timeout: timeout}
		cr.Plugin = func(ctx context.Context) (time.Time, error) { return plugins.Expiry(ctx, rc) }
	}
	return cr, nil
}

// leftOutChecks warn of each ClusterProfile of the inventory left out of
// the clusterset ("ClusterProfile namespace/name: why"): none of the
// checks above saw it.
func leftOutChecks(leftOut []string) []diagnose.Check {
	var checks []diagnose.Check
	for _, p := range leftOut {
		checks = append(checks, diagnose.Check{Name: "every inventory profile a member", Result: diagnose.Warn,
			Detail: "left out of the clusterset: " + p,
			Fix:    "mend the profile or the provider config as the reason says (docs/configuration.md, Members from an inventory)"})
	}
	return checks
}
