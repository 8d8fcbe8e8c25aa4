package coredns

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// Lookup asks the DNS server at addr (a cluster's DNSAddr) for the A
// records of name and returns their addresses, sorted.
func Lookup(ctx context.Context, addr, name string) ([]string, error) {
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), dns.TypeA)
	in, _, err := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).ExchangeContext(ctx, msg, addr)
	if err != nil {
		return nil, err
	}
	if in.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s: %s", name, dns.RcodeToString[in.Rcode])
	}
	var ips []string
	for _, rr := range in.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	slices.Sort(ips)
	return ips, nil
}
